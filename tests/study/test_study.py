"""The study: results.csv / summary.md / plots from a small study over the examples, every
answer validated, failures recorded with their reason, and restarts that recompute nothing
already done (counted by the algorithms themselves)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from hetero_solve.algorithms.baselines import BASELINES, BaselineSkipped
from hetero_solve.algorithms.greedy import heuristic
from hetero_solve.cli import main
from hetero_solve.solution import Solution, evaluate
from hetero_solve.study import (AlgorithmUnavailable, StudyConfig, StudyError, analyse,
                                compile_pair, load_results, run_study)
from hetero_solve.study.store import COLUMNS, read_csv, rules_digest, run_key
from hetero_solve.study.summary import render
from hetero_solve.validate import validate
from isolated import in_child

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"
RU = ROOT / "rules"
EXACT = importlib.util.find_spec("hetero_solve.exact") is not None


def config(tmp_path, **kw) -> StudyConfig:
    base = dict(models=[EX / "seed000.onnx", EX / "control_flow.onnx"],
                rules=[RU / "seed000.yaml", RU / "gpu-cpu.yaml"], out_dir=tmp_path / "out",
                algorithms=["heuristic", "openvino", "glow"], time_limit=1.0, plots=False)
    base.update(kw)
    return StudyConfig(**base)


class Counting:
    """An algorithm that counts its calls (inline studies only: counters live in-process)."""

    def __init__(self, fn, fail_on: int | None = None):
        self.fn = fn
        self.calls = 0
        self.fail_on = fail_on

    def __call__(self, problem, *, budget=None, seed=0):
        self.calls += 1
        if self.fail_on is not None and self.calls == self.fail_on:
            raise KeyboardInterrupt        # the user pressing Ctrl-C during this run
        return self.fn(problem)


# -- a small study over the examples --------------------------------------------------------

def test_small_study_writes_csv_summary_and_plots(tmp_path):
    algs = ["heuristic", *BASELINES, "cpsat"]
    cfg = config(tmp_path, algorithms=algs, plots=True, note="test machine")
    result = run_study(cfg, progress=False)
    out = cfg.out_dir
    rows = load_results(out)
    assert len(rows) == 2 * 2 * len(algs) == len(result.records)
    assert list(rows[0]) == COLUMNS
    assert result.computed == len(rows) and result.reused == 0

    # Every row agrees with running the algorithm directly and validating its answer.
    problems = {}
    for row in rows:
        key = (row["model"], row["rules"])
        if key not in problems:
            problems[key] = compile_pair(Path(row["model"]), Path(row["rules"]), {})
        p = problems[key]
        assert row["nodes"] == p.n
        if row["algorithm"] == "cpsat":
            assert row["status"] == ("unavailable" if not EXACT else row["status"])
            if not EXACT:
                assert "not available" in row["reason"]
                continue
        fn = (heuristic if row["algorithm"] in ("heuristic", "cpsat")
              else BASELINES[row["algorithm"]].run)
        sol = fn(p)
        violations = validate(p, sol)
        if row["algorithm"] != "cpsat":
            assert row["parts"] == sol.num_parts, row
            assert row["valid"] == (not violations)
            assert row["reason"] == (str(violations[0]) if violations else "")
            assert row["objective"] == list(p.objective.key(evaluate(p, sol).as_dict()))
            assert row["objective_spec"] == p.objective.describe()
        assert row["seconds"] >= 0 and row["peak_memory"] >= 0
        assert row["memory_method"] == "rss"

    summary = (out / "summary.md").read_text()
    a = analyse(result.records, algs)
    for alg in algs:
        assert f"| {alg} | 4 |" in summary
    # The per-problem best is the minimum over valid answers, and each gap is measured to it.
    for (model, rules), info in a["problems"].items():
        valid = [r["parts"] for r in info["runs"].values() if r.get("valid")]
        assert info["best"] == min(valid)
    assert "test machine" in summary and "## Machine" in summary and "CPU" in summary
    for stem in ("parts", "time"):
        for ext in ("png", "svg"):
            f = out / f"{stem}.{ext}"
            assert f.is_file() and f.stat().st_size > 1000, f
    assert (out / "parts.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (out / "time.svg").read_bytes()[:500]


def test_restart_recomputes_nothing_already_done(tmp_path):
    h, g = Counting(heuristic), Counting(BASELINES["glow"].run)
    cfg = config(tmp_path, algorithms=["h", "g"], custom={"h": h, "g": g})
    first = run_study(cfg, progress=False)
    assert (h.calls, g.calls) == (4, 4) and first.computed == 8
    csv_before = (cfg.out_dir / "results.csv").read_text()

    again = run_study(cfg, progress=False)
    assert (h.calls, g.calls) == (4, 4)                    # nothing ran again
    assert (again.computed, again.reused) == (0, 8)
    assert (cfg.out_dir / "results.csv").read_text() == csv_before

    # Losing one finished run (as if the study died before it) recomputes that run only.
    victim = next(r for r in again.records if r["algorithm"] == "g")
    os.remove(cfg.out_dir / "runs" / f"{victim['key']}.json")
    third = run_study(cfg, progress=False)
    assert (h.calls, g.calls) == (4, 5) and third.computed == 1


def test_interrupted_study_keeps_finished_runs_and_resumes(tmp_path):
    h = Counting(heuristic, fail_on=3)      # Ctrl-C during the third run
    cfg = config(tmp_path, algorithms=["h"], custom={"h": h})
    with pytest.raises(KeyboardInterrupt):
        run_study(cfg, progress=False)
    assert len(list((cfg.out_dir / "runs").glob("*.json"))) == 2
    assert len(load_results(cfg.out_dir)) == 2             # the tables show what finished

    h.fail_on = None
    resumed = run_study(cfg, progress=False)
    assert h.calls == 3 + 2                                # only the two missing runs ran
    assert (resumed.computed, resumed.reused) == (2, 2)
    assert all(r["valid"] for r in resumed.records)


def test_failures_skips_unavailable_and_invalid_answers_are_recorded(tmp_path):
    def boom(problem, **kw):
        raise ValueError("no luck")

    def skip(problem, **kw):
        raise BaselineSkipped("skipped: too large (test)")

    missing = Counting(lambda p: (_ for _ in ()).throw(AlgorithmUnavailable("not in this build")))

    def one_part(problem, **kw):             # everything on the first device: often invalid
        return Solution([0] * problem.n, [0], [0], algorithm="one-part")

    bad_rules = tmp_path / "acc-only.yaml"      # control_flow has nodes no device takes
    bad_rules.write_text("version: 1\ndevices:\n  - name: ACC\n    ops: {supported: [Relu]}\n")
    cfg = config(tmp_path, models=[EX / "control_flow.onnx"], rules=[RU / "gpu-cpu.yaml", bad_rules],
                 algorithms=["boom", "skip", "missing", "one-part"],
                 custom={"boom": boom, "skip": skip, "missing": missing, "one-part": one_part})
    result = run_study(cfg, progress=False)
    by = {(Path(r["rules"]).name, r["algorithm"]): r for r in result.records}
    assert by[("gpu-cpu.yaml", "boom")]["status"] == "failed"
    assert by[("gpu-cpu.yaml", "boom")]["reason"] == "ValueError: no luck"
    assert by[("gpu-cpu.yaml", "skip")]["status"] == "skipped"
    assert by[("gpu-cpu.yaml", "missing")]["status"] == "unavailable"
    one = by[("gpu-cpu.yaml", "one-part")]
    assert one["valid"] is False and one["reason"].startswith("support:")   # GPU refuses If/Loop
    for alg in ("boom", "skip", "missing", "one-part"):
        r = by[("acc-only.yaml", alg)]
        assert r["status"] == "failed" and r["reason"].startswith("compile: InfeasibleError")
    summary = (cfg.out_dir / "summary.md").read_text()
    assert "invalid: support:" in summary and "ValueError: no luck" in summary

    # "unavailable" says nothing about the algorithm: it is tried again on restart; the
    # deterministic outcomes (failed, skipped, invalid) are not.
    run_study(cfg, progress=False)
    assert missing.calls == 2


def test_resume_key_follows_file_contents_and_time_limit_only_where_used(tmp_path):
    inc = tmp_path / "inc.yaml"
    inc.write_text("value_inputs: {Reshape: [1]}\n")
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\ninclude: [inc.yaml]\ndevices:\n  - name: CPU\n    ops: {supported: all}\n")
    d1 = rules_digest(rules)
    inc.write_text("value_inputs: {Reshape: []}\n")
    assert rules_digest(rules) != d1                        # an edited include reruns
    copy = tmp_path / "copy.yaml"
    copy.write_text(rules.read_text())
    assert rules_digest(copy) == rules_digest(rules)        # a renamed copy reuses
    assert run_key("m", "r", {}, "glow", None, None) != run_key("m", "r", {"batch": 2}, "glow",
                                                                 None, None)
    # Baselines ignore the time limit, so changing it keeps their runs; an algorithm that
    # uses it (custom ones are assumed to, like CP-SAT and SAT) runs again.
    limited = Counting(heuristic)
    cfg = config(tmp_path, models=[EX / "seed000.onnx"], rules=[RU / "seed000.yaml"],
                 algorithms=["openvino", "limited"], custom={"limited": limited})
    run_study(cfg, progress=False)
    cfg.time_limit = 2.0
    again = run_study(cfg, progress=False)
    assert (again.reused, again.computed, limited.calls) == (1, 1, 2)
    assert {r["algorithm"]: r["time_limit"] for r in again.records} == {"openvino": None,
                                                                        "limited": 2.0}
    # a work limit (no clock) is another mode: recorded, and a new key for the limited one
    cfg.time_limit, cfg.work_limit = None, 1.0
    work = run_study(cfg, progress=False)
    assert (work.reused, work.computed, limited.calls) == (1, 1, 3)
    assert {r["algorithm"]: (r["time_limit"], r["work_limit"]) for r in work.records} == {
        "openvino": (None, None), "limited": (None, 1.0)}


def test_a_study_records_the_limit_mode_and_whether_the_clock_ended_a_run(tmp_path):
    cfg = config(tmp_path, models=[EX / "seed000.onnx"], rules=[RU / "seed000.yaml"],
                 algorithms=["cpsat"], time_limit=None, work_limit=0.5)
    result = run_study(cfg, progress=False)
    rows = read_csv(tmp_path / "out" / "results.csv")
    assert [(r["work_limit"], r["time_limit"], r["deterministic"]) for r in rows] == [
        (0.5, None, True)]
    assert "Work limit 0.5 deterministic s" in (tmp_path / "out" / "summary.md").read_text()
    assert result.records[0]["deterministic"] is True
    cfg.time_limit = 1.0
    with pytest.raises(StudyError):
        run_study(cfg, progress=False)


def test_analyse_best_known_gap_and_proven_optimum():
    def rec(alg, model, parts, key, valid=True, status="feasible", lb=None, fallback=0):
        lexicographic = len(key) == 3
        return {"model": model, "rules": "r", "algorithm": alg, "parts": parts, "valid": valid,
                "status": status, "lower_bound": lb, "seconds": 0.1, "peak_memory": 10,
                "nodes": 5, "fallback": fallback, "objective": list(key),
                "objective_before_parts": ["fallback"] if lexicographic else []}
    records = [
        # m1, lexicographic (fallback, parts, transfer): nothing proven.
        rec("a", "m1", 3, (0, 3, 10)), rec("b", "m1", 5, (0, 5, 5)),
        rec("c", "m1", 2, (0, 2, 0), valid=False),
        # m2: b proves the optimum, a reaches it too.
        rec("a", "m2", 4, (0, 4, 7)), rec("b", "m2", 4, (0, 4, 7), status="optimal", lb=4),
        # m3, weighted {fallback: 1, partitions: 10}: b trades 6 nodes of fallback for 1 part.
        rec("a", "m3", 3, (30,)), rec("b", "m3", 1, (16,), status="optimal", lb=1, fallback=6),
        {"model": "m4", "rules": "r", "algorithm": "a", "status": "failed"},
        # m5: b "proves" an optimum that a's valid answer beats: a bug to report.
        rec("a", "m5", 3, (0, 3, 5)), rec("b", "m5", 3, (0, 3, 9), status="optimal"),
        # m6: b proves 4 parts for fallback <= 0 but not its transfer; a meets that bound,
        # c has 4 parts too but more fallback, which the bound does not speak about.
        rec("b", "m6", 4, (0, 4, 9), lb=4), rec("a", "m6", 4, (0, 4, 5)),
        rec("c", "m6", 4, (1, 4, 0), fallback=1),
    ]
    a = analyse(records, ["a", "b", "c"])
    p = a["problems"]
    assert p[("m1", "r")]["best"] == 3                     # the invalid 2 does not count
    assert p[("m1", "r")]["optimum_key"] is None           # nothing proves anything
    assert p[("m2", "r")]["optimum_key"] == (0, 4, 7)
    assert p[("m3", "r")]["best"] == 1 and p[("m3", "r")]["optimum_key"] == (16,)
    assert p[("m5", "r")]["inconsistent"] == ["b"]
    assert all(not p[(m, "r")]["inconsistent"] for m in ("m1", "m2", "m3"))
    s = a["algorithms"]
    assert s["a"]["runs"] == 6 and s["a"]["solved"] == 5 and s["a"]["other"]["failed"] == 1
    assert s["a"]["mean_gap"] == pytest.approx((0 + 0 + 2 + 0 + 0) / 5)
    assert s["b"]["mean_gap"] == pytest.approx((2 + 0 + 0 + 0 + 0) / 5)
    assert (s["a"]["optimal"], s["b"]["optimal"], s["b"]["proved"]) == (1, 3, 3)
    assert (s["a"]["best_objective"], s["b"]["best_objective"]) == (4, 2)
    # Parts meeting a covering bound: a on m2 and m6; b on m2, m3 and m6; c nowhere.
    assert (s["a"]["parts_proven"], s["b"]["parts_proven"], s["c"]["parts_proven"]) == (2, 3, 0)
    assert s["c"]["valid"] == 1 and s["c"]["mean_gap"] == 0
    text = render(records, ["a", "b", "c"], config={})
    assert "| m3 | r | 5 | 1 |" in text and "1* (fb 6)" in text
    assert "| m6 | r | 5 | 4 | 4 | 4° | 4° | 4 (fb 1) |" in text
    assert "## Inconsistencies" in text


# -- executors ------------------------------------------------------------------------------

def _outcomes(records):
    return [(Path(r["model"]).name, Path(r["rules"]).name, r["algorithm"], r.get("parts"),
             r.get("valid"), r["status"]) for r in records]


def test_local_processes_give_the_inline_answers(tmp_path):
    inline = run_study(config(tmp_path / "a", out_dir=tmp_path / "a"), progress=False)
    cfg = config(tmp_path / "b", out_dir=tmp_path / "b", jobs=2)
    pooled = run_study(cfg, progress=False)
    assert _outcomes(pooled.records) == _outcomes(inline.records)
    assert {r["worker_pid"] for r in pooled.records}.isdisjoint({os.getpid()})
    mtimes = {f: f.stat().st_mtime_ns for f in (cfg.out_dir / "runs").glob("*.json")}
    again = run_study(cfg, progress=False)
    assert again.computed == 0 and again.reused == len(mtimes)
    assert mtimes == {f: f.stat().st_mtime_ns for f in (cfg.out_dir / "runs").glob("*.json")}


def _dask_local_cluster(tmp_path):
    inline = run_study(config(tmp_path / "a", out_dir=tmp_path / "a",
                              models=[EX / "seed000.onnx"]), progress=False)
    cfg = config(tmp_path / "b", out_dir=tmp_path / "b", models=[EX / "seed000.onnx"],
                 executor="dask", jobs=1)
    dasked = run_study(cfg, progress=False)
    return (_outcomes(inline.records), _outcomes(dasked.records),
            {r["worker_pid"] for r in dasked.records}, os.getpid())


def test_dask_local_cluster_gives_the_inline_answers(tmp_path):
    # In a child: Dask's event-loop threads outlive its clusters and clients.
    pytest.importorskip("dask.distributed")
    inline, dasked, workers, me = in_child(_dask_local_cluster, tmp_path)
    assert dasked == inline
    assert workers.isdisjoint({me})


def _dask_scheduler_address(tmp_path):
    from dask import distributed
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            worker_pids = set(client.run(os.getpid).values())
        cfg = config(tmp_path, models=[EX / "seed000.onnx"], rules=[RU / "seed000.yaml"],
                     executor="dask", scheduler=cluster.scheduler_address)
        result = run_study(cfg, progress=False)
    return worker_pids, [(r["worker_pid"], r["parts"]) for r in result.records]


def test_dask_scheduler_address_runs_on_that_cluster(tmp_path):
    pytest.importorskip("dask.distributed")
    worker_pids, runs = in_child(_dask_scheduler_address, tmp_path)
    assert {pid for pid, _ in runs} <= worker_pids
    assert [parts for _, parts in runs] == [3, 3, 3]


def test_bad_study_options_are_clear_errors(tmp_path):
    with pytest.raises(StudyError, match="unknown algorithm 'nope'"):
        run_study(config(tmp_path, algorithms=["nope"]), progress=False)
    with pytest.raises(StudyError, match="no such file"):
        run_study(config(tmp_path, models=[tmp_path / "missing.onnx"]), progress=False)
    with pytest.raises(StudyError, match="--scheduler needs --executor dask"):
        run_study(config(tmp_path, scheduler="tcp://x:1"), progress=False)
    assert not (tmp_path / "out").exists()                 # nothing half-written


# -- command line ---------------------------------------------------------------------------

def test_cli_study_takes_yaml_arguments_as_rules(tmp_path, capsys):
    out = tmp_path / "cli"
    with pytest.raises(SystemExit) as e:
        main(["study", str(EX / "seed000.onnx"), "--rules", str(RU / "seed000.yaml"),
              str(RU / "gpu-cpu.yaml"), "-a", "heuristic,openvino", "-a", "longest-path",
              "-o", str(out), "--no-plots", "-q"])
    assert e.value.code in (0, None)
    rows = load_results(out)
    assert {(Path(r["rules"]).name, r["algorithm"]) for r in rows} == {
        (rf, a) for rf in ("seed000.yaml", "gpu-cpu.yaml")
        for a in ("heuristic", "openvino", "longest-path")}
    assert "openvino" in capsys.readouterr().out

    with pytest.raises(SystemExit) as e:
        main(["study", str(EX / "seed000.onnx"), "-r", str(RU / "seed000.yaml"), "-a", "bogus",
              "-o", str(tmp_path / "x")])
    assert e.value.code == 2
    assert "unknown algorithm 'bogus'" in capsys.readouterr().err


def test_measure_modes():
    from hetero_solve.study.runner import measure
    calls = []

    def work():
        calls.append(1)
        block = bytearray(4_000_000)          # a 4 MB allocation the tracer must see
        return len(block)

    answer, seconds, peak = measure(work, "tracemalloc")
    assert answer == 4_000_000 and seconds >= 0 and peak >= 4_000_000
    assert len(calls) == 2                    # timed untraced, then traced for memory
    answer, seconds, peak = measure(work, "rss")
    assert answer == 4_000_000 and isinstance(peak, int) and peak >= 0 and len(calls) == 3
    assert measure(work, "none")[2] is None and len(calls) == 4
    with pytest.raises(ValueError, match="memory method"):
        measure(work, "bogus")


def test_a_device_refusing_nodes_for_want_of_a_dim_is_marked_as_solve_says(tmp_path):
    """Issue 24: the NPU profile is static-shape and the transformer's ``seq`` has no value:
    ``solve`` says the NPU refused nodes only for that; the study's rows say so too (``†``
    and the same line), not a bare proven optimum."""
    import hetero_solve as hs
    model, rules = EX / "transformer_encoder.onnx", RU / "npu-static.yaml"
    with pytest.warns(Warning):
        said = hs.solve(model, rules, engine="heuristic").problem.info.warnings
    line = next(w for w in said if "only because dim 'seq' has no value" in w)
    cfg = config(tmp_path, models=[model], rules=[rules], algorithms=["heuristic", "openvino"])
    run_study(cfg, progress=False)
    rows = load_results(cfg.out_dir)
    assert [r["missing_dims"] for r in rows] == [line, line]
    summary = (cfg.out_dir / "summary.md").read_text()
    row = next(x for x in summary.splitlines() if x.startswith("| transformer_encoder.onnx"))
    assert row.count("†") == 2
    assert f"- transformer_encoder.onnx × npu-static.yaml: {line}" in summary
    # Given the dim, nothing is marked.
    cfg = config(tmp_path, models=[model], rules=[rules], algorithms=["heuristic"],
                 dims={"seq": 16}, out_dir=tmp_path / "given")
    run_study(cfg, progress=False)
    assert [r["missing_dims"] for r in load_results(cfg.out_dir)] == [""]
    assert "†" not in (cfg.out_dir / "summary.md").read_text().split("## Parts per problem")[1] \
        .split("| model |")[1]


def test_open_dims_are_marked_on_the_terminal_and_in_the_plot_and_progress_reads(
        tmp_path, capsys, monkeypatch):
    """Issue 31: the terminal table and the parts plot say what summary.md says (†), and the
    progress line reads 'running in this process', not 'running on in this process'."""
    from hetero_solve.study import plots
    labels = []
    real_save = plots._save

    def save(fig, out_dir, stem):
        if stem == "parts":
            labels.extend(t.get_text() for t in fig.axes[0].get_xticklabels())
            labels.append(fig.axes[0].get_title())
        return real_save(fig, out_dir, stem)
    monkeypatch.setattr(plots, "_save", save)
    with pytest.raises(SystemExit) as e:
        main(["study", str(EX / "transformer_encoder.onnx"), "-r", str(RU / "npu-static.yaml"),
              "-a", "heuristic", "-o", str(tmp_path / "s"), "-v"])
    assert e.value.code in (0, None)
    out, err = capsys.readouterr()
    assert "running in this process" in err and "running on in" not in err
    assert "dims with no value in 1 problem(s)" in out and "only because dim 'seq'" in out
    assert labels and labels[0].startswith("transformer_encoder †"), labels
    assert "†: dims with no value" in labels[-1]
