"""Architecture measures of the package, for the before/after tables of issues 17 and 22.

* **Sizes** (issue 22): the largest class and the largest function (lines from ``def``/``class``
  to the last line of its body, nested functions and methods counted on their own), and how many
  functions are over 50 and over 80 lines.
* **Duplicate blocks** (issue 22): the pairs of places in ``hetero_solve/`` sharing six or more
  identical or same-shape lines, as the ``duplicates`` command counts them (skipped with a note
  when that command is not installed).
* **Import cycles**: the module import graph of ``hetero_solve`` (every ``import``, also those
  inside functions, which is how cycles usually hide), its strongly connected components with
  more than one module, and the pairs of modules that import each other.
* **Loops between packages** (issue 29): the same graph with every module replaced by its
  top-level package or module (``hetero_solve.exact.search`` -> ``hetero_solve.exact``), its
  strongly connected groups: a layer that imports a layer above it.
* **Imports hidden inside functions** (issue 29): ``import``/``from`` statements of the package
  inside a function body (each statement once); they belong at the top unless they load a heavy
  optional dependency lazily.
* **Private state across modules**: ``obj._name`` (single underscore, not ``self``/``cls``)
  read or written in a module that does not define ``_name`` (as ``self._name = ...``, a class
  attribute or field, or a module-level name), and ``from m import _name``.

    python benchmarks/code_metrics.py              # the working tree
    python benchmarks/code_metrics.py --rev b005da0  # a commit (read through git, nothing checked out)
    python benchmarks/code_metrics.py --write      # benchmarks/results/code-metrics.md: issue 22's
                                                   # before columns and the working tree as "after"

Prints a Markdown summary; ``--details`` lists every cycle, access and long function.
"""

from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import tarfile
import tempfile
from collections import defaultdict
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "hetero_solve"
#: Issue 22's "before" columns: the commit the issue was read at, and the session's start;
#: then the commits issues 29 and 35 were read at.
BEFORE = ("985ef8f", "6bdb9c4", "d14ead8", "6594e74")
#: Test-tier times, measured (not computed here): issue 35's after column states them below
#: the table.
TIERS = ("Test tiers at the after column (issue 35 item 1): `suite -q` (the fast tier) 1,717 "
         "tests in 75 s at load about 2 (2 cores shared with other work); `pytest --full` "
         "5,176 tests in 343 s at load about 2 (the run that wrote tests/durations.json, "
         "42cdfb5).  Before issue 35: 4,538 tests, one tier, 669 s at load 4-6.")
RESULT = ROOT / "benchmarks" / "results" / "code-metrics.md"


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


def package_loops(g: nx.DiGraph) -> list[list[str]]:
    """Strongly connected groups of the graph of top-level packages and modules."""
    top = lambda m: ".".join(m.split(".")[:2])  # noqa: E731
    h = nx.DiGraph()
    h.add_edges_from((top(a), top(b)) for a, b in g.edges if top(a) != top(b))
    return sorted((sorted(c) for c in nx.strongly_connected_components(h) if len(c) > 1),
                  key=len, reverse=True)


def local_imports(srcs: dict[str, str]) -> list[tuple[str, int, str]]:
    """``(module, line, statement)`` of every import of the package inside a function."""
    out = set()
    for mod, text in srcs.items():
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for n in ast.walk(fn):
                if (isinstance(n, ast.ImportFrom) and (n.level > 0 or (n.module or "").startswith(PACKAGE))) \
                        or (isinstance(n, ast.Import) and any(a.name.startswith(PACKAGE) for a in n.names)):
                    out.add((mod, n.lineno, ast.unparse(n)))
    return sorted(out)


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


def sizes(srcs: dict[str, str]) -> dict:
    """The largest class and function (lines, ``module:qualified.name``) and the functions
    (methods and nested functions too) over 50 and over 80 lines."""
    funcs: list[tuple[int, str]] = []
    classes: list[tuple[int, str]] = []

    def visit(node: ast.AST, mod: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                lines = child.end_lineno - child.lineno + 1
                into = classes if isinstance(child, ast.ClassDef) else funcs
                into.append((lines, f"{mod}:{name}"))
                visit(child, mod, name + ".")
            else:
                visit(child, mod, prefix)

    for mod, text in srcs.items():
        visit(ast.parse(text), mod, "")
    funcs.sort(key=lambda x: (-x[0], x[1]))
    classes.sort(key=lambda x: (-x[0], x[1]))
    return {"largest_function": funcs[0], "largest_class": classes[0],
            "over_50": [f for f in funcs if f[0] > 50], "over_80": [f for f in funcs if f[0] > 80],
            "lines": sum(t.count("\n") for t in srcs.values())}


def time_limit_functions(srcs: dict[str, str]) -> list[str]:
    """Functions with a parameter named ``time_limit`` (``module:name``): issue 29 wants them
    at the entry points only, every other function taking the one ``Budget``."""
    found = []
    for mod, text in srcs.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
                if "time_limit" in names:
                    found.append(f"{mod}:{node.name}")
    return sorted(found)


def duplicate_pairs(rev: str | None) -> int | None:
    """Pairs of places in ``hetero_solve/`` sharing 6+ lines, by the ``duplicates`` command
    (on an exported copy of ``rev``'s package); ``None`` where that command is not installed."""
    tool = shutil.which("duplicates")
    if tool is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        if rev is None:
            repo = ROOT / PACKAGE
        else:
            archive = subprocess.run(["git", "archive", rev, PACKAGE], cwd=ROOT,
                                     capture_output=True, check=True).stdout
            with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
                tar.extractall(tmp, filter="data")
            repo = Path(tmp) / PACKAGE
        out = subprocess.run([tool, "--repo", str(repo), "--most", "1", "--seconds", "120"],
                             capture_output=True, text=True).stdout
    first = out.splitlines()[0] if out else ""
    if first.startswith("no duplicates"):
        return 0
    head = first.split(" ", 1)[0]
    return int(head) if head.isdigit() else None


def measures(rev: str | None) -> dict:
    """Every measure of one tree (``rev`` None = the working tree), as table rows."""
    srcs = sources(rev)
    g = import_graph(srcs)
    sccs, pairs = cycles(g)
    run_sccs, _ = cycles(import_graph(srcs, typing=False))
    sz = sizes(srcs)
    dup = duplicate_pairs(rev)
    (fl, fn), (cl, cn) = sz["largest_function"], sz["largest_class"]
    return {
        "modules": str(len(srcs)),
        "lines of `hetero_solve/**/*.py`": f"{sz['lines']:,}",
        "largest class (lines)": f"{cl} `{cn}`",
        "largest function (lines)": f"{fl} `{fn}`",
        "functions over 50 lines": str(len(sz["over_50"])),
        "functions over 80 lines": str(len(sz["over_80"])),
        "import cycles (strongly connected groups, `TYPE_CHECKING` imports counted)": str(len(sccs)),
        "modules inside an import cycle": str(sum(len(c) for c in sccs)),
        "import cycles left without `TYPE_CHECKING` imports": str(len(run_sccs)),
        "pairs of modules importing each other": str(len(pairs)),
        "loops between packages (strongly connected groups of top-level packages, `TYPE_CHECKING` imports counted)":
            str(len(package_loops(g))),
        "loops between packages at run time (`TYPE_CHECKING` imports left out)":
            str(len(package_loops(import_graph(srcs, typing=False)))),
        "package imports inside functions": str(len(local_imports(srcs))),
        "duplicate blocks (`duplicates` pairs in `hetero_solve/`)": "n/a" if dup is None else str(dup),
        "private attributes used across modules": str(len(private_accesses(srcs))),
        "functions taking a `time_limit` (modules)":
            f"{len(tl := time_limit_functions(srcs))} ({len({f.split(':')[0] for f in tl})})",
    }


def write_table(after: str | None) -> str:
    """``code-metrics.md``: issue 22's before columns and ``after`` (the working tree when None)."""
    cols = [(rev, measures(rev)) for rev in BEFORE]
    label = after or "working tree"
    head = subprocess.run(["git", "rev-parse", "--short", after or "HEAD"], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip()
    cols.append((f"after ({label} at {head})", measures(after)))
    L = ["# Code measures, before and after issues 22, 29 and 35", "",
         "Made by `python benchmarks/code_metrics.py --write` (rerun it on the final tree: it "
         "rewrites this file, the before columns read from git, the after column from the "
         "working tree; `--after REV` for a commit instead).  "
         f"`{BEFORE[0]}`: the commit issue 22 was read at; `{BEFORE[1]}`: the start of the "
         f"session that worked on it; `{BEFORE[2]}`, `{BEFORE[3]}`: the commits issues 29 "
         "and 35 were read at.", "",
         "Lines of a function or class: from its `def`/`class` line to the end of its body "
         "(methods and nested functions are also counted on their own).  Import cycles: "
         "strongly connected groups of the module import graph (imports inside functions "
         "included; a package's `__init__` importing its own submodules left out).  Duplicate "
         "blocks: pairs of places sharing six or more identical or same-shape lines.", "",
         "| measure | " + " | ".join(f"`{c}`" if i < len(BEFORE) else c
                                     for i, (c, _) in enumerate(cols)) + " |",
         "| --- |" + " ---: |" * len(cols)]
    for key in cols[0][1]:
        L.append(f"| {key} | " + " | ".join(m[key] for _, m in cols) + " |")
    L += ["", TIERS, "", "Issue 17's table (import cycles, private state): "
          "[code-metrics-issue17.md](code-metrics-issue17.md)."]
    return "\n".join(L) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", help="a git revision instead of the working tree")
    ap.add_argument("--details", action="store_true", help="list every cycle and access")
    ap.add_argument("--write", action="store_true",
                    help=f"write {RESULT.relative_to(ROOT)} (before columns and the after one)")
    ap.add_argument("--after", help="with --write: a git revision as the after column")
    args = ap.parse_args()
    if args.write:
        RESULT.write_text(write_table(args.after))
        print(RESULT.read_text())
        return
    srcs = sources(args.rev)
    sccs, pairs = cycles(import_graph(srcs))
    acc = private_accesses(srcs)
    print(f"| measure ({args.rev or 'working tree'}) | value |\n| --- | ---: |")
    for key, value in measures(args.rev).items():
        print(f"| {key} | {value} |")
    print(f"| ... private: distinct attributes | {len({a for _, a, _ in acc})} |")
    print(f"| ... private: writes | {sum(1 for *_, k in acc if k == 'write')} |")
    if args.details:
        print("\nFunctions over 50 lines:", ", ".join(f"{n} ({k})" for k, n in sizes(srcs)["over_50"]))
        print("\nFunctions taking a time_limit:", ", ".join(time_limit_functions(srcs)))
        print("\nMutual imports:", ", ".join(f"{a} <-> {b}" for a, b in pairs) or "none")
        for c in sccs:
            print(f"\nCycle group ({len(c)}): {', '.join(c)}")
        for c in package_loops(import_graph(srcs)):
            print(f"\nLoop between packages: {' <-> '.join(c)}")
        print("\nPackage imports inside functions:")
        for m, line, stmt in local_imports(srcs):
            print(f"  {m}:{line}  {stmt}")
        counts: dict[tuple[str, str, str], int] = defaultdict(int)
        for item in acc:
            counts[item] += 1
        print("\nPrivate accesses (module, attribute, kind, count):")
        for (m, a, k), c in sorted(counts.items()):
            print(f"  {m}  {a}  {k}  {c}")


if __name__ == "__main__":
    main()
