"""me5-small, the default encoder: loaded on torch, and its identity and fingerprint read from the
manifest of its rebuilt model folder (`xmine.encoders.e5_q4`) without loading it."""

from __future__ import annotations

from typing import Any

from xmine.encoders.base import ME5_DEFAULT_PREFIX, Encoder
from xmine.encoders.batching import default_batching
from xmine.encoders.e5_q4 import MAX_SEQ_LENGTH, ensure_me5_model, model_identity
from xmine.encoders.ov_build import build_key
from xmine.encoders.transformer import TokenBatchedEncoder, token_batched_fingerprint
from xmine.errors import EncoderError


def load_me5(*, device: str, prefix: str, precision: str, tokenizer=None) -> Encoder:
    """me5-small run by torch at `precision` (the torch half of `load_encoder`); `tokenizer`: its
    tokenizer if the caller has already loaded it (reading it takes a second or two)."""
    import torch
    import transformers
    from transformers import AutoModel, AutoTokenizer

    path, manifest = ensure_me5_model(check_hashes=True)  # (the weights are read here)
    fp = me5_fingerprint(prefix=prefix, precision=precision, manifest=manifest)
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar on every load
    try:
        if tokenizer is None:
            tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModel.from_pretrained(str(path), dtype=torch.float32).to(device)
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()
    encoder = TokenBatchedEncoder(
        name="me5-small", model=model, tokenizer=tokenizer, pooling="mean", prefix=prefix,
        identity=me5_identity(manifest), device=device,
        batching=default_batching(device, MAX_SEQ_LENGTH), precision=precision,
    )
    if encoder.fingerprint() != fp:  # one identity, whether or not the model is loaded
        raise EncoderError(f"{path}: the loaded model is not the one its manifest describes "
                           f"({encoder.fingerprint()['id']} vs {fp['id']})")
    return encoder


def me5_fingerprint(*, prefix: str = ME5_DEFAULT_PREFIX, precision: str,
                    manifest: dict[str, Any] | None = None, runtime: str = "torch") -> dict[str, Any]:
    """me5-small's fingerprint at `precision` and `runtime` (concrete) from its manifest, without loading the model."""
    if manifest is None:
        manifest = ensure_me5_model()[1]
    settings = dict(name="me5-small", dim=int(manifest["dim"]), identity=me5_identity(manifest), pooling="mean",
                    max_length=MAX_SEQ_LENGTH)
    build = None
    if runtime == "openvino":  # the converted model's build key, from what it is converted from

        weights = token_batched_fingerprint(**settings, prefix="", precision="fp32")["id"]
        build = build_key(weights_id=weights, precision=precision)
    return token_batched_fingerprint(**settings, prefix=prefix, precision=precision, runtime=runtime, build=build)


def me5_identity(manifest: dict[str, Any]) -> str:
    return f"me5-small-q4:{model_identity(manifest)}"
