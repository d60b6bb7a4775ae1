"""Two architecture measures of the package, for issue 17's before/after table.

* **Import cycles**: the module import graph of ``hetero_solve`` (every ``import``, also those
  inside functions, which is how cycles usually hide), its strongly connected components with
  more than one module, and the pairs of modules that import each other.
* **Private state across modules**: ``obj._name`` (single underscore, not ``self``/``cls``)
  read or written in a module that does not define ``_name`` (as ``self._name = ...``, a class
  attribute or field, or a module-level name), and ``from m import _name``.

    python benchmarks/code_metrics.py              # the working tree
    python benchmarks/code_metrics.py --rev b005da0  # a commit (read through git, nothing checked out)

Prints a Markdown summary; ``--details`` lists every cycle and access.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
from collections import defaultdict
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "hetero_solve"


def sources(rev: str | None) -> dict[str, str]:
    """Module name -> source text of every ``.py`` file of the package."""
    if rev is None:
        files = {p.relative_to(ROOT).as_posix(): p.read_text() for p in (ROOT / PACKAGE).rglob("*.py")}
    else:
        listing = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, PACKAGE], cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout.split()
        files = {f: subprocess.run(["git", "show", f"{rev}:{f}"], cwd=ROOT, capture_output=True,
                                   text=True, check=True).stdout
                 for f in listing if f.endswith(".py")}
    out = {}
    for path, text in files.items():
        mod = path[:-3].replace("/", ".")
        if mod.endswith(".__init__"):
            mod = mod[: -len(".__init__")]
        out[mod] = text
    return out


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def import_graph(srcs: dict[str, str], *, typing: bool = True) -> nx.DiGraph:
    """Module -> modules it imports.  ``typing=False`` leaves out the imports under
    ``if TYPE_CHECKING:`` (annotations only: no dependency at run time, but still one of
    the design, which is why they count by default)."""
    g = nx.DiGraph()
    g.add_nodes_from(srcs)
    packages = {m for m in srcs if any(o.startswith(m + ".") for o in srcs)}
    for mod, text in srcs.items():
        tree = ast.parse(text)
        typing_only = set() if typing else {
            id(n) for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for stmt in block.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, mod in packages, node.level, node.module)
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for t in targets:
                # the deepest module of the package that the name denotes
                while t and t not in srcs:
                    t = t.rpartition(".")[0]
                if t and t != mod and t.startswith(PACKAGE):
                    g.add_edge(mod, t)
    return g


def cycles(g: nx.DiGraph) -> tuple[list[list[str]], list[tuple[str, str]]]:
    # A package's ``__init__`` importing its own submodules (re-exports, command registration)
    # is how Python packages are assembled, not a dependency between two designs: left out.
    g = g.copy()
    g.remove_edges_from([(a, b) for a, b in g.edges if b.startswith(a + ".")])
    sccs = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    pairs = sorted({tuple(sorted((a, b))) for a, b in g.edges if g.has_edge(b, a)})
    return sorted(sccs, key=len, reverse=True), pairs


def private_accesses(srcs: dict[str, str]) -> list[tuple[str, str, str]]:
    """``(module, attribute, "read"|"write"|"import")`` of private names used outside the
    modules that define them."""
    defined: dict[str, set[str]] = defaultdict(set)
    uses: list[tuple[str, str, str]] = []
    private = lambda a: a.startswith("_") and not a.startswith("__")  # noqa: E731
    for mod, text in srcs.items():
        tree = ast.parse(text)
        # names bound by ``import x`` (``os._exit`` is a module's function, not private state)
        modules = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
                   if isinstance(n, ast.Import) for a in n.names}
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "__dict__" and isinstance(node.slice, ast.Constant) \
                    and isinstance(node.slice.value, str) and private(node.slice.value):
                # obj.__dict__["_x"]: private state reached around the attribute syntax
                uses.append((mod, node.slice.value,
                             "write" if isinstance(node.ctx, ast.Store) else "read"))
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        if private(item.target.id):
                            defined[item.target.id].add(mod)
                    elif isinstance(item, ast.Assign):
                        for t in item.targets:
                            if isinstance(t, ast.Name) and private(t.id):
                                defined[t.id].add(mod)
                    elif isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and private(item.name):
                        defined[item.name].add(mod)
            elif isinstance(node, ast.Attribute) and private(node.attr):
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in modules:
                    continue
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    if isinstance(node.ctx, ast.Store):
                        defined[node.attr].add(mod)
                    continue
                uses.append((mod, node.attr, "write" if isinstance(node.ctx, ast.Store) else "read"))
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if private(a.name):
                        uses.append((mod, a.name, "import"))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and private(node.name):
                defined[node.name].add(mod)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name) and private(t.id):
                        defined[t.id].add(mod)
    return [(m, a, k) for m, a, k in uses if m not in defined.get(a, set())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", help="a git revision instead of the working tree")
    ap.add_argument("--details", action="store_true", help="list every cycle and access")
    args = ap.parse_args()
    srcs = sources(args.rev)
    g = import_graph(srcs)
    sccs, pairs = cycles(g)
    acc = private_accesses(srcs)
    where = args.rev or "working tree"
    print(f"| measure ({where}) | value |\n| --- | ---: |")
    print(f"| modules | {len(srcs)} |")
    print(f"| import cycles: strongly connected groups of modules | {len(sccs)} |")
    print(f"| modules inside an import cycle | {sum(len(c) for c in sccs)} |")
    print(f"| pairs of modules importing each other | {len(pairs)} |")
    run_sccs, _ = cycles(import_graph(srcs, typing=False))
    print(f"| ... of the groups, those left without `TYPE_CHECKING` imports | {len(run_sccs)} |")
    print(f"| private attributes used across modules: accesses | {len(acc)} |")
    print(f"| ... distinct attributes | {len({a for _, a, _ in acc})} |")
    print(f"| ... writes | {sum(1 for *_, k in acc if k == 'write')} |")
    if args.details:
        print("\nMutual imports:", ", ".join(f"{a} <-> {b}" for a, b in pairs) or "none")
        for c in sccs:
            print(f"\nCycle group ({len(c)}): {', '.join(c)}")
        counts: dict[tuple[str, str, str], int] = defaultdict(int)
        for item in acc:
            counts[item] += 1
        print("\nPrivate accesses (module, attribute, kind, count):")
        for (m, a, k), c in sorted(counts.items()):
            print(f"  {m}  {a}  {k}  {c}")


if __name__ == "__main__":
    main()
