"""Optimality comparison studies: many algorithms over many models and rule files, every
answer checked by the one validator, shown as ``results.csv``, ``summary.md`` and plots.

>>> from pathlib import Path
>>> from hetero_solve.study import StudyConfig, run_study
>>> cfg = StudyConfig(models=[Path("examples/seed000.onnx")], rules=[Path("rules/seed000.yaml")],
...                   out_dir=Path("study-out"), algorithms=["heuristic", "openvino"])
>>> result = run_study(cfg, progress=False)                          # doctest: +SKIP
>>> [(r["algorithm"], r["parts"], r["valid"]) for r in result.records]  # doctest: +SKIP
[('heuristic', 3, True), ('openvino', 3, True)]

The command line is ``hetero-solve study MODELS... --rules RULES...`` (``docs/study.md``).
"""

from .algorithms import ALGORITHMS, Algorithm, AlgorithmUnavailable
from .core import StudyConfig, StudyError, StudyResult, compile_pair, load_results, run_study
from .runner import Job, judge, measure, run_job
from .summary import analyse, machine_info

__all__ = ["ALGORITHMS", "Algorithm", "AlgorithmUnavailable", "StudyConfig", "StudyError",
           "StudyResult", "compile_pair", "load_results", "run_study", "Job", "judge", "measure",
           "run_job", "analyse", "machine_info"]
