"""Model loading: ONNX file -> :class:`ModelGraph` (names, structure, shapes, folding)."""

from .graph import ModelGraph, TensorType
from .load import load_model

__all__ = ["ModelGraph", "TensorType", "load_model"]
