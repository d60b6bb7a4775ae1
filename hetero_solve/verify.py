"""Compatibility: ``verify`` moved to :mod:`hetero_solve.run.verify`; its names stay here so
that code written against this module keeps working."""

from __future__ import annotations

from .run.verify import (DEFAULT_TOLERANCE, EPS_FACTOR, TOLERANCES, OutputDiff, VerifyError,
                         VerifyReport, compare, default_tolerance, quantized_outputs, verify)

__all__ = ["DEFAULT_TOLERANCE", "EPS_FACTOR", "TOLERANCES", "OutputDiff", "VerifyError",
           "VerifyReport", "compare", "default_tolerance", "quantized_outputs", "verify"]
