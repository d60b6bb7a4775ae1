"""CLI start-up: the CPU a fresh process spends importing ``hetero_solve.cli`` and the module of
its default command, ``solve`` (what ``hetero-solve MODEL RULES`` imports before it reads the
model; other commands' modules load when they run), next to a bare interpreter, in paired
interleaved rounds.

    python benchmarks/bench_startup.py --rounds 10 [--baseline DIR]

Each round starts, in turn, ``python -c pass`` (the interpreter alone), this tree's
``import hetero_solve.cli`` and, with ``--baseline DIR`` (another checkout, e.g. ``git
worktree add /tmp/before main``), that tree's; a child reports its own user + system CPU
(``resource.getrusage``) after the import, started as the console script is (its
``argv[0]``: what the package checks before pausing the collector while it loads).  ``import`` = the child's CPU minus the bare
interpreter's of the same round.  Bytecode is compiled first (``compileall``, as ``pip
install`` does).  Target (issue 35): <= 0.3 s of CPU.  Prints a Markdown table; quote it with
the load printed beside it (run under ``/work/bin/timing`` on the shared machine).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = ("import sys\n"
         "sys.argv[0] = '/usr/bin/hetero-solve'   # as the console script starts\n"
         "import resource{0}\n"
         "r = resource.getrusage(resource.RUSAGE_SELF)\n"
         "print(r.ru_utime + r.ru_stime)")


def cpu(tree: Path | None) -> float:
    """One fresh process's CPU seconds: the bare interpreter (``tree`` None) or the import."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code = CHILD.format("" if tree is None else "\nimport hetero_solve.cli, hetero_solve.cli.solve")
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd="/")
    return float(out.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout to compare")
    args = ap.parse_args()
    trees = {"this tree": ROOT}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    for tree in trees.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "hetero_solve")],
                       env={k: v for k, v in os.environ.items()
                            if k != "PYTHONDONTWRITEBYTECODE"}, check=True,
                       stdout=subprocess.DEVNULL)
    bare: list[float] = []
    got: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        b = cpu(None)
        bare.append(b)
        for name, tree in trees.items():
            got[name].append(cpu(tree) - b)
    print(f"| tree | import hetero_solve.cli + cli.solve, s of CPU (median) | min-max | rounds |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| bare interpreter (whole process) | {statistics.median(bare):.3f} | "
          f"{min(bare):.3f}-{max(bare):.3f} | {args.rounds} |")
    for name, xs in got.items():
        print(f"| {name} | {statistics.median(xs):.3f} | {min(xs):.3f}-{max(xs):.3f} | "
              f"{args.rounds} |")
    if args.baseline is not None:
        diffs = [a - b for a, b in zip(got["baseline"], got["this tree"])]
        print(f"\nsaved (median of paired differences): {statistics.median(diffs):.3f} s")


if __name__ == "__main__":
    main()
