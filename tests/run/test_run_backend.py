"""The backend interface of ``hetero_solve.run`` (issue 25): backends are found by name and
imported only when asked for; ``hetero_solve.run`` is the package and the function at once."""

from __future__ import annotations

import subprocess
import sys

import pytest

import hetero_solve as hs
from hetero_solve.export import write_result
from hetero_solve.run.backend import BACKENDS, load_backend
from hetero_solve.run.manifest import load_manifest

from conftest import EXAMPLES, RULES


def test_run_is_the_function_whatever_is_imported_first(tmp_path):
    result = hs.solve(str(EXAMPLES / "seed000.onnx"), str(RULES / "seed000.yaml"))
    out = write_result(result, tmp_path / "o")
    code = ("import hetero_solve.run.backend as b, hetero_solve as hs, sys\n"
            f"r = hs.run({str(out)!r}, save=None)\n"
            "print(len(r.parts), sorted(b.BACKENDS))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split()[0] == str(len(load_manifest(out)["partitions"]))


def test_an_unknown_backend_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown backend 'tvm'.*onnxruntime"):
        load_backend("tvm")
    assert "onnxruntime" in BACKENDS and "openvino" in BACKENDS
