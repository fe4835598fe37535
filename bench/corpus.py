"""The synthetic corpus the benchmarks share: pseudo-words with a Zipf-like spread, so
a few terms are everywhere and most are rare, as in real text."""

from __future__ import annotations

import random


class Corpus:
    def __init__(self, syllables: tuple[str, ...], *, size: int = 3000, seed: int = 11,
                 query_pool: int | None = None) -> None:
        rng = random.Random(seed)
        words: set[str] = set()
        while len(words) < size:
            words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
        self.words = sorted(words)
        self.weights = [1.0 / (rank + 1) for rank in range(len(self.words))]
        pool = query_pool or len(self.words)
        self._query_words, self._query_weights = self.words[:pool], self.weights[:pool]

    def sentence(self, rng: random.Random, n: int = 12) -> str:
        return " ".join(rng.choices(self.words, self.weights, k=n))

    def query_text(self, rng: random.Random) -> str:
        """Two words, drawn from the ``query_pool`` most common when one is set."""
        return " ".join(rng.choices(self._query_words, self._query_weights, k=2))
