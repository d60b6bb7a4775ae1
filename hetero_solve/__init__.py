"""hetero-solve: split an ONNX model into the fewest parts for heterogeneous devices.

The pipeline, one module per step::

    load_model  ->  compile_problem  ->  heuristic  ->  refine (exact)  ->  validate  ->  write_result

and around it: ``Session`` (the parts loaded once, run like an onnxruntime session), ``run``
(the parts in onnxruntime), ``verify`` (against the original),
``check_affinity`` (a user-defined split), ``query_rules`` (what each device takes).

>>> import hetero_solve as hs
>>> result = hs.solve("examples/resnet_like.onnx", "rules/npu-static.yaml")   # doctest: +SKIP
>>> result.metrics.partitions, hs.write_result(result, "out/")               # doctest: +SKIP
"""

from .gcpause import pause_for_imports as _pause_for_imports
from .interrupt import guard_imports as _guard_imports

_guard_imports()   # first: Ctrl-C while the command's libraries load is one line, exit 130
_pause_for_imports()   # and no collections while they load (restarted by cli.main)

from .algorithms.greedy import greedy, heuristic  # noqa: E402
from .compile import compile_problem
from .export import write_result
from .errors import (HeteroSolveError, HeteroSolveWarning, InfeasibleError, ModelError, RuleError,
                     ValidationError)
from .model import ModelGraph, load_model
from .pipeline import refine, solve
from .result import Result
from .problem import Device, Objective, Problem, make_problem
from .rules import Rules, load_rules
from .solution import Solution, evaluate, normalize
from .validate import Violation, check, validate
from . import run   # a package that is also the function run(out_dir, ...): see run/__init__.py
from .run import InputShapeError, RunResult, Session
from .user_partition import CheckReport, check_affinity
from .run.verify import VerifyReport, verify
from .rules.check import query as query_rules

__version__ = "0.1.0"

__all__ = [
    "solve", "Result", "write_result", "refine", "run", "RunResult", "Session", "verify",
    "VerifyReport", "check_affinity",
    "CheckReport", "query_rules", "load_model", "ModelGraph", "load_rules", "Rules",
    "compile_problem", "Problem", "Device", "Objective", "make_problem", "heuristic", "greedy",
    "Solution", "evaluate", "normalize", "validate", "check", "Violation",
    "HeteroSolveError", "HeteroSolveWarning", "ModelError", "RuleError", "InfeasibleError",
    "ValidationError", "InputShapeError",
]
