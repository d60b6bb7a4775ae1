"""Write the reference ``partition.json`` of every committed corpus model x profile.

The corpus counterpart of ``make_goldens.py`` (same timing fields removed, same rule: a refactor
leaves these files byte for byte the same; a change meant to change answers regenerates them in
the same commit and says why):

    .venv/bin/python tests/golden/make_corpus_goldens.py

A case the pipeline refuses (a profile whose devices cannot run the model) is recorded as the
error's class and message, so a refusal that changes is caught too.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent / "corpus"
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))

from make_goldens import strip_timing  # noqa: E402

#: Short: the references only need to be deterministic, and 98 cases run in CI.  A work limit
#: (deterministic seconds, no clock): the same answer at any load; what ``-t 1`` gives.
WORK_LIMIT = 0.5


def cases() -> list[tuple[str, Path]]:
    """(model name, rule file) for every committed corpus model and bundled profile."""
    entries = yaml.safe_load((ROOT / "corpus" / "corpus.yaml").read_text())["models"]
    models = sorted(n for n, e in entries.items() if e.get("stored") == "committed")
    rules = sorted((ROOT / "rules").glob("*.yaml"))
    return [(m, r) for m in models for r in rules]


def golden_name(model: str, rules: Path) -> str:
    return f"{model}--{rules.stem}.json"


def partition_json(model: str, rules: Path) -> str:
    """The manifest for ``model`` x ``rules`` as text, timing removed, paths repository-relative;
    or the refusal, as ``{"refused": class, "message": text}``."""
    import hetero_solve as hs

    entry = yaml.safe_load((ROOT / "corpus" / "corpus.yaml").read_text())["models"][model]
    path = ROOT / "corpus" / "models" / f"{model}.onnx"
    kw = {"dims": dict(entry.get("dims") or {}), "work_limit": WORK_LIMIT}
    if entry.get("shapes"):
        kw["shapes"] = {k: list(v) for k, v in entry["shapes"].items()}
    try:
        result = hs.solve(path, rules, **kw)
    except hs.HeteroSolveError as exc:
        value = {"refused": type(exc).__name__, "message": str(exc)}
    else:
        with tempfile.TemporaryDirectory() as tmp:
            out = hs.write_result(result, Path(tmp) / "out", submodels=False, annotated=False)
            value = strip_timing(json.loads((out / "partition.json").read_text()))
    text = json.dumps(value, indent=1, sort_keys=True)
    return text.replace(str(ROOT) + "/", "")


def main() -> None:
    HERE.mkdir(exist_ok=True)
    for model, rules in cases():
        (HERE / golden_name(model, rules)).write_text(partition_json(model, rules) + "\n")
        print(golden_name(model, rules), flush=True)


if __name__ == "__main__":
    main()
