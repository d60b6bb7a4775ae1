"""The declared tensor types of a serialised model, read without parsing the model.

Shape inference hands back a whole serialised ``ModelProto``; the types are all that loading
needs from it right away.  Parsing the bytes as a message that declares only the graph's
``input``/``output``/``value_info`` as ``(name, type bytes)`` pairs lets protobuf skip the
nodes and keeps each ``TypeProto`` as the bytes that :meth:`ModelGraph.index_types` dedupes
on anyway: a third of the time of parsing the model and serialising every ``TypeProto`` again
(100,000 tensors).  Field numbers are onnx.proto's, which are stable (wire compatibility).
"""

from __future__ import annotations

import functools
from itertools import chain

import onnx
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

# onnx.proto: ModelProto.graph = 7; GraphProto.input = 11, output = 12, value_info = 13;
# ValueInfoProto.name = 1, type = 2.
_GRAPH, _INPUT, _OUTPUT, _VALUE_INFO = 7, 11, 12, 13
_NAME, _TYPE = 1, 2


@functools.lru_cache(maxsize=1)
def _model_types_class():
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="hetero_solve/model_types.proto",
                                             package="hetero_solve_wire", syntax="proto2")
    named = fdp.message_type.add(name="NamedType")
    named.field.add(name="name", number=_NAME, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    named.field.add(name="type", number=_TYPE, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    graph = fdp.message_type.add(name="GraphTypes")
    for name, number in (("input", _INPUT), ("output", _OUTPUT), ("value_info", _VALUE_INFO)):
        graph.field.add(name=name, number=number, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                        type_name=".hetero_solve_wire.NamedType")
    model = fdp.message_type.add(name="ModelTypes")
    model.field.add(name="graph", number=_GRAPH, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".hetero_solve_wire.GraphTypes")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("hetero_solve_wire.ModelTypes"))


def declared_types(model: bytes | onnx.ModelProto) -> tuple[list[str], list[bytes]]:
    """Names and serialised ``TypeProto``s of the main graph's value infos, inputs and
    outputs, in that order (later entries win when a name repeats)."""
    if isinstance(model, onnx.ModelProto):
        g = model.graph
        infos = list(chain(g.value_info, g.input, g.output))
        return [vi.name for vi in infos], [vi.type.SerializeToString() for vi in infos]
    g = _model_types_class().FromString(model).graph
    infos = list(chain(g.value_info, g.input, g.output))
    return [vi.name for vi in infos], [vi.type for vi in infos]


def value_info(name: str, type_bytes: bytes) -> onnx.ValueInfoProto:
    vi = onnx.ValueInfoProto()
    vi.name = name
    vi.type.ParseFromString(type_bytes)
    return vi
