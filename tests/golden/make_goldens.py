"""Write the reference ``partition.json`` of every example x profile (timing fields removed).

``tests/test_golden.py`` holds the pipeline to these files: a refactor must leave them byte for
byte the same.  A change that is *meant* to change answers regenerates them in the same commit
and says why in its message:

    .venv/bin/python tests/golden/make_goldens.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

#: Fields that measure time (or depend on how long something ran) rather than the answer.
TIMING_KEYS = {"seconds", "stages", "stage_seconds", "exact_seconds", "deterministic_seconds", "wall",
               "deterministic_time", "deterministic"}
#: The references are solved with a work limit (deterministic seconds, no clock): the same
#: answer at any load.  2.5 is what ``--time-limit 5`` gives (hetero_solve/budget.py).
WORK_LIMIT = 2.5


def strip_timing(value):
    """``value`` without the keys in :data:`TIMING_KEYS`, at any depth."""
    if isinstance(value, dict):
        return {k: strip_timing(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [strip_timing(v) for v in value]
    return value


def cases() -> list[tuple[Path, Path]]:
    models = sorted((ROOT / "examples").glob("*.onnx"))
    rules = sorted((ROOT / "rules").glob("*.yaml"))
    return [(m, r) for m in models for r in rules]


def golden_name(model: Path, rules: Path) -> str:
    return f"{model.stem}--{rules.stem}.json"


def partition_json(model: Path, rules: Path) -> str:
    """The manifest the pipeline writes for ``model`` x ``rules``, timing removed, as text.
    Paths are made relative to the repository so the files do not depend on the checkout."""
    import hetero_solve as hs
    from make_examples import EXAMPLE_DIMS

    result = hs.solve(model, rules, dims=EXAMPLE_DIMS[model.stem], work_limit=WORK_LIMIT)
    with tempfile.TemporaryDirectory() as tmp:
        out = hs.write_result(result, Path(tmp) / "out", submodels=False, annotated=False)
        manifest = json.loads((out / "partition.json").read_text())
    text = json.dumps(strip_timing(manifest), indent=1, sort_keys=True)
    return text.replace(str(ROOT) + "/", "")


def main() -> None:
    for model, rules in cases():
        (HERE / golden_name(model, rules)).write_text(partition_json(model, rules) + "\n")
        print(golden_name(model, rules))


if __name__ == "__main__":
    main()
