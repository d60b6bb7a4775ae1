"""A change to a rule file's support, for what-if questions (docs/costs.md, "What if").

``NPU+=Pad`` makes device ``NPU`` take op type ``Pad``: it is added to ``ops.supported`` (unless
that is ``all``), removed from ``ops.unsupported``, and its ``ops.when`` condition, if any, is
lifted; ``NPU-=Softmax`` makes ``NPU`` refuse ``Softmax`` (listed in ``ops.unsupported``).
Pins, static shapes and memory are untouched.  :func:`apply_change` gives the rule set a file
edited that way would load as.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass

from .load import Rules
from .ops import check_op_name

_CHANGE = re.compile(r"\s*(?P<device>[^\s+=-][^+=]*?)\s*(?P<sign>[+-])=\s*(?P<op>\S+)\s*")


@dataclass(frozen=True)
class Change:
    """One change of a device's support: ``add`` (``+=``) or remove (``-=``) op type ``op``."""

    device: str
    op: str
    add: bool = True

    def __str__(self) -> str:
        return f"{self.device}{'+' if self.add else '-'}={self.op}"


def parse_change(text: str, rules: Rules) -> Change:
    """``DEVICE+=OP`` or ``DEVICE-=OP`` checked against ``rules``: ``ValueError`` with the
    reason (an unknown device or op names the closest; a malformed text shows the form).

    >>> from hetero_solve.rules import load_rules
    >>> r = load_rules({"version": 1, "devices": [{"name": "NPU", "ops": {"supported": ["Conv"]}},
    ...                                           {"name": "CPU", "ops": {"supported": "all"}}]})
    >>> parse_change("NPU+=Pad", r)
    Change(device='NPU', op='Pad', add=True)
    >>> parse_change("GPU+=Pad", r)
    Traceback (most recent call last):
    ValueError: 'GPU+=Pad': unknown device 'GPU' (did you mean 'NPU'? devices: NPU, CPU)
    """
    found = _CHANGE.fullmatch(text)
    if found is None:
        raise ValueError(f"{text!r}: expected DEVICE+=OP (the device takes the op) or "
                         f"DEVICE-=OP (it refuses it), e.g. NPU+=Pad")
    device, op = found["device"], found["op"]
    names = [d.name for d in rules.devices]
    if device not in names:
        close = [n for n in names if n.lower() == device.lower()] or \
            difflib.get_close_matches(device, names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"{text!r}: unknown device {device!r} ({hint}devices: "
                         f"{', '.join(names)})")
    why = check_op_name(op)
    if why is not None:
        raise ValueError(f"{text!r}: {why}")
    return Change(device, op, found["sign"] == "+")


def apply_change(rules: Rules, change: Change) -> Rules:
    """The rules with ``change`` made (``rules`` is not changed).

    >>> from hetero_solve.rules import load_rules
    >>> r = load_rules({"version": 1, "devices": [
    ...     {"name": "NPU", "ops": {"supported": ["Conv", "Pad"],
    ...                             "when": {"Pad": {"attributes": {"mode": "constant"}}}}},
    ...     {"name": "CPU", "ops": {"supported": "all"}}]})
    >>> npu = apply_change(r, Change("NPU", "Pad")).devices[0]
    >>> sorted(npu.supported), npu.when
    (['Conv', 'Pad'], {})
    >>> sorted(apply_change(r, Change("CPU", "Softmax", add=False)).devices[1].unsupported)
    ['Softmax']
    """
    d = rules.device_index(change.device)
    dev = rules.devices[d]
    op = change.op
    if change.add:
        supported = dev.supported if dev.supported is None else dev.supported | {op}
        new = dataclasses.replace(dev, supported=supported, unsupported=dev.unsupported - {op},
                                  when={k: c for k, c in dev.when.items() if k != op})
    else:
        new = dataclasses.replace(dev, unsupported=dev.unsupported | {op})
    devices = list(rules.devices)
    devices[d] = new
    return dataclasses.replace(rules, devices=devices)
