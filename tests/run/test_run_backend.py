"""The backend interface of ``hetero_solve.run`` (issue 25): backends are found by name and
imported only when asked for; ``hetero_solve.run`` is the package and the function at once."""

from __future__ import annotations

import subprocess
import sys

import pytest

import hetero_solve as hs
from hetero_solve.export import write_result
from hetero_solve.run.backend import BACKENDS, load_backend
from hetero_solve.run.common import RunError
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


def test_a_misspelt_backend_is_refused_before_any_input_is_drawn(tmp_path, capsys):
    """``run --backend openvinoo`` (issue 39 item 3): exit 2, one line with the closest name
    and every choice (auto too), and no word of random inputs (none were drawn)."""
    from hetero_solve.cli import main
    out = write_result(hs.solve(str(EXAMPLES / "seed000.onnx"), str(RULES / "seed000.yaml")),
                       tmp_path / "out")
    with pytest.raises(SystemExit) as e:
        main(["run", str(out), "--no-save", "--backend", "openvinoo"])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert err.strip().splitlines() == [
        "hetero-solve: error: unknown backend 'openvinoo' (did you mean 'openvino'?): "
        "expected one of auto, onnxruntime, openvino"]
    with pytest.raises(RunError, match="unknown backend 'ORT'"):
        hs.Session(out, backend={"CPU": "ORT"})


def test_a_device_map_for_parts_that_run_on_onnxruntime_is_refused(tmp_path, capsys):
    """``run --device-map ACCEL=AUTO`` on an answer whose parts all run on onnxruntime (no
    ``--backend openvino``, rule file without OpenVINO runtimes) was silently ignored (issue 39
    item 1): exit 2, one line naming the device, its runtime and the backend that would take
    the map."""
    from hetero_solve.cli import main
    out = write_result(hs.solve(str(EXAMPLES / "seed000.onnx"), str(RULES / "seed000.yaml")),
                       tmp_path / "out")
    for backend in ([], ["--backend", "onnxruntime"]):
        with pytest.raises(SystemExit) as e:
            main(["run", str(out), "--no-save", "--device-map", "ACCEL=AUTO", *backend])
        err = capsys.readouterr().err
        assert e.value.code == 2
        assert "error: device map ACCEL=AUTO: ACCEL's parts run on onnxruntime" in err
        assert "the openvino backend" in err and len(err.strip().splitlines()) == 1


def test_execution_settings_and_spinning_entries():
    import pytest as _pytest
    from hetero_solve.run.backend import (RunOptions, execution_differences,
                                          ort_spinning_entries)
    from hetero_solve.run.onnxruntime import session_options
    assert ort_spinning_entries("stop") == {"session.force_spinning_stop": "1"}
    assert ort_spinning_entries("off") == {"session.intra_op.allow_spinning": "0"}
    assert ort_spinning_entries("on") == {}
    with _pytest.raises(ValueError, match="spinning 'fast'"):
        ort_spinning_entries("fast")
    opts = session_options(RunOptions())
    assert opts.get_session_config_entry("session.force_spinning_stop") == "1"
    opts = session_options(RunOptions(spinning="off", intra_op_threads=1))
    assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert opts.intra_op_num_threads == 1
    a = RunOptions(intra_op_threads=1).execution()
    assert RunOptions.of_execution(a, profile=True) == RunOptions(intra_op_threads=1,
                                                                  profile=True)
    assert RunOptions.of_execution(None) == RunOptions()
    assert execution_differences(a, RunOptions().execution()) == [("threads", 1, 0)]
    assert execution_differences(None, RunOptions().execution()) == []
