"""Built-in embedders: a deterministic one for tests and MiniLM on ONNX Runtime."""
