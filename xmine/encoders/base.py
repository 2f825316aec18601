"""The `Encoder` contract every sentence encoder keeps, the names and defaults shared by all of
them, and the once-per-process notices they give (see `xmine.encoders` for the whole story)."""

from __future__ import annotations

import abc
import contextlib
import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from xmine.errors import ConfigError, EncoderError
from xmine.paths import xmine_home

log = logging.getLogger("xmine.encoders")  # (the package's logger: one name for every encoder message)

DEFAULT_ENCODER = "me5-small"
#: the encoders xmine builds itself (`xmine encoders`); any other name is a model folder or hub name
BUILTIN_ENCODERS = ("me5-small", "use-m3")
#: what `precision=` accepts; "auto" resolves per device (`resolve_precision`)
PRECISIONS = ("auto", "fp32", "bf16", "fp16", "int8")
DEFAULT_PRECISION = "auto"
#: what `runtime=` accepts; "auto" resolves per machine and precision (`xmine.encoders.runtime`)
RUNTIMES = ("auto", "torch", "openvino")


@dataclass(frozen=True, kw_only=True)
class EncoderConfig:
    """The encoder a command was asked for (`--encoder`, `--precision`, `--runtime`, `--device`,
    `--prompt`, `--prompt-name`), passed on as one value to what loads it. None: not given, so the
    input artefacts' own encoder, precision and runtime where there are some
    (`xmine.encoders.input_encoders.Encoders`), else the defaults (me5-small, precision and runtime
    auto, CUDA when available, the model's own prompt: `xmine.encoders.prompts`)."""

    name: str | None = None
    precision: str | None = None
    runtime: str | None = None
    device: str | None = None
    #: the text put before every sentence ("" = none; `load_encoder(prefix=)`)
    prompt: str | None = None
    #: a prompt of the model's config by name (`load_encoder(prompt_name=)`); not with `prompt`
    prompt_name: str | None = None

    def __post_init__(self):
        # checked where it is made, from the Python API too (was: an unknown runtime taken until a model loaded)
        for field, known in (("precision", PRECISIONS), ("runtime", RUNTIMES)):
            if (value := getattr(self, field)) is not None and value not in known:
                raise ConfigError(f"{field} must be one of {', '.join(known)} (got {value!r})")


#: The E5 prefix for symmetric tasks (bitext mining, STS, cross-lingual retrieval of sentences).
ME5_DEFAULT_PREFIX = "query: "


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
    #: what really runs it where that is not `runtime` (use-m3: "numpy"; its runtime is nominal)
    engine: str | None = None
    #: where this process runs it ("cpu", "cuda", "cuda:1"); None where nothing here runs a model
    #: (vectors read from a file; an encoder only named for Ray actors, which choose their own)
    device: str | None = "cpu"

    @abc.abstractmethod
    def encode(self, sentences: Sequence[str], *, batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        """Embed `sentences`; (len(sentences), dim) float32, rows L2-normalised, input order."""

    @abc.abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """A JSON-able identity of the weights and precision: the fields of
        `xmine.artefacts.records.EncoderFingerprint`; equal ids = same encoder (build it with `with_precision`)."""

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


def sentence_list(sentences) -> list[str]:
    """`sentences` as a list, or a ConfigError: one string alone (was: embedded as one sentence per
    character) or an item that is not a string (was: a TypeError inside the tokenizer)."""
    if isinstance(sentences, (str, bytes)):
        raise ConfigError(f"sentences must be a list of strings, not one {type(sentences).__name__} "
                          f"({str(sentences)[:40]!r}): pass [text]")
    sentences = list(sentences)
    bad = next((i for i, s in enumerate(sentences) if not isinstance(s, str)), None)
    if bad is not None:
        raise ConfigError(f"sentences must be strings: item {bad} is {sentences[bad]!r}")
    return sentences


def check_finite_output(vectors: np.ndarray, encoder: Encoder, where) -> None:
    """EncoderError when a row the encoder returned is not finite (NaN or inf): damaged weights, or
    a model that overflows at its precision. `where(i)` says which input row i is (a line of a file).
    (was: `embed` wrote a store of NaN rows and said it had embedded them; mining refused it later)"""
    bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
    if len(bad):
        raise EncoderError(f"{encoder.name}: the encoder returned a vector that is not finite (NaN or inf) for "
                           f"{where(int(bad[0]))} ({len(bad)} of {len(vectors)} in its batch): its weights are damaged"
                           + (f", or it overflows at {encoder.precision} (try --precision fp32)"
                              if encoder.precision != "fp32" else "") + "; none of them was written")


_NOTICED: set[tuple] = set()
#: markers of the notices already given on this machine, under $XMINE_HOME
NOTICES_DIR = "notices"


def note_once(key: tuple, message: str, *args, per_machine: bool = False) -> None:
    """Log `message` at INFO the first time `key` is seen in this process. `per_machine`: only the
    first time this exact text is given on this machine (a marker under $XMINE_HOME/notices/):
    a fact about the machine and the model (the precision --precision auto chose, a projection
    applied to another runtime's embeddings) is news once, not on every run (OUT.json and store
    manifests record it every time); when the text changes (another model, precision or reason)
    it is news again. Later runs log it at DEBUG."""
    if key in _NOTICED:
        return
    _NOTICED.add(key)
    if per_machine and not _first_on_this_machine(message % args if args else message):
        log.debug(message, *args)
        return
    log.info(message, *args)


@contextlib.contextmanager
def quiet_logger(name: str, level: int) -> Iterator[None]:
    """The logger `name` at `level` inside the block (a library's chatter that is not the user's business)."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def _first_on_this_machine(text: str) -> bool:
    """Whether `text` is given here for the first time; marks it given (an unwritable cache: every
    run gives it, as before)."""
    try:
        marker = xmine_home() / NOTICES_DIR / hashlib.sha256(text.encode()).hexdigest()[:32]
        if marker.is_file():
            return False
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(text + "\n", encoding="utf-8")
    except OSError:
        pass
    return True
