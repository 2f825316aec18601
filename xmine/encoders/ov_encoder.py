"""`OpenVINOEncoder`: a `TokenBatchedEncoder` whose forward pass is a compiled OpenVINO model.

Everything but the forward pass is the torch path's: the same tokenizer, prefix, sort window,
length-sorted passes of at most `token_budget` padded tokens (`batching.token_batches`), and
mean/CLS pooling + L2-normalisation in float32 (numpy here). The compiled model returns the last
hidden state, so the token-level output FMDA reads (`token_states`) comes from it too.

The model is the cached conversion of the torch fp32 weights (`xmine.encoders.ov_build`), compiled
with `INFERENCE_PRECISION_HINT` bf16 or f32 (int8: a quantised model, bf16 elsewhere), one stream,
and as many threads as the torch path uses (`threads`, else torch's default: the physical cores).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from xmine.encoders.base import note_once
from xmine.encoders.batching import BatchingConfig, default_batching
from xmine.encoders.e5_q4 import MAX_SEQ_LENGTH, ensure_me5_model
from xmine.encoders.me5 import load_me5, me5_fingerprint, me5_identity
from xmine.encoders.ov_build import check_compiled_precision, ensure_openvino_model, ov_config
from xmine.encoders.runtime import require_openvino
from xmine.encoders.transformer import SentenceTransformerEncoder, TokenBatchedEncoder, torch_dtype
from xmine.errors import EncoderError


class OpenVINOEncoder(TokenBatchedEncoder):
    """A transformer encoder run by OpenVINO's CPU plugin (see the module doc)."""

    def __init__(self, *, name: str, model_xml: Path, tokenizer, pooling: str, prefix: str, identity: str,
                 dim: int, batching: BatchingConfig, precision: str, build: str, threads: int | None = None):
        """`build`: the converted model's `ov_build.source_key`, part of the fingerprint."""
        import torch

        ov = require_openvino()

        self._settings(name=name, tokenizer=tokenizer, pooling=pooling, prefix=prefix, identity=identity, device="cpu",
                       batching=batching, precision=precision, runtime="openvino", dim=dim)
        self.build = build
        self.threads = int(threads or torch.get_num_threads())
        self.model_xml = Path(model_xml)
        try:
            self.model = ov.Core().compile_model(str(model_xml), "CPU", ov_config(precision, self.threads))
        except RuntimeError as e:  # (was: a traceback, its manifest's sums recomputed over a cut model.xml)
            detail = next((line.strip() for line in reversed(str(e).splitlines()) if line.strip()), type(e).__name__)
            raise EncoderError(f"{self.model_xml}: OpenVINO cannot read this converted model ({detail[:200]}); it is "
                               f"damaged: remove {self.model_xml.parent} and the next run converts the model again") from None
        check_compiled_precision(precision, self.model.get_property("INFERENCE_PRECISION_HINT"), model=self.model_xml)
        self._request = self.model.create_infer_request()

    def _hidden(self, input_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        self._request.infer({"input_ids": input_ids, "attention_mask": mask})
        return self._request.get_output_tensor(0).data  # (n, L, D) float32, valid until the next pass

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self.pooling == "cls":
            return np.array(hidden[:, 0], dtype=np.float32)
        m = mask.astype(np.float32)[:, :, None]
        return (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)

    def _forward(self, input_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        pooled = self._pool(self._hidden(input_ids, mask), mask)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled.astype(np.float32, copy=False)

    def token_states(self, input_ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        hidden = self._hidden(input_ids, mask)
        return hidden.astype(np.float16), self._pool(hidden, mask)


def load_me5_openvino(*, prefix: str, precision: str, threads: int | None) -> OpenVINOEncoder:
    """me5-small on OpenVINO at `precision`, converting (and checking) it on first use.

    Once converted, the torch model is not loaded at all: the tokenizer comes from the rebuilt
    me5-small folder and the weights from the cached OpenVINO model.
    """
    from transformers import AutoTokenizer

    path, manifest = ensure_me5_model()
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    identity = me5_identity(manifest)

    def make(folder: Path, build: str) -> OpenVINOEncoder:
        return OpenVINOEncoder(name="me5-small", model_xml=folder / "model.xml", tokenizer=tokenizer, pooling="mean",
                               prefix=prefix, identity=identity, dim=int(manifest["dim"]),
                               batching=default_batching("cpu", MAX_SEQ_LENGTH), precision=precision, build=build,
                               threads=threads)

    fp32 = me5_fingerprint(prefix="", precision="fp32", manifest=manifest)
    encoder, _ = ensure_openvino_model(
        stem=path.name, weights_id=fp32["id"], precision=precision,
        torch_fp32=lambda: load_me5(device="cpu", prefix=prefix, precision="fp32", tokenizer=tokenizer),
        make_encoder=make)
    want = me5_fingerprint(prefix=prefix, precision=precision, manifest=manifest, runtime="openvino")
    if encoder.fingerprint() != want:
        raise EncoderError(f"{encoder.model_xml.parent}: the loaded model is not the one its manifest describes "
                           f"({encoder.fingerprint()['id']} vs {want['id']})")
    return encoder


def openvino_from_torch(encoder, *, precision: str, threads: int | None, explicit: bool) -> Any:
    """The OpenVINO version of a torch fp32 `TokenBatchedEncoder` (any sentence-transformers model on
    the fast path). Pipelines off the fast path stay on torch under `--runtime auto` (said once)
    and are refused under an explicit `--runtime openvino`."""
    if not isinstance(encoder, TokenBatchedEncoder):
        if explicit:
            raise EncoderError(f"{encoder.name}: --runtime openvino runs Transformer -> Pooling pipelines only; "
                               "this one has other modules: use --runtime torch")
        note_once(("ov-pipeline", encoder.name), "%s: its pipeline is not Transformer -> Pooling, so it runs on "
                   "torch (--runtime auto)", encoder.name)
        if precision != "fp32":
            return SentenceTransformerEncoder(name=encoder.name, model=encoder.model, prefix=encoder.prefix,
                                              identity=encoder._identity, precision=precision)
        return encoder

    def make(folder: Path, build: str) -> OpenVINOEncoder:
        return OpenVINOEncoder(name=encoder.name, model_xml=folder / "model.xml", tokenizer=encoder.tokenizer,
                               pooling=encoder.pooling, prefix=encoder.prefix, identity=encoder._identity,
                               dim=encoder.dim, batching=encoder.batching, precision=precision, build=build,
                               threads=threads)

    if encoder.precision != "fp32" or encoder.model.dtype != torch_dtype("fp32"):
        raise EncoderError(f"{encoder.name}: OpenVINO converts the fp32 torch model, not a {encoder.precision} one")
    stem = "st-" + encoder._identity.split(":", 1)[-1]
    converted, _ = ensure_openvino_model(stem=stem, weights_id=encoder._identity, precision=precision,
                                         torch_fp32=lambda: encoder, make_encoder=make)
    return converted
