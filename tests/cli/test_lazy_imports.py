"""The command line starts without the libraries only some answers need: OR-Tools' CP-SAT
module (it imports pandas) is imported when a CP-SAT model is built, so a command whose answer
needs no solver (one part, or proven by a bound) never pays for it."""

from __future__ import annotations

import subprocess
import sys

from conftest import EXAMPLES, RULES

CHECK = """
import sys
{before}
heavy = [m for m in ("ortools.sat.python.cp_model", "pandas") if m in sys.modules]
print(",".join(heavy))
"""


def _heavy_after(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", CHECK.format(before=code)], check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def test_the_command_line_imports_no_solver_library():
    assert _heavy_after("import hetero_solve.cli") == ""


def test_a_one_part_answer_imports_no_solver_library():
    code = (f"import hetero_solve as hs\n"
            f"r = hs.solve({str(EXAMPLES / 'seed000.onnx')!r}, {str(RULES / 'gpu-cpu.yaml')!r})\n"
            f"assert r.solution.num_parts == 1 and r.solution.status == 'optimal'")
    assert _heavy_after(code) == ""
