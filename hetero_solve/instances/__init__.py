"""Problems that come without an ONNX model: the literature's instance formats."""
