"""Model loading: ONNX file -> :class:`ModelGraph` (names, structure, shapes, folding)."""

from .graph import InputDim, ModelGraph, TensorType
from .load import list_dims, load_model

__all__ = ["InputDim", "ModelGraph", "TensorType", "list_dims", "load_model"]
