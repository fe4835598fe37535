"""all-MiniLM-L6-v2 on ONNX Runtime, without PyTorch (the ``embeddings`` extra).

The int8 ONNX export gives vectors within cosine 0.994 of the fp32 model at a fraction
of the install size and load time. Nothing heavy happens when the embedder is built:
the files are located and fingerprinted (that fixes the identity a store checks at
start), and the ONNX session and tokenizer load on the first ``embed``, in a worker
thread, once, under a lock. Inference follows sentence-transformers: WordPiece ids,
truncation at 256 tokens, mean pooling over the attention mask, L2 normalisation.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from governed_memory.embedding import EmbedderIdentity
from governed_memory.errors import MemoryConfigurationError, MemoryUnavailableError

from governed_memory_embedders.config import MiniLMConfig, parse_minilm_config
from governed_memory_embedders.inputs import check_texts
from governed_memory_embedders.model_files import EXTRA_HINT, ModelFiles, locate

MODEL_ID: Final = "all-MiniLM-L6-v2"
DIMENSION: Final = 384
MAX_TOKENS: Final = 256
"""sentence-transformers' ``max_seq_length`` for this model; longer texts are cut."""
RUNTIME_MODULES: Final = ("numpy", "onnxruntime", "tokenizers")


class MiniLMEmbedder:
    """Safe to call concurrently: the session is created once and ONNX Runtime's ``run``
    is thread-safe; each call embeds its texts in batches of ``batch_size``."""

    def __init__(self, config: MiniLMConfig, files: ModelFiles) -> None:
        self._config = config
        self._files = files
        self._identity = EmbedderIdentity(MODEL_ID, files.revision, DIMENSION)
        self._lock = threading.Lock()
        self._runtime: _Runtime | None = None

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (it loads on the first ``embed``)."""
        return self._runtime is not None

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        batch = check_texts(texts)
        if not batch:
            return ()
        return await asyncio.to_thread(self._embed_blocking, batch)

    async def close(self) -> None:
        """Releases the model; a later ``embed`` loads it again. Waits for a load in
        progress in a worker thread, so the event loop never blocks on the lock."""
        await asyncio.to_thread(self._release)

    def _release(self) -> None:
        with self._lock:
            self._runtime = None

    def _embed_blocking(self, texts: tuple[str, ...]) -> tuple[tuple[float, ...], ...]:
        runtime = self._load()
        size = self._config.batch_size
        # Batch texts of similar length together: a batch pads to its longest text, and
        # padding is masked out of attention and pooling, so the order changes only cost.
        order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
        vectors: list[tuple[float, ...]] = [()] * len(texts)
        for start in range(0, len(order), size):
            chunk = order[start:start + size]
            for index, vector in zip(chunk, runtime.encode([texts[i] for i in chunk]),
                                     strict=True):
                vectors[index] = vector
        return tuple(vectors)

    def _load(self) -> _Runtime:
        with self._lock:
            if self._runtime is None:
                self._runtime = _Runtime.open(self._files, self._config.intra_op_num_threads)
            return self._runtime


class _Runtime:
    """The loaded tokenizer and ONNX session; only this class touches the extra's modules."""

    def __init__(self, tokenizer: Any, session: Any, numpy: Any) -> None:
        self._tokenizer = tokenizer
        self._session = session
        self._np = numpy

    @classmethod
    def open(cls, files: ModelFiles, threads: int) -> _Runtime:
        try:
            import numpy
            import onnxruntime  # type: ignore[import-untyped]
            import tokenizers
        except ImportError as exc:
            raise MemoryUnavailableError(
                f"embedder 'minilm' cannot run: {exc.name or 'a module'} is not installed: "
                f"{EXTRA_HINT}") from None
        model = _read_checked(files.model, files.model_sha256, "model")
        tokenizer_json = _read_checked(files.tokenizer, files.tokenizer_sha256, "tokenizer")
        try:
            tokenizer = tokenizers.Tokenizer.from_str(tokenizer_json.decode("utf-8"))
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")  # to longest
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            session = onnxruntime.InferenceSession(model, options,
                                                   providers=["CPUExecutionProvider"])
        except Exception as exc:  # a corrupt or incompatible file: say which, not a trace
            raise MemoryUnavailableError(
                f"embedder 'minilm' failed to load its model: {type(exc).__name__}: {exc}"
            ) from None
        return cls(tokenizer, session, numpy)

    def encode(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        np = self._np
        try:
            encodings = self._tokenizer.encode_batch(list(texts))
            feeds = {
                "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings],
                                           dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
            }
            (hidden,) = self._session.run(["last_hidden_state"], feeds)
        except Exception as exc:
            raise MemoryUnavailableError(
                f"embedder 'minilm' failed to embed a batch: {type(exc).__name__}") from None
        # Pool and normalise in float64 so a vector's norm is 1 to double precision.
        mask = feeds["attention_mask"][:, :, None].astype(np.float64)
        pooled = (hidden.astype(np.float64) * mask).sum(axis=1) / np.clip(
            mask.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit = pooled / np.clip(norms, 1e-12, None)
        return [tuple(row) for row in unit.tolist()]


def _read_checked(path: Path, expected: str, what: str) -> bytes:
    """The file's bytes, if they are still the ones the identity was derived from."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise MemoryUnavailableError(
            f"embedder 'minilm' cannot read its {what} file {path}: {exc.strerror}") from None
    if hashlib.sha256(data).hexdigest() != expected:
        raise MemoryUnavailableError(
            f"embedder 'minilm': the {what} file {path} changed after the embedder was built;"
            " restart to pick up the new file (and re-embed: its vectors differ)")
    return data


def build_minilm_embedder(config: Mapping[str, Any]) -> MiniLMEmbedder:
    """Checks the configuration, the extra's modules and both files now, so a profile
    that cannot embed stops at start instead of at the first write."""
    parsed = parse_minilm_config(config)
    missing = [name for name in RUNTIME_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise MemoryConfigurationError(
            f"embedder 'minilm' needs {', '.join(missing)}, not installed: {EXTRA_HINT}")
    return MiniLMEmbedder(parsed, locate(parsed.model_path, parsed.tokenizer_path))
