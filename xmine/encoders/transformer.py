"""Transformer sentence encoders: a fast token-batched path, and plain sentence-transformers.

Why a path of our own: on a CPU almost all encoding time is the transformer's matrix products,
and every padding token costs as much as a real one. `TokenBatchedEncoder` tokenizes a chunk of
sentences once, sorts it by *token* length (sentence-transformers sorts by characters, which
differs a lot across scripts), fills each forward pass up to a token budget (many short
sentences or a few long ones, so that each pass does a similar, cache-friendly amount of work),
runs under `torch.inference_mode`, and pools/normalises exactly as sentence-transformers' mean
(or CLS) Pooling + Normalize do. The embeddings equal the plain pipeline's to float rounding
(measured by `python benchmarks/lab/run.py embed-speed`).

Lower precision (`precision="bf16"`/`"fp16"`): the model's weights are cast once, so every matrix
product runs on bf16 operands (avx512_bf16 dot products on a CPU, tensor cores on a GPU) without
converting weights on every pass as `torch.autocast` does; the last hidden state is turned back
into float32 before pooling and L2-normalisation. embed_speed.py measures both ways side by side.
Pipelines that are not Transformer -> Pooling (run by sentence-transformers itself) use autocast
instead, which keeps their pooling and normalisation in float32.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.encoders.base import Encoder, sentence_list
from xmine.encoders.batching import BatchingConfig, default_batching, token_batches
from xmine.encoders.model_folder import (check_vocabulary, folder_problem, tokenizer_missing, unloaded_weights,
                                         unused_by_pooling)
from xmine.encoders.precision import with_precision
from xmine.encoders.prompts import model_prompt
from xmine.encoders.tokens import encode_token_states, token_ids
from xmine.errors import EncoderError

#: torch dtype name of each lower precision
_TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


def torch_dtype(precision: str):
    """The torch dtype of a concrete precision ("fp32", "bf16", "fp16")."""
    import torch

    return getattr(torch, _TORCH_DTYPES.get(precision, "float32"))


def pick_device(device: str | None) -> str:
    """`device` as given, else "cuda" when a GPU is visible, else "cpu"."""
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def tensor_digest(module, *, skip: set[int] = frozenset()) -> str:
    """sha256 over a torch module's parameters and buffers (names, dtypes, shapes, bytes), but those
    whose id() is in `skip`."""
    import torch

    h = hashlib.sha256()
    for name, t in sorted(module.state_dict(keep_vars=True).items()):
        if id(t) in skip:
            continue
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


#: a slow (Python) tokenizer's settings that change its tokens; a fast one's are in its JSON state
_SLOW_TOKENIZER_FLAGS = ("do_lower_case", "strip_accents", "tokenize_chinese_chars", "add_prefix_space",
                         "do_basic_tokenize", "model_max_length")


def tokenizer_digest(tokenizer) -> str:
    """sha256 over what a tokenizer turns text into tokens with: a fast tokenizer's whole state
    (vocabulary, normaliser, pre-tokeniser, post-processor, added tokens), a slow one's vocabulary,
    special tokens and the flags that change its tokens. Not the paths it was read from, and not
    the truncation and padding a call sets."""
    h = hashlib.sha256(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        state = json.loads(backend.to_str())
        for set_per_call in ("truncation", "padding"):
            state.pop(set_per_call, None)
        h.update(json.dumps(state, sort_keys=True, ensure_ascii=False).encode())
    else:
        h.update(json.dumps(sorted(tokenizer.get_vocab().items()), ensure_ascii=False).encode())
        kwargs = getattr(tokenizer, "init_kwargs", {})
        h.update(json.dumps({k: kwargs.get(k) for k in _SLOW_TOKENIZER_FLAGS}, sort_keys=True, default=str).encode())
    h.update(json.dumps(getattr(tokenizer, "special_tokens_map", {}), sort_keys=True, default=str).encode())
    return h.hexdigest()


def model_digest(st, *, skip: set[int] = frozenset()) -> str:
    """sha256 identifying a sentence-transformers model by what makes its vectors: its weights
    (`tensor_digest`), its tokenizer (`tokenizer_digest`) and each module's kind and config (pooling
    mode, a Dense layer's activation), so that a folder whose tokenizer or pooling was changed is
    another encoder for a store's resume and the embedding cache (was: the weights alone). `skip`:
    the id()s of tensors left out (ones the load made up at random)."""
    h = hashlib.sha256(tensor_digest(st, skip=skip).encode())
    for module in st:
        h.update(type(module).__qualname__.encode())
        config = module.get_config_dict() if hasattr(module, "get_config_dict") else {}
        h.update(json.dumps(config, sort_keys=True, default=str).encode())
        if (tokenizer := getattr(module, "tokenizer", None)) is not None:
            h.update(tokenizer_digest(tokenizer).encode())
    return h.hexdigest()


def token_batched_fingerprint(*, name: str, dim: int, identity: str, pooling: str, max_length: int, prefix: str,
                              precision: str, runtime: str = "torch", build: str | None = None) -> dict[str, Any]:
    """The fingerprint of a `TokenBatchedEncoder` with these settings, known without its model."""
    ident = f"{identity}|pool={pooling}|max_len={max_length}|prefix={prefix!r}"
    return with_precision({"name": name, "dim": dim, "id": ident}, precision, runtime, build)


class TokenBatchedEncoder(Encoder):
    """A Hugging Face encoder model + tokenizer, mean or CLS pooling, L2-normalised output."""

    def __init__(self, *, name: str, model, tokenizer, pooling: str, prefix: str, identity: str,
                 device: str, batching: BatchingConfig = BatchingConfig(), precision: str = "fp32"):
        """`model` must hold float32 weights; `precision` (concrete, not "auto") casts it in place."""
        self._settings(name=name, tokenizer=tokenizer, pooling=pooling, prefix=prefix, identity=identity,
                       device=device, batching=batching, precision=precision, runtime="torch",
                       dim=model.config.hidden_size)
        if precision not in ("fp32", *_TORCH_DTYPES):
            raise EncoderError(f"{name}: precision {precision!r} is not one the fast path runs (fp32, bf16, fp16)")
        self.model = (model if precision == "fp32" else model.to(torch_dtype(precision))).eval()

    def _settings(self, *, name: str, tokenizer, pooling: str, prefix: str, identity: str, device: str,
                  batching: BatchingConfig, precision: str, runtime: str, dim: int) -> None:
        """What every runtime of the fast path keeps (`OpenVINOEncoder` too)."""
        if pooling not in ("mean", "cls"):
            raise EncoderError(f"{name}: pooling {pooling!r} is not supported by the fast path")
        self.name, self.tokenizer, self.pooling, self.prefix = name, tokenizer, pooling, prefix
        self._identity = identity
        self.device, self.batching, self.precision, self.runtime = device, batching, precision, runtime
        self.dim, self.max_tokens = int(dim), int(batching.max_length)
        self._pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def fingerprint(self) -> dict[str, Any]:
        return token_batched_fingerprint(name=self.name, dim=self.dim, identity=self._identity, pooling=self.pooling,
                                         max_length=self.batching.max_length, prefix=self.prefix,
                                         precision=self.precision, runtime=self.runtime,
                                         build=getattr(self, "build", None))

    def encode(self, sentences: Sequence[str], *, batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        """(n, dim) float32, L2-normalised rows in input order; `batch_size` caps rows per pass."""
        from tqdm.auto import tqdm

        sentences = sentence_list(sentences)
        out = np.empty((len(sentences), self.dim), dtype=np.float32)
        window = self.batching.sort_window
        with tqdm(total=len(sentences), desc=f"encoding ({self.name})", unit="sent",
                  disable=not show_progress, dynamic_ncols=True) as bar:
            for start in range(0, len(sentences), window):
                chunk = sentences[start : start + window]
                out[start : start + len(chunk)] = self._encode_window(chunk, max(1, batch_size), bar)
        return out

    def encode_tokens(self, sentences: Sequence[str], *, show_progress: bool = False):
        """Token-level output: windows of per-sentence last hidden states (L x D, float16) and pooled
        vectors (not normalised); see `xmine.encoders.tokens.encode_token_states`."""
        return encode_token_states(self, sentences, show_progress=show_progress)

    def _encode_window(self, sentences: list[str], max_rows: int, bar) -> np.ndarray:
        ids = token_ids(self, sentences)
        out = np.empty((len(sentences), self.dim), dtype=np.float32)
        for batch, input_ids, mask in token_batches(ids, pad_id=self._pad_id, token_budget=self.batching.token_budget,
                                                    max_rows=max_rows):
            out[batch] = self._forward(input_ids, mask)
            bar.update(len(batch))
        return out

    def _pass(self, input_ids: np.ndarray, mask: np.ndarray):
        """(last hidden states, their pooling) of one padded pass, as float32 tensors, whatever
        precision the model ran at (pooling and normalisation happen in float32)."""
        import torch

        m = torch.from_numpy(mask).to(self.device)
        hidden = self.model(input_ids=torch.from_numpy(input_ids).to(self.device),
                            attention_mask=m).last_hidden_state.float()
        if self.pooling == "cls":
            return hidden, hidden[:, 0]
        mf = m.unsqueeze(-1).to(hidden.dtype)
        return hidden, (hidden * mf).sum(1) / mf.sum(1).clamp(min=1e-9)

    def _forward(self, input_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """L2-normalised pooled vectors (float32 numpy) of one padded pass."""
        import torch

        with torch.inference_mode():
            pooled = torch.nn.functional.normalize(self._pass(input_ids, mask)[1], p=2, dim=1)
            return pooled.cpu().numpy().astype(np.float32, copy=False)

    def token_states(self, input_ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(last hidden states (n, L, D) float16, pooled vectors (n, D) float32 not normalised) of one pass."""
        import torch

        with torch.inference_mode():
            hidden, pool = self._pass(input_ids, mask)
            return hidden.to(torch.float16).cpu().numpy(), pool.cpu().numpy()


class SentenceTransformerEncoder(Encoder):
    """Any sentence-transformers pipeline, run by sentence-transformers itself (Dense layers etc.)."""

    def __init__(self, *, name: str, model, prefix: str, identity: str, precision: str = "fp32"):
        """`precision` other than fp32 runs the pipeline under `torch.autocast` (float32 pooling)."""
        if precision not in ("fp32", *_TORCH_DTYPES):
            raise EncoderError(f"{name}: precision {precision!r} is not one xmine runs (fp32, bf16, fp16)")
        self.name = name
        self.model = model
        self.prefix = prefix
        self.precision = precision
        dim = model.get_embedding_dimension() if hasattr(model, "get_embedding_dimension") \
            else model.get_sentence_embedding_dimension()
        self.dim = int(dim)
        self.device = str(getattr(model, "device", "cpu"))
        self._identity = identity
        self.tokenizer = getattr(model, "tokenizer", None)
        self.max_tokens = getattr(model, "max_seq_length", None)

    def fingerprint(self) -> dict[str, Any]:
        return with_precision({"name": self.name, "dim": self.dim, "id": f"{self._identity}|prefix={self.prefix!r}"},
                              self.precision)

    def encode(self, sentences: Sequence[str], *, batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        import torch

        if len(sentences) == 0:
            return np.empty((0, self.dim), dtype=np.float32)
        ctx = (contextlib.nullcontext() if self.precision == "fp32" else
               torch.autocast(str(self.model.device.type), dtype=torch_dtype(self.precision)))
        with ctx:
            emb = self.model.encode(list(sentences), prompt=self.prefix, batch_size=batch_size,
                                    show_progress_bar=show_progress, convert_to_tensor=True)
        emb = emb.float().cpu().numpy()
        # The pipeline may lack a Normalize module; the contract says unit rows.
        emb /= np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
        return emb


def fast_path_pooling(st_model) -> str | None:
    """"mean" or "cls" when `st_model` is exactly Transformer -> Pooling [-> Normalize], else None.

    Only such pipelines can be run by `TokenBatchedEncoder` without changing their output.
    """
    modules = list(st_model)
    kinds = [type(m).__name__ for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    transformer, pooling = modules[0], modules[1]
    if getattr(transformer, "do_lower_case", False) or not hasattr(transformer, "auto_model"):
        return None
    cfg = pooling.get_config_dict()
    if cfg.get("include_prompt", True) is False:
        return None
    mode = cfg.get("pooling_mode")
    if mode is None:  # sentence-transformers < 6 stores one flag per mode
        on = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True]
        mode = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}.get(on[0]) if len(on) == 1 else None
    return mode if mode in ("mean", "cls") else None


@contextlib.contextmanager
def library_quiet():
    """Loading and saving a sentence-transformers model without the libraries' own chatter: their
    progress bars ("Loading weights", "Writing model shards") and notes ("Default prompt name is
    set to 'query'") printed under -q too, where xmine says what it uses itself (the prompt, the
    runtime). Errors still show."""
    loggers = [logging.getLogger(name) for name in ("sentence_transformers", "transformers")]
    levels = [logger.level for logger in loggers]
    hf_logging = None
    try:
        from transformers.utils import logging as hf_logging

        bars_were_on = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
        if hf_logging is not None and bars_were_on:
            hf_logging.enable_progress_bar()


def load_sentence_transformer(name: str, *, prefix: str | None, device: str | None, precision: str = "fp32",
                              prompt_name: str | None = None) -> Encoder:
    """Any sentence-transformers model by hub name or local path, on the fast path when possible,
    with the prompt `xmine.encoders.prompts.model_prompt` chooses (its config's default when
    `prefix` and `prompt_name` are None)."""
    from sentence_transformers import SentenceTransformer

    device = pick_device(device)
    try:
        with library_quiet():
            st = SentenceTransformer(name, device=device)
    except Exception as e:  # OSError/ValueError/HF errors: all mean "cannot get this model"
        if Path(name).is_dir():  # a local folder: what is wrong with it, not where models come from
            raise EncoderError(f"encoder {name!r}: the folder could not be loaded as a sentence-transformers model: "
                               f"{folder_problem(Path(name), e)}") from e
        offline = os.environ.get("HF_HUB_OFFLINE") == "1"
        raise EncoderError(
            f"encoder {name!r}: not a known xmine encoder (me5-small, use-m3) and it could not be loaded "
            f"as a sentence-transformers model ({type(e).__name__}: {str(e).splitlines()[0][:200]}). "
            + ("HF_HUB_OFFLINE=1 is set, so only models already in the Hugging Face cache or local "
               "folders load; pass a local model folder, or download it on a connected machine first."
               if offline else "Check the name, or pass the path of a local model folder.")
        ) from e

    if Path(name).is_dir() and (why := tokenizer_missing(Path(name))) is not None:
        raise EncoderError(f"encoder {name!r}: {why}")
    auto_model = getattr(st[0], "auto_model", None) if len(st) else None
    unloaded = unloaded_weights(Path(name), auto_model) if Path(name).is_dir() and auto_model is not None else []
    if missing := [t for t in unloaded if not unused_by_pooling(t)]:  # (was: embedded with them, no word)
        raise EncoderError(f"encoder {name!r}: its weights lack {len(missing):,} of the model's tensors "
                           f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): loaded, they would be "
                           "random, and differ on every load")
    prefix = model_prompt(name, prompts=getattr(st, "prompts", None) or {},
                          default_name=getattr(st, "default_prompt_name", None), prefix=prefix, prompt_name=prompt_name)
    # (the random tensors left out: was, for a folder without BERT's pooler, another id on every load,
    # so its stores refused each other and a resume)
    made_up = {id(t) for n, t in auto_model.state_dict(keep_vars=True).items() if n in unloaded} if unloaded else set()
    identity = f"st:{model_digest(st, skip=made_up)[:16]}"
    pooling = fast_path_pooling(st)
    if pooling is None:
        return SentenceTransformerEncoder(name=name, model=st, prefix=prefix, identity=identity, precision=precision)
    transformer = st[0]
    check_vocabulary(name, transformer.tokenizer, transformer.auto_model)
    max_len = st.max_seq_length or transformer.tokenizer.model_max_length or 512
    if isinstance(max_len, float) and max_len.is_integer():
        max_len = int(max_len)
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:  # (was: a ValueError traceback)
        raise EncoderError(f"encoder {name!r}: max_seq_length {max_len!r} (its sentence_bert_config.json) is not a "
                           "positive whole number of tokens")
    return TokenBatchedEncoder(
        name=name, model=transformer.auto_model, tokenizer=transformer.tokenizer, pooling=pooling,
        prefix=prefix, identity=identity, device=device, batching=default_batching(device, min(max_len, 8192)),
        precision=precision,
    )
