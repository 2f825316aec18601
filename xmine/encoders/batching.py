"""Token-length batching: how a transformer encoder groups sentences into forward passes.

`token_batches` cuts token id lists, longest first, into passes of at most `token_budget`
padded tokens; the torch and OpenVINO encoders (`transformer`, `ov_encoder`), token-level
outputs (`tokens`) and int8 calibration (`ov_build`) all batch through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True, kw_only=True)
class BatchingConfig:
    """How `TokenBatchedEncoder` groups sentences into forward passes."""

    #: padded tokens per forward pass (rows x longest row). ~1k keeps the activations of a
    #: small model in cache on a CPU; 2k-8k measured slower here, not faster.
    token_budget: int = 1024
    #: sentences tokenized and length-sorted together; bounds memory on huge inputs
    sort_window: int = 16384
    #: tokens kept per sentence (longer ones are truncated, as sentence-transformers does)
    max_length: int = 512


def default_batching(device: str, max_length: int) -> BatchingConfig:
    """CPU: small cache-friendly passes; GPU: large passes (its throughput grows with batch size)."""
    return BatchingConfig(token_budget=1024 if device == "cpu" else 16384, max_length=max_length)


def token_batches(ids: Sequence[Sequence[int]], *, pad_id: int, token_budget: int, max_rows: int):
    """Yield (rows, input_ids, attention_mask) passes over token id lists, longest first.

    Rows are sorted by token length (stable) and each pass holds as many as fit `token_budget`
    padded tokens (at most `max_rows`); arrays are int64, padded with `pad_id`. Longest first: the
    biggest pass comes first, so memory peaks at once, not after an hour.
    """
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    order = np.argsort(-lengths, kind="stable")
    i = 0
    while i < len(order):
        longest = int(lengths[order[i]])
        rows = max(1, min(max_rows, token_budget // max(longest, 1)))
        batch = order[i : i + rows]
        i += len(batch)
        input_ids = np.full((len(batch), longest), pad_id, dtype=np.int64)
        mask = np.zeros((len(batch), longest), dtype=np.int64)
        for r, j in enumerate(batch):
            input_ids[r, : lengths[j]] = ids[j]
            mask[r, : lengths[j]] = 1
        yield batch, input_ids, mask
