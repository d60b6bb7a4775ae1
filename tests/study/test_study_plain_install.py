"""``study`` on the plain install (issue 15, item 5): no psutil, no matplotlib.  Peak memory
comes from the standard library, and the missing plots are said before the runs start."""

from __future__ import annotations

import importlib.util

import pytest

from conftest import EXAMPLES, RULES
from hetero_solve.study import StudyConfig, run_study
from hetero_solve.study import runner


@pytest.fixture
def plain_install(monkeypatch):
    real = importlib.util.find_spec

    def find_spec(name, *args, **kw):
        if name.split(".")[0] in ("psutil", "matplotlib"):
            return None
        return real(name, *args, **kw)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_study_runs_without_psutil_and_matplotlib(plain_install, tmp_path, capsys):
    assert runner.rss_source() == "resource"
    config = StudyConfig(models=[EXAMPLES / "seed000.onnx"], rules=[RULES / "seed000.yaml"],
                         out_dir=tmp_path / "study", algorithms=["heuristic", "openvino"],
                         time_limit=1.0, memory="rss")
    result = run_study(config, progress=False)
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith("hetero-solve: matplotlib is not installed")
    assert "warning" not in err                       # not said a second time at the end
    assert len(result.records) == 2
    assert all(r["peak_memory"] not in (None, "") and int(r["peak_memory"]) >= 0
               for r in result.records), result.records
    assert not list((tmp_path / "study").glob("*.png"))
    summary = (tmp_path / "study" / "summary.md").read_text()
    assert "resource.getrusage" in summary


def test_peak_rss_sees_a_large_allocation():
    with runner._PeakRss() as peak:
        block = bytearray(200 << 20)           # 200 MiB, touched
        block[::4096] = b"x" * len(block[::4096])
    assert peak.peak_increase >= 100 << 20 or peak.base >= 200 << 20
    del block
