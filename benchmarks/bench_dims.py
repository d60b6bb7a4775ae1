"""Dims left open, axis by axis against onnxruntime (issue 32): the corpus's models with named
input dims, loaded with every dim open.

    python benchmarks/bench_dims.py                       # writes benchmarks/results/dims.json
    python benchmarks/bench_dims.py --label before --json /tmp/before.json   # another tree's code

Each model runs in onnxruntime at two settings of its dims (``SETTINGS``: the corpus's dims
and another, consistent one: ``total_sequence = past_sequence + sequence``); every axis of
every main-graph tensor is then static (a number, the runtime's at both), symbolic (an
expression of the dim names, the runtime's value at both), open (unknown) or wrong (must be 0)
(``corpus.truth.open_axes``).  ``hetero_solve`` is imported from ``PYTHONPATH`` first, so the
same script measures an older tree (``PYTHONPATH=/old/tree``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import time
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))   # after PYTHONPATH: hetero_solve may come from another tree

import hetero_solve as hs  # noqa: E402

_spec = importlib.util.spec_from_file_location("corpus_truth", ROOT / "corpus" / "truth.py")
T = importlib.util.module_from_spec(_spec)
sys.modules["corpus_truth"] = T
_spec.loader.exec_module(T)

#: Two settings of each model's dims (the corpus's first).
SETTINGS = {
    "qwen2-kv-tiny-legacy": [dict(batch=1, sequence=16, past_sequence=32, total_sequence=48),
                             dict(batch=2, sequence=7, past_sequence=4, total_sequence=11)],
    "t5-tiny-legacy": [dict(batch=1, sequence=16, decoder_sequence=8),
                       dict(batch=2, sequence=11, decoder_sequence=5)],
    "t5-tiny-dynamo": [dict(batch=1, sequence=16, decoder_sequence=8),
                       dict(batch=2, sequence=11, decoder_sequence=5)],
    "whisper-encoder-tiny-legacy": [dict(batch=1), dict(batch=3)],
    "whisper-encoder-tiny-dynamo": [dict(batch=1), dict(batch=3)],
    "bert-tiny-legacy": [dict(batch=1, sequence=16), dict(batch=2, sequence=11)],
    "bert-tiny-dynamo": [dict(batch=1, sequence=16), dict(batch=2, sequence=11)],
    "mobilenetv2-tiny-legacy": [dict(batch=1, height=160, width=160),
                                dict(batch=2, height=192, width=224)],
    "resnet-tiny-legacy": [dict(batch=1), dict(batch=3)],
}


def evaluate(d, dims):
    """The value of one of hetero-solve's dims at a setting (an older tree writes names only)."""
    try:
        from hetero_solve.model.symbolic import evaluate as ev
    except ImportError:
        return d if isinstance(d, int) else dims.get(d) if isinstance(d, str) else None
    return ev(d, dims)


def measure(name: str) -> dict:
    path = T.model_file(name)
    model = onnx.load(str(path))
    start = time.perf_counter()
    mg = hs.load_model(path)
    seconds = time.perf_counter() - start
    entry = T.load_corpus()[name]
    axes = T.open_axes(model, SETTINGS[name], lambda x: mg.tensor_type(x).shape, evaluate,
                       ranges=entry.get("ranges"))
    return {"model": name, **axes.as_dict(), "load_seconds": round(seconds, 2),
            "open_rows": [list(map(str, r)) for r in axes.open],
            "wrong_rows": [list(map(str, r)) for r in axes.wrong]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=list(SETTINGS))
    ap.add_argument("--label", default="after")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "dims.json"))
    ap.add_argument("--before", help="a JSON this script wrote with older code: also write "
                    "benchmarks/results/dims.md, before against after")
    args = ap.parse_args(argv)
    rows = []
    for name in args.models:
        if not T.model_file(name).exists():
            continue
        row = measure(name)
        rows.append(row)
        print(f"{name:30s} axes {row['axes']:5d} static {row['static']:5d} symbolic "
              f"{row['symbolic']:5d} open {row['open']:4d} (fixed at run time: "
              f"{row['open_fixed']:3d}) wrong {row['wrong']}", flush=True)
    out = {"label": args.label, "hetero_solve": Path(hs.__file__).parent.name,
           "machine": platform.node(), "rows": rows}
    Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    if args.before:
        write_table(json.loads(Path(args.before).read_text()), out)
    return 0


def write_table(before: dict, after: dict) -> None:
    """``benchmarks/results/dims.md``: per model, axes open (and of those, fixed at run time)
    and wrong, before and after."""
    old = {r["model"]: r for r in before["rows"]}
    lines = ["# Dims left open, axis by axis against onnxruntime (issue 32)", "",
             "`python benchmarks/bench_dims.py --before BEFORE.json` (every input dim open; "
             "onnxruntime at two settings of the dims, `SETTINGS` in the script). An axis is "
             "*static* (a number, the runtime's at both), *symbolic* (an expression of the dim "
             "names, the runtime's value at both), *open* (unknown; *fixed*: of those, the "
             "ones whose size is the same at both settings, a number that could have been "
             "known) or *wrong* (contradicted by the runtime: must be 0).", "",
             f"Before: `{before['label']}`; after: `{after['label']}`. Machine "
             f"`{after['machine']}`; load seconds are single runs on a shared machine.", "",
             "| model | axes | static before → after | symbolic before → after | open before → after "
             "| open and fixed at run time | wrong | load s before → after |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in after["rows"]:
        b = old.get(r["model"])
        if b is None:
            continue
        lines.append(f"| {r['model']} | {r['axes']} | {b['static']} → {r['static']} | "
                     f"{b['symbolic']} → {r['symbolic']} | {b['open']} → {r['open']} | "
                     f"{b['open_fixed']} → {r['open_fixed']} | {b['wrong']} → {r['wrong']} | "
                     f"{b['load_seconds']} → {r['load_seconds']} |")
    (ROOT / "benchmarks" / "results" / "dims.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
