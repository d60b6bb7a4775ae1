"""Import OpenVINO in the test process without its import-time telemetry.

``import openvino`` imports its model converter, which sends a usage event unless the
environment looks like CI (``CI=true``) or the user opted out; sending starts a thread pool
thread that lives until the interpreter exits.  A live thread makes later tests in the same
process see a multi-threaded parent (``hetero_solve.model.parallel.fork_pays`` refuses to
fork then).  Imported here with ``CI=true`` (what CI sets anyway), the event is never sent."""

from __future__ import annotations

import os


def import_openvino():
    """The ``openvino`` module, or None when it is not installed."""
    before = os.environ.get("CI")
    os.environ["CI"] = "true"
    try:
        import openvino
    except ImportError:
        return None
    finally:
        if before is None:
            del os.environ["CI"]
        else:
            os.environ["CI"] = before
    return openvino
