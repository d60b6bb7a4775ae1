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


COMMAND_CHECK = """
import sys
from hetero_solve.cli import COMMAND_MODULES, main
try:
    main({argv!r})
except SystemExit:
    pass
loaded = sorted({{m for ms in COMMAND_MODULES.values() for m in ms
                  if "hetero_solve.cli." + m in sys.modules}})
print(",".join(loaded), file=sys.stderr)
"""


def _command_modules_after(argv: list[str]) -> tuple[list[str], str]:
    out = subprocess.run([sys.executable, "-c", COMMAND_CHECK.format(argv=argv)], check=True,
                         capture_output=True, text=True)
    return out.stderr.strip().splitlines()[-1].split(","), out.stdout


def test_a_command_loads_its_own_module_alone():
    assert _command_modules_after(["dims", str(EXAMPLES / "seed000.onnx")])[0] == ["dims"]
    assert _command_modules_after(["rules", "schema"])[0] == ["rules", "rules_runtime"]
    # the default command, MODEL RULES without a command name: solve's module alone
    loaded, text = _command_modules_after([str(EXAMPLES / "seed000.onnx"),
                                           str(RULES / "gpu-cpu.yaml"), "--help"])
    assert loaded == ["solve"] and "--time-limit" in text


def test_the_help_lists_every_command_with_its_line():
    from hetero_solve.cli import COMMAND_MODULES
    loaded, text = _command_modules_after(["--help"])
    assert set(loaded) == {m for ms in COMMAND_MODULES.values() for m in ms}
    listed = [line.split()[0] for line in text.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == list(COMMAND_MODULES)
    for line in text.split("Commands:")[1].splitlines():
        if line.strip():
            assert len(line.split(None, 1)) == 2, line   # name and its one-line help
