"""Without the embeddings extra the MiniLM tests skip with the reason, except under
CI=true, where the dev extra installs it and a skip would hide a broken install."""

from __future__ import annotations

import importlib.util

import embedders_support
import pytest


@pytest.fixture
def no_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))


@pytest.mark.usefixtures("no_onnxruntime")
def test_a_missing_extra_skips_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"onnxruntime missing.*\[embeddings\]"):
        embedders_support.require_embeddings_extra()


@pytest.mark.usefixtures("no_onnxruntime")
def test_a_missing_extra_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and the embeddings extra"):
        embedders_support.require_embeddings_extra()
