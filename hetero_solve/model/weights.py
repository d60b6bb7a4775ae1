"""Weights kept where they are: a model with external data is loaded without it.

Loading reads the ``.onnx`` file only; a tensor whose data lives in another file stays a
reference (``data_location = EXTERNAL``, its ``location``, ``offset`` and ``length``) in the
``ModelProto`` that every step reads.  Shape inference and folding run on that weight-free
view; a value is read from its file only when asked for (:func:`tensor_value`: folding a small
constant), and a part file's weights are copied from the source file to the part's data file
tensor by tensor, in the kernel where it can (:func:`copy_external`), so that no step ever
holds the weights, let alone two copies of them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO, Iterator

import numpy as np
import onnx
from onnx import numpy_helper

from ..units import element_bits

#: A part's data file aligns each tensor to this (onnxruntime memory-maps aligned tensors).
ALIGN = 4096
#: Bytes moved per read/write when the kernel cannot copy between the files itself.
CHUNK = 16 << 20


def is_external(t: onnx.TensorProto) -> bool:
    return t.data_location == onnx.TensorProto.EXTERNAL


def external_info(t: onnx.TensorProto) -> tuple[str, int, int | None]:
    """``(location, offset, length)`` of an external tensor (``length`` ``None``: to the end
    of the file)."""
    info = {e.key: e.value for e in t.external_data}
    length = info.get("length")
    return info.get("location", ""), int(info.get("offset") or 0), \
        int(length) if length is not None else None


def external_tensors(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    """Every tensor of the model whose data lives in another file: initializers (dense and
    sparse) and tensor attributes, in subgraphs and functions too."""
    return [t for t in all_tensors(model) if is_external(t)]


def all_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every ``TensorProto`` of the model (as above, external or not)."""
    A = onnx.AttributeProto
    graphs = [model.graph]
    node_lists = [f.node for f in model.functions]
    while graphs or node_lists:
        if graphs:
            g = graphs.pop()
            yield from g.initializer
            for sp in g.sparse_initializer:
                yield sp.values
                yield sp.indices
            node_lists.append(g.node)
            continue
        for node in node_lists.pop():
            for a in node.attribute:
                kind = a.type
                if kind == A.TENSOR:
                    yield a.t
                elif kind == A.TENSORS:
                    yield from a.tensors
                elif kind == A.SPARSE_TENSOR:
                    yield a.sparse_tensor.values
                    yield a.sparse_tensor.indices
                elif kind == A.SPARSE_TENSORS:
                    for sp in a.sparse_tensors:
                        yield sp.values
                        yield sp.indices
                elif kind == A.GRAPH:
                    graphs.append(a.g)
                elif kind == A.GRAPHS:
                    graphs.extend(a.graphs)


def data_bytes(t: onnx.TensorProto) -> int:
    """Bytes of a tensor's data: its raw bytes, or its external length."""
    if is_external(t):
        _, _, length = external_info(t)
        return length or 0
    return len(t.raw_data)


def elements(t: onnx.TensorProto) -> int:
    """Element count of a tensor (the product of its dims)."""
    count = 1
    for d in t.dims:
        count *= d
    return count


def tensor_bytes(t: onnx.TensorProto) -> int | None:
    """Bytes of a tensor's data from its dims and element type (sub-byte types packed, the
    last byte rounded up); ``None`` for a type of no fixed size (strings)."""
    bits = element_bits(t.data_type)
    return (elements(t) * bits + 7) // 8 if bits else None


def tensor_value(t: onnx.TensorProto, folder: str | os.PathLike | None) -> np.ndarray:
    """The value of ``t``; an external tensor read from ``folder`` (the model's) without
    touching ``t`` (``numpy_helper.to_array`` would keep the bytes in it)."""
    if not is_external(t):
        return numpy_helper.to_array(t)
    copy = onnx.TensorProto()
    copy.CopyFrom(t)
    return numpy_helper.to_array(copy, base_dir=str(folder or ""))


def copy_external(tensors: list[onnx.TensorProto], source: str | os.PathLike,
                  out: BinaryIO, location: str) -> None:
    """Append the data of the external ``tensors`` (locations relative to the ``source``
    folder) to ``out``, each at an offset aligned to :data:`ALIGN`, and point each tensor at
    its new place (``location`` in ``out``'s folder).  The bytes go file to file
    (``copy_file_range``; else :data:`CHUNK` at a time): never a whole tensor in memory."""
    source = Path(source)
    handles: dict[str, int] = {}
    try:
        for t in tensors:
            name, offset, length = external_info(t)
            fd = handles.get(name)
            if fd is None:
                fd = handles[name] = os.open(source / name, os.O_RDONLY)
            if length is None:
                length = os.fstat(fd).st_size - offset
            start = out.seek(0, os.SEEK_END)
            start += -start % ALIGN
            out.seek(start)
            out.flush()
            _copy_range(fd, offset, out.fileno(), start, length)
            del t.external_data[:]
            for key, value in (("location", location), ("offset", str(start)),
                               ("length", str(length))):
                entry = t.external_data.add()
                entry.key, entry.value = key, value
    finally:
        for fd in handles.values():
            os.close(fd)


def _copy_range(src: int, src_offset: int, dst: int, dst_offset: int, length: int) -> None:
    done = 0
    fast = hasattr(os, "copy_file_range")
    while done < length:
        n = 0
        if fast:
            try:
                n = os.copy_file_range(src, dst, min(length - done, 1 << 30),
                                       src_offset + done, dst_offset + done)
            except OSError:
                fast = False
        if not fast:
            data = os.pread(src, min(length - done, CHUNK), src_offset + done)
            n = os.pwrite(dst, data, dst_offset + done) if data else 0
        if n <= 0:
            raise OSError(f"external data ends {length - done} bytes early")
        done += n
