"""Read a user's input files without trusting them: models, rule files, includes, ``--input``
arrays and maps.

A path is checked before it is opened (a FIFO would block the open, a device could stream
forever), opened without blocking and checked again on the open file (the path may have
changed in between), and read up to a limit.  Text must be UTF-8 (a byte-order mark may say
UTF-16 or UTF-32 instead, as YAML allows); YAML is loaded with bounded nesting and bounded
alias expansion (a "billion laughs" file is refused instead of exhausting memory) and plain
data only: mappings, lists, strings, numbers, booleans and null.

Every refusal is raised through ``error(reason)``, a function the caller gives that makes its
own one-line :class:`~hetero_solve.errors.HeteroSolveError` (the file's role is the caller's
to name: "rule file", "model", ``--input x``).

Examples
--------
>>> from hetero_solve.errors import RuleError
>>> load_yaml("a: [1, 2]\\nb: {c: null}", lambda why: RuleError("<text>", "", why))
{'a': [1, 2], 'b': {'c': None}}
"""

from __future__ import annotations

import codecs
import difflib
import json
import os
import stat
from typing import Any, Callable

import yaml
from yaml.constructor import ConstructorError

from .errors import HeteroSolveError, one_line

Fail = Callable[[str], HeteroSolveError]

#: A rule file or catalog larger than this is not one (the packaged catalog is ~20 KiB).
TEXT_BYTES = 16 << 20
#: Deepest nesting of lists and mappings in a YAML file (rule files nest about 6 deep).
YAML_DEPTH = 100
#: Most nodes a YAML file may stand for once its aliases are expanded.
YAML_NODES = 1_000_000


# -- files -------------------------------------------------------------------------------------

def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words a user knows."""
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_regular(path: str | os.PathLike, error: Fail) -> os.stat_result:
    """``path``'s status when it is a regular file (symbolic links followed); else
    ``error("no such file")``, ``error("is a folder, not a file")``, ..."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error("no such file" + did_you_mean(path)) from None
    except OSError as e:
        raise error(f"cannot read: {e.strerror or e}") from None
    except ValueError:   # a NUL character in the path
        raise error("not a valid path (it holds a NUL character)") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"is {file_kind(st.st_mode)}, not a file")
    return st


def did_you_mean(path: str | os.PathLike) -> str:
    """`` (did you mean 'rules/npu-static.yaml'?)``: the file of ``path``'s folder whose name
    is closest to the one asked for, when one is close (a typo); else ``""``."""
    folder, name = os.path.split(os.fspath(path))
    try:
        with os.scandir(folder or ".") as entries:
            names = [e.name for _, e in zip(range(10_000), entries)]
    except (OSError, ValueError):
        return ""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    return f" (did you mean {os.path.join(folder, close[0])!r}?)" if close else ""


def read_bytes(path: str | os.PathLike, error: Fail, *, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them (more is an error)."""
    check_regular(path, error)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise error(f"cannot read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):   # replaced since check_regular
            raise error(f"is {file_kind(st.st_mode)}, not a file")
        if st.st_size > limit:
            raise error(f"is {st.st_size:,} bytes, over the {limit:,} bytes this file may have")
        with os.fdopen(os.dup(fd), "rb") as f:
            # One read of the size the file has (one allocation, no copy), one more byte to
            # see whether it grew since; a grown file is read on, up to the limit.
            data = f.read(st.st_size + 1)
            if len(data) > st.st_size:
                data += f.read(limit + 1 - len(data))
        if len(data) > limit:
            raise error(f"is over the {limit:,} bytes this file may have")
        return data
    except OSError as e:
        raise error(f"cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)


# -- text --------------------------------------------------------------------------------------

_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
         (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16-be"))


def decode_text(data: bytes, error: Fail) -> str:
    """``data`` as text: UTF-8, or what a byte-order mark says (UTF-8, UTF-16, UTF-32).
    Binary data and other encodings are refused, naming the first bad byte's line and column."""
    for bom, encoding in _BOMS:   # UTF-32 LE first: its mark starts with UTF-16 LE's
        if data.startswith(bom):
            try:
                return data[len(bom):].decode(encoding)
            except UnicodeDecodeError as e:
                raise error(f"not valid {encoding.upper()} text (its byte-order mark says so) "
                            f"at byte {e.start + len(bom)}") from None
    nul = data.find(b"\0")
    if nul >= 0:
        raise error(f"not a text file: a NUL byte at offset {nul} (is it a binary file?)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise error(f"not UTF-8 text: byte 0x{data[e.start]:02X} at line {line}, column "
                    f"{column} (save the file as UTF-8)") from None


def read_text(path: str | os.PathLike, error: Fail, *, limit: int = TEXT_BYTES) -> str:
    """The regular file ``path`` as text (see :func:`decode_text`)."""
    return decode_text(read_bytes(path, error, limit=limit), error)


# -- YAML --------------------------------------------------------------------------------------

_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_VALUE = "tag:yaml.org,2002:value"
_UNSUPPORTED = ("binary", "timestamp", "set", "omap", "pairs")


class _PlainDataLoader(yaml.SafeLoader):
    """PyYAML's safe loader, bounded: nesting at most :data:`YAML_DEPTH`, and plain data only
    (dates stay strings, ``!!binary``/``!!set``/... are refused, a key given twice is an
    error).  Aliases are counted by :func:`_expanded_nodes` after composing."""

    # Dates as strings; "=" is YAML 1.1's "value" key, which has no constructor.
    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_TIMESTAMP, _VALUE)]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def __init__(self, stream: str):
        super().__init__(stream)
        self._path: list[str] = []   # where composing is: one step per level
        self.aliased: set[int] = set()   # ids of the nodes an alias (*name) stands for

    def compose_node(self, parent, index):
        # Composing recurses once per level: stop before Python's recursion limit does.
        self._path.append(_step(parent, index))
        try:
            if len(self._path) > YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {YAML_DEPTH} levels under "
                    f"{key_path(self._path[1:])}", self.peek_event().start_mark)
            alias = self.check_event(yaml.AliasEvent)
            node = super().compose_node(parent, index)
            if alias:
                self.aliased.add(id(node))
            return node
        finally:
            self._path.pop()

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:   # the node's own keys: a merged (<<) one may be overridden
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise ConstructorError(None, None, f"the key {key!r} appears twice",
                                               key_node.start_mark)
                    seen[key] = True
                except TypeError:   # an unhashable key: the base class says so
                    break
        return super().construct_mapping(node, deep=deep)


def _step(parent, index) -> str:
    """One step of a key path: ``.key`` for a mapping's value, ``[i]`` for a list item."""
    if isinstance(parent, yaml.SequenceNode):
        return f"[{index}]"
    if isinstance(parent, yaml.MappingNode):
        if isinstance(index, yaml.ScalarNode):
            return f".{index.value}"
        return ".<key>"   # a key that is itself a list or mapping
    return ""


def key_path(steps: list[str], shown: int = 6) -> str:
    """``affinity[0][0]...``: a key path of the ``steps``, its first ``shown`` steps."""
    text = "".join(steps[:shown]).lstrip(".")
    return (text or "the top level") + ("..." if len(steps) > shown else "")


def _refuse_tag(name: str):
    def construct(loader, node):
        raise ConstructorError(None, None, f"the tag !!{name} is not supported here (rule files "
                               "hold mappings, lists, strings, numbers, booleans and null)",
                               node.start_mark)
    return construct


for _name in _UNSUPPORTED:
    _PlainDataLoader.add_constructor(f"tag:yaml.org,2002:{_name}", _refuse_tag(_name))


def _expanded_nodes(root: yaml.Node, limit: int) -> int:
    """How many nodes ``root`` stands for with every alias expanded, counted without
    expanding (each distinct node once, by its size), stopping above ``limit``.  A node that
    contains itself (``&a [*a]``) stands for infinitely many: returns ``limit + 1``."""
    size: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.ScalarNode):
            size[key] = 1
            continue
        children = ([x for pair in node.value for x in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value))
        if done:
            open_nodes.discard(key)
            total = 1 + sum(size[id(c)] for c in children)
            size[key] = total
            if total > limit:
                return total
            continue
        if key in size:
            continue
        if key in open_nodes:      # reached again while its own children are being counted
            return limit + 1
        open_nodes.add(key)
        stack.append((node, True))
        for c in children:
            if id(c) in open_nodes:
                return limit + 1
            if id(c) not in size:
                stack.append((c, False))
    return size[id(root)]


def _bomb_key(root: yaml.Node, aliased: set[int]) -> str:
    """The key holding a YAML bomb, as ``key 'devices[0].instances'``: from the top, into
    the last child (in file order: an alias comes after its anchor, so the last one is where
    the bomb is used) standing for over :data:`YAML_NODES` values, until that child is an
    alias; list positions at the end are left out (the key holds the list).  ``the top
    level`` when no key does."""
    steps: list[str] = []
    node, seen = root, set()
    while isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and id(node) not in seen:
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            children = [(f".{k.value}" if isinstance(k, yaml.ScalarNode) else ".<key>", v)
                        for k, v in node.value]
        else:
            children = [(f"[{i}]", v) for i, v in enumerate(node.value)]
        big = [(step, child) for step, child in children
               if _expanded_nodes(child, YAML_NODES) > YAML_NODES]
        if not big:
            break
        step, node = big[-1]
        steps.append(step)
        if id(node) in aliased:
            break
    while steps and steps[-1].startswith("["):
        steps.pop()
    return f"key {''.join(steps).lstrip('.')!r}" if steps else "the top level"


def load_yaml(text: str, error: Fail) -> Any:
    """One YAML document as plain Python data (see :class:`_PlainDataLoader`); syntax errors
    and refusals through ``error("YAML syntax error at line L, column C: ...")``."""
    loader = None
    try:
        loader = _PlainDataLoader(text)   # checks the characters at once
        node = loader.get_single_node()
        if node is None:
            return None
        nodes = _expanded_nodes(node, YAML_NODES)
        if nodes > YAML_NODES:
            raise error(f"its aliases expand to over {YAML_NODES:,} values, or refer to "
                        f"themselves (a YAML bomb?), under {_bomb_key(node, loader.aliased)}")
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        raise error(yaml_problem(e)) from None
    except RecursionError:
        raise error(f"YAML nested too deeply (at most {YAML_DEPTH} levels)") from None
    except ValueError as e:   # a number Python refuses to read (over 4,300 digits)
        raise error(f"YAML error: {one_line(e, 120)}") from None
    finally:
        if loader is not None:
            loader.dispose()


def yaml_problem(e: yaml.YAMLError) -> str:
    """A YAML error as one phrase with its line and column."""
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    if isinstance(e, yaml.reader.ReaderError):
        char = e.character if isinstance(e.character, int) else ord(e.character[:1] or b"?")
        problem = f"character #x{char:04X} is not allowed in YAML"
        where = f" at position {e.position}"
    kind = "YAML syntax error" if isinstance(e, (yaml.scanner.ScannerError, yaml.parser.ParserError,
                                                  yaml.reader.ReaderError)) else "YAML error"
    return f"{kind}{where}: {problem}"


def read_yaml(path: str | os.PathLike, error: Fail, *, limit: int = TEXT_BYTES) -> Any:
    """The regular file ``path`` (text, see :func:`read_text`) as YAML (:func:`load_yaml`)."""
    return load_yaml(read_text(path, error, limit=limit), error)


#: A JSON file (an affinity map, a partition.json of 100,000 nodes) larger than this is none.
JSON_BYTES = 1 << 30


def read_json(path: str | os.PathLike, error: Fail, *, limit: int = JSON_BYTES) -> Any:
    """The regular file ``path`` (text, see :func:`read_text`) as JSON; syntax errors name
    the line and column, nesting too deep for Python's parser is refused."""
    text = read_text(path, error, limit=limit)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"not valid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise error("JSON nested too deeply") from None


def resolves_inside(path: str | os.PathLike, folder: str | os.PathLike) -> bool:
    """Does ``path`` (symbolic links followed) lie inside ``folder``?"""
    real = os.path.realpath(path)
    base = os.path.realpath(folder)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


__all__ = ["check_regular", "read_bytes", "read_text", "decode_text", "load_yaml", "read_yaml",
           "read_json",
           "yaml_problem", "resolves_inside", "file_kind"]
