"""Which OpenVINO device runs each device instance of an answer: the one home of the device map
that ``export openvino`` and ``run --backend openvino`` take (``--device-map NAME=DEVICE``).

An answer places parts on device *instances*: ``ACC.0``, ``ACC.1``, ``ACC.2`` for a rule-file
device ``ACC`` with ``instances: 3`` (plain ``NPU`` for a device with one instance:
:func:`hetero_solve.units.instance_label`).  OpenVINO names instances the same way (``GPU.0``,
``GPU.1``), so the map keeps them apart:

- ``ACC=GPU`` maps every instance of ``ACC``: instance ``i`` runs on ``GPU.i``;
- ``ACC.1=CPU`` maps one instance (it beats ``ACC=...``);
- an unmapped device keeps its rule-file name, instance ``i`` as ``NAME.i``.

OpenVINO devices without per-instance names (``CPU``, and the virtual ``AUTO``, ``MULTI``,
``BATCH``, ``HETERO``), or a target that already names one instance (``GPU.1``), take every
instance mapped to them as they are: those instances then share one OpenVINO device, and
:func:`shared_targets` names them (HETERO joins their parts).

>>> resolve_device_map(parse_pairs(["ACC=GPU", "ACC.2=CPU"]), [("ACC", 3), ("CPU", 1)])
{'ACC.0': 'GPU.0', 'ACC.1': 'GPU.1', 'ACC.2': 'CPU', 'CPU': 'CPU'}
"""

from __future__ import annotations

import re
from typing import Collection, Mapping, Sequence

from ..errors import HeteroSolveError
from ..units import instance_label

#: Device names OpenVINO plugins answer to without hardware of their own (they dispatch to
#: the devices present), so a compile with them works on a CPU-only machine.
VIRTUAL_DEVICES = ("AUTO", "MULTI", "BATCH", "HETERO")
#: OpenVINO devices that have no per-instance names (the CPU plugin takes no device id).
SINGLE_DEVICES = ("CPU", *VIRTUAL_DEVICES)

_INSTANCE = re.compile(r"\.\d+$")


class DeviceMapError(HeteroSolveError):
    """A device map item is not ``NAME=DEVICE`` or names no device (instance) of the
    answer."""


def parse_pairs(items: Sequence[str] | Mapping[str, str] | None) -> dict[str, str]:
    """``["ACC=GPU", "ACC.1=CPU"]`` (or a mapping) as name -> OpenVINO device name."""
    if isinstance(items, Mapping):
        return {str(k).strip(): str(v).strip() for k, v in items.items()}
    pairs: dict[str, str] = {}
    for item in items or []:
        name, sep, target = str(item).partition("=")
        if not sep or not name.strip() or not target.strip():
            raise DeviceMapError(f"device map {item!r}: expected NAME=DEVICE, e.g. NPU=AUTO "
                                 "or ACC.1=GPU.1")
        pairs[name.strip()] = target.strip()
    return pairs


def per_instance(target: str, instance: int, instances: int) -> str:
    """The OpenVINO name of instance ``instance`` of a device mapped to ``target``:
    ``target.instance`` when the device has several instances and ``target`` has
    per-instance names, else ``target``."""
    if instances <= 1 or _INSTANCE.search(target) or target.split(":")[0] in SINGLE_DEVICES:
        return target
    return f"{target}.{instance}"


def target_of(pairs: Mapping[str, str], device: str, instance: int, instances: int) -> str:
    """The OpenVINO device of one device instance under ``pairs`` (see the module
    docstring)."""
    label = instance_label(device, instance, instances)
    if label in pairs:
        return pairs[label]
    return per_instance(pairs.get(device, device), instance, instances)


def resolve_device_map(pairs: Mapping[str, str],
                       devices: Sequence[tuple[str, int]]) -> dict[str, str]:
    """Every device instance of ``devices`` ((name, instances) in the rule file's order) ->
    its OpenVINO device name.

    Raises
    ------
    DeviceMapError
        A name in ``pairs`` is neither a device nor a device instance of ``devices``.
    """
    labels = {instance_label(d, i, n): (d, i, n) for d, n in devices for i in range(max(1, n))}
    names = {d for d, _ in devices}
    unknown = [k for k in pairs if k not in names and k not in labels]
    if unknown:
        shown = ", ".join(d if n <= 1 else f"{d} ({d}.0 to {d}.{n - 1})" for d, n in devices)
        raise DeviceMapError(f"device map {unknown[0]}: the answer has no device "
                             f"{unknown[0]!r} (its devices: {shown})")
    return {label: target_of(pairs, d, i, n) for label, (d, i, n) in labels.items()}


def shared_targets(mapping: Mapping[str, str], used: Sequence[str],
                   touching: Collection[tuple[str, str]] | None = None) -> dict[str, list[str]]:
    """OpenVINO devices that several used device instances share, and whose parts HETERO
    therefore joins: those that exchange a tensor (``touching``: pairs of device instances
    whose parts do; ``None``: every pair).  Target -> the instances joined there."""
    groups: dict[str, list[str]] = {}
    for label in used:
        groups.setdefault(mapping[label], []).append(label)
    out: dict[str, list[str]] = {}
    for target, labels in groups.items():
        if touching is not None:
            labels = [a for a in labels if any((a, b) in touching or (b, a) in touching
                                               for b in labels if b != a)]
        if len(labels) > 1:
            out[target] = labels
    return out


def shared_note(target: str, labels: Sequence[str], pairs: Mapping[str, str]) -> str:
    """What :func:`shared_targets` found, as a line for the user; ``pairs``: the device map
    as given (which instances were mapped by their own name)."""
    plain = target.split(":")[0]
    devices = [_INSTANCE.sub("", label) for label in labels if _INSTANCE.search(label)]
    whole = [d for d in set(devices) if devices.count(d) > 1 and d in pairs]
    why = ""
    if whole:       # NAME=CPU put several instances of NAME on a device without instances
        why = (f" ({whole[0]}={pairs[whole[0]]} maps every instance of {whole[0]} there: "
               f"OpenVINO's {plain} has no per-instance names)" if plain in SINGLE_DEVICES
               else f" ({whole[0]}={pairs[whole[0]]} names one instance)")
    return (f"{', '.join(labels)} run on one OpenVINO device, {target}, and their parts "
            f"exchange tensors: HETERO joins those parts into one submodel{why}; map them to "
            f"different OpenVINO devices ({labels[0]}=..., {labels[1]}=...) to keep them "
            "apart, or run each part on its own (run --backend openvino)")


__all__ = ["DeviceMapError", "VIRTUAL_DEVICES", "SINGLE_DEVICES", "parse_pairs",
           "per_instance", "target_of", "resolve_device_map", "shared_targets", "shared_note"]
