"""Compatibility: the runner moved to :mod:`hetero_solve.run` (``session``, ``inputs``,
``onnxruntime``, ``report``, ``manifest``).  The names this module had are kept here so that
code written against it keeps working; new code imports from the package."""

from __future__ import annotations

from .run.common import RunError
from .run.inputs import (INT_HIGH, RANDOM_ELEMENTS, InputSpec, check_dims, check_inputs,
                         check_ranges, check_shapes, concrete_shape, graphs_index_bounds,
                         index_bounds, load_npy, model_input_specs, numpy_dtype, numpy_kind,
                         part_input_specs, random_inputs, spec_of, with_shapes)
from .run.manifest import MANIFEST_KEYS, PART_KEYS, load_manifest
from .run.onnxruntime import (DEFAULT_PROVIDERS, providers_for, resolve_providers,
                              run_original, run_original_timed)
from .run.report import PartRun, RunResult, output_file_names, save_outputs
from .run.session import Session, run, run_partitioned

__all__ = ["RunError", "INT_HIGH", "RANDOM_ELEMENTS", "InputSpec", "check_dims", "check_inputs",
           "check_ranges", "check_shapes", "concrete_shape", "graphs_index_bounds",
           "index_bounds", "load_npy", "model_input_specs", "numpy_dtype", "numpy_kind",
           "part_input_specs", "random_inputs", "spec_of", "with_shapes", "MANIFEST_KEYS",
           "PART_KEYS", "load_manifest", "DEFAULT_PROVIDERS", "providers_for",
           "resolve_providers", "run_original", "run_original_timed", "PartRun", "RunResult",
           "output_file_names", "save_outputs", "Session", "run", "run_partitioned"]
