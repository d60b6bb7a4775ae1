"""docs/run-verify-check.md, "Options named in messages": a library message that says which
value to give names it by the command's option, and every such option is in the doc's table
of library arguments (issue 39 item 1: the doc said library messages name no option while
``Result.warnings`` said ``give --dim NAME=VALUE``)."""

from __future__ import annotations

import ast
import re

from conftest import ROOT

#: Texts that are the command line itself, not a message: a module's own ``python -m``
#: options, the study's reproduction lines, the rule-file format's documentation.
OWN_COMMAND_LINES = {"hetero_solve/rules/catalog.py", "hetero_solve/study/core.py",
                     "hetero_solve/study/executors.py", "hetero_solve/study/runner.py",
                     "hetero_solve/study/summary.py", "hetero_solve/rules/schema.py"}


def _options_in_library_texts() -> dict[str, set[str]]:
    """``--option`` -> the files whose string literals (docstrings aside) name it, outside
    the command line's own package."""
    found: dict[str, set[str]] = {}
    for f in sorted((ROOT / "hetero_solve").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        if rel.startswith("hetero_solve/cli/") or rel in OWN_COMMAND_LINES:
            continue
        tree = ast.parse(f.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr)
                and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docs:
                for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", node.value):
                    found.setdefault(option, set()).add(rel)
    return found


def test_every_option_a_library_message_names_is_in_the_docs_table():
    doc = (ROOT / "docs" / "run-verify-check.md").read_text(encoding="utf-8")
    table = doc.split("**Options named in messages.**", 1)[1].split("\n\n", 2)[1]
    listed = set(re.findall(r"`(--[a-z][a-z-]*[a-z])", table))
    found = _options_in_library_texts()
    assert {"--dim", "--shape", "--costs"} <= set(found)      # the scan finds them
    missing = {o: sorted(files) for o, files in found.items() if o not in listed}
    assert not missing, f"options named by library messages but not in the table: {missing}"
