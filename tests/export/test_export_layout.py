"""Export owns the output: the modules in ``hetero_solve/export`` never import the pipeline or
the ``Result`` record at run time (no ``pipeline <-> export`` cycle), ``Result`` is a record that
imports nothing of ``export`` (its files are ``export``'s functions of it), and ``run/``, which
export reads, imports nothing of ``export``."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import hetero_solve
from hetero_solve import export
from hetero_solve.export import affinity_map, build_manifest
from hetero_solve.result import Result

EXPORT_DIR = Path(hetero_solve.__file__).parent / "export"


def _runtime_imports(path: Path) -> set[str]:
    """Modules imported at run time: everything but ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()

    def visit(nodes):
        for node in nodes:
            if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
                continue
            if isinstance(node, ast.ImportFrom):
                found.add("." * node.level + (node.module or ""))
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            for child in ast.iter_child_nodes(node):
                visit([child])

    visit(tree.body)
    return found


def test_export_never_imports_the_pipeline_or_the_result():
    for path in sorted(EXPORT_DIR.glob("*.py")):
        imports = _runtime_imports(path)
        bad = {m for m in imports if m.rsplit(".", 1)[-1] in ("pipeline", "result")}
        assert not bad, f"{path.name} imports {bad}"


def test_the_result_imports_nothing_of_export():
    """The record is below the files built from it: no loop between them."""
    imports = _runtime_imports(EXPORT_DIR.parent / "result.py")
    assert not {m for m in imports if "export" in m.split(".")}, imports


def test_run_imports_nothing_of_export():
    for path in sorted((EXPORT_DIR.parent / "run").glob("*.py")):
        imports = _runtime_imports(path)
        assert not {m for m in imports if "export" in m.split(".")}, f"{path.name}: {imports}"


def test_result_is_a_record_and_its_outputs_come_from_export(tmp_path):
    fields = [f.name for f in dataclasses.fields(Result)]
    assert fields == ["model_graph", "rules", "problem", "solution", "metrics", "seconds",
                      "warnings", "explanation", "instance", "single_device", "measured"]
    result = hetero_solve.solve("examples/resnet_like.onnx", "rules/npu-static.yaml",
                                engine="heuristic")
    assert not any(hasattr(result, name) for name in ("write", "manifest", "affinity"))
    assert build_manifest(result, files=False)["partitions"]
    annotated = export.build_annotated_model(result.model_graph, result.problem, result.solution)
    tags = {n.name: {e.key: e.value for e in n.metadata_props} for n in annotated.graph.node}
    for name, device in affinity_map(result.problem, result.solution).items():
        assert tags[name]["affinity"] == device
