"""Export: partition.json, one ONNX model per part, affinity map, annotated model, .dot files."""

from .writer import write_result

__all__ = ["write_result"]
