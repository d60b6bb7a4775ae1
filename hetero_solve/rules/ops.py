"""Op names in rule files, against the op schemas of the installed ``onnx``.

A name in ``supported``, ``unsupported`` or ``when`` is either an op type that onnx knows in
one of its domains (``ai.onnx``, ``ai.onnx.ml``, ``ai.onnx.preview.training``), at any opset,
written bare (``Conv``, ``LabelEncoder``); or an op of another domain written with its domain
(``com.microsoft.FusedConv``), which cannot be checked.  Anything else is a misspelling: the
error names the closest known ops.  A model node matches a rule name through
:func:`rule_op_name` (its op type, prefixed by its domain when onnx does not know the domain).
"""

from __future__ import annotations

import difflib
from functools import lru_cache

import onnx
import onnx.defs

#: Domains the installed onnx defines ops for ("" is ai.onnx); their ops are written bare.
ONNX_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training")


@lru_cache(maxsize=1)
def _schemas() -> tuple[frozenset[str], frozenset[str]]:
    """(op names of every domain onnx knows, those domains)."""
    names, domains = set(), {"", "ai.onnx"}
    for s in onnx.defs.get_all_schemas_with_history():
        names.add(s.name)
        domains.add(s.domain)
    return frozenset(names), frozenset(domains)


@lru_cache(maxsize=1)
def other_domain_ops() -> dict[str, tuple[str, ...]]:
    """Op name -> the domains outside onnx's that define it, from onnxruntime's own op
    schemas (its contrib ops: ``com.microsoft.DynamicQuantizeLSTM``...), which the installed
    onnx does not know; empty when onnxruntime cannot list them.  Only read to suggest a
    name, never to refuse one."""
    try:
        from onnxruntime.capi import onnxruntime_pybind11_state as ort_state
        schemas = ort_state.get_all_operator_schema()
    except Exception:      # an onnxruntime without the listing: no suggestion from it
        return {}
    found: dict[str, set[str]] = {}
    for s in schemas:
        if s.domain and not is_onnx_domain(s.domain) and not s.domain.startswith("com.ms.internal"):
            found.setdefault(s.name, set()).add(s.domain)
    return {op: tuple(sorted(ds)) for op, ds in found.items()}


def known_op_names() -> frozenset[str]:
    """Every op type the installed onnx defines, in any of its domains, at any opset."""
    return _schemas()[0]


def is_onnx_domain(domain: str) -> bool:
    return domain in _schemas()[1]


def rule_op_name(op_type: str, domain: str) -> str:
    """How rule files name a node's op: ``Conv`` for the domains onnx knows,
    ``com.microsoft.FusedConv`` for others."""
    return op_type if not domain or is_onnx_domain(domain) else f"{domain}.{op_type}"


def check_op_name(name: str) -> str | None:
    """None when ``name`` is a valid op name for a rule file, else the reason (with the closest
    known names)."""
    known = known_op_names()
    if name in known:
        return None
    domain, dot, op = name.rpartition(".")
    if dot:
        if not domain or not op:
            return f"{name!r} is not an op type (write Op or domain.Op)"
        if is_onnx_domain(domain):
            if op in known:
                return (f"write {op!r}, not {name!r}: ops of the domains onnx knows are "
                        "written without their domain")
            return f"unknown op {op!r} in domain {domain!r}{_closest(op)}"
        return None     # another domain's op: written with its domain, cannot be checked
    if any(k.lower() == name.lower() for k in known):
        return f"unknown op {name!r}{_closest(name)}"
    close = _closest(name)
    if close and "." not in close:   # a typo of an op of onnx's own: no other domain to guess
        return f"unknown op {name!r}{close}: onnx {onnx.__version__} knows no such op"
    return (f"unknown op {name!r}{close}: onnx {onnx.__version__} knows no such op; an op of "
            f"another domain is written with its domain (e.g. com.microsoft.{name})")


def _closest(name: str) -> str:
    """The closest known names: the op itself in another domain first when onnx has no op
    of that name (written with its domain, as a rule file must), then onnx's ops alike."""
    known = sorted(known_op_names())
    same_case = [k for k in known if k.lower() == name.lower()]
    elsewhere = other_domain_ops()
    other = [] if same_case else [f"{d}.{op}" for op in sorted(elsewhere)
                                  if op.lower() == name.lower() for d in elsewhere[op]]
    close = other + same_case + [k for k in difflib.get_close_matches(name, known, n=3, cutoff=0.6)
                                 if k not in same_case]
    return f" (did you mean {', '.join(close[:3])}?)" if close else ""
