"""Disentanglers: split frozen-encoder embeddings into a meaning part and a language part.

Public API (heavy modules are imported on first use, so `import xmine.disentangle` stays fast):
- `load_projection(path) -> Projection`: `.transform(emb, part="meaning"|"language")`,
  `.langid(emb)`, `.check_encoder(fp)`, `.fingerprint()`, `.config` (projection.py).
- `train(pair_specs, out_dir, encoder=..., config=TrainConfig(...)) -> Projection` (trainer.py).
- `TrainConfig`, `METHOD_NAMES`, `get_method`, `register_method` (methods.py: which loss terms
  each method sums; the papers' equations are in losses.py).
- `MeaningProjection` (a sentence-transformers module) and
  `export_sentence_transformer(projection_dir, encoder_name, out_dir, part="meaning")` (st_module.py).
- `discover_pairs` (data.py: the rule that finds parallel files in a directory).
- FMDA (token-level; model.py, fmda_trainer.py): `train_fmda(massive_dir, out, encoder=...,
  config=FmdaConfig(...))`; its projection's `embed_texts(encoder, texts, parts)` gives the
  meaning, template, residual and language parts; `FMDAProjection` is its sentence-transformers
  module (reads token embeddings).
"""

from __future__ import annotations

import importlib

_LAZY = {
    "load_projection": "projection", "Projection": "projection",
    "train": "trainer", "TrainConfig": "trainer",
    "METHOD_NAMES": "methods", "METHODS": "methods", "get_method": "methods", "register_method": "methods",
    "Method": "methods",
    "MeaningProjection": "st_module", "export_sentence_transformer": "st_module",
    "discover_pairs": "data", "sample_pairs": "sample",
    "FMDA": "model", "FmdaConfig": "fmda_trainer", "train_fmda": "fmda_trainer", "FMDAProjection": "st_module",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
