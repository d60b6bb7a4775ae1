"""Errors users see.  Each carries enough context (file, key path, node, reason)
to be printed as one line by the command line, which maps them to exit code 2."""

from __future__ import annotations

import warnings


class HeteroSolveError(Exception):
    """Base class: an input problem the user can fix.  ``str(e)`` is one line."""


class ModelError(HeteroSolveError):
    """The model cannot be read or is not a valid ONNX model."""

    def __init__(self, path: object, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class RuleError(HeteroSolveError):
    """A rule file is invalid.  Names the file, the key path and the reason."""

    def __init__(self, path: object, key: str, reason: str):
        self.path = str(path)
        self.key = key
        self.reason = reason
        where = f"{self.path}: {key}" if key else self.path
        super().__init__(f"{where}: {reason}")


class OutputError(HeteroSolveError):
    """OUT_DIR cannot receive the answer: it holds files this tool did not write, it is not a
    folder, or it cannot be written."""

    def __init__(self, path: object, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class InfeasibleError(HeteroSolveError):
    """No partition exists: a node no device can take, or memory that cannot hold the model."""

    def __init__(self, reason: str, nodes: list[str] | None = None):
        self.reason = reason
        self.nodes = list(nodes or [])
        super().__init__(reason)


class CostError(HeteroSolveError):
    """A cost objective (``latency``, ``throughput``) without the times it needs, or measured
    times that do not fit the model (docs/costs.md)."""


class ValidationError(HeteroSolveError):
    """An answer breaks one of the five conditions of the problem (a bug if it is ours)."""

    def __init__(self, violations: list):
        self.violations = list(violations)
        head = "; ".join(str(v) for v in self.violations[:3])
        more = f" (and {len(self.violations) - 3} more)" if len(self.violations) > 3 else ""
        super().__init__(f"invalid partition: {head}{more}")


class HeteroSolveWarning(UserWarning):
    """Category of every warning the library issues (a glob pin that matches no node, a
    dimension with no value, a part file that will not pass ``onnx.checker``...).  The same
    texts are in the result's ``warnings`` list.  Silence them with
    ``warnings.filterwarnings("ignore", category=HeteroSolveWarning)``, or make them errors
    with ``"error"``."""


def warn(message: str, stacklevel: int = 2) -> None:
    """Issue ``message`` as a :class:`HeteroSolveWarning`.  ``stacklevel`` as for
    :func:`warnings.warn`, counted from the caller of this function (2: its caller's caller,
    the user's code when called from a public entry point)."""
    warnings.warn(message, HeteroSolveWarning, stacklevel=stacklevel + 1)


def one_line(e: BaseException | str, limit: int = 400) -> str:
    """An exception's message on one line, whitespace collapsed, cut at ``limit`` characters."""
    text = " ".join(str(e).split())
    return text[:limit] + ("..." if len(text) > limit else "")
