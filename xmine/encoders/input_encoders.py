"""The encoder and projection a command reads its inputs with, loaded once and only when a side
needs them, and the checks that an artefact input was made with the same ones (encoder,
precision, projection, language)."""

from __future__ import annotations

import functools
from pathlib import Path

from xmine.encoders import (
    DEFAULT_ENCODER, DEFAULT_PRECISION, EncoderConfig, check_same_encoder, encoder_precision, load_encoder,
)
from xmine.encoders.external import EXTERNAL_ID_PREFIX
from xmine.encoders.loader import check_encoder_loadable, known_encoder_name
from xmine.encoders.runtime import runtime_for_artefact
from xmine.errors import ConfigError, EncoderError, EncoderMismatchError
from xmine.artefacts.input_artefacts import artefact_encoder, artefact_projection, encoding_prompt, projection_encoder
from xmine.langs import UNDETERMINED, same_language
from xmine.encoders.projection import choose_projection, resolve_projection
from xmine.artefacts.fileio import MANIFEST
from xmine.artefacts.records import EncoderFingerprint, ProjectionFingerprint, legacy_folder_note


def check_same_projection(expected: ProjectionFingerprint | None, actual: ProjectionFingerprint | None, *,
                          what: str) -> None:
    """Raise EncoderMismatchError unless both are None or both have the same projection id."""
    if (expected and expected.id) != (actual and actual.id):
        raw = "no projection (raw embeddings)"
        # (was: "... but X was given" where nothing was: the run's space is the other input's, or the default)
        raise EncoderMismatchError(f"{what} was made with {expected or raw}, but the run's space is {actual or raw} "
                                   "(--projection, else the inputs' own or the default); use inputs of one space, "
                                   "or the same --projection")


class Encoders:
    """Loads the encoder and projection once, only if a side needs them.

    `config`: the encoder asked for (`--encoder`, `--precision`, `--runtime`, `--device`, the
    prompt); what is not given is the input artefacts' (their encoder, and their precision, runtime
    and prompt, so that text encoded beside a store or an index matches it; the prompt otherwise
    the projection's), else the default. `projection`: the
    `--projection` value (None/"default", "none" or a directory), resolved by
    `xmine.encoders.projection.choose_projection`; `inputs`: the paths named, so an implicit default
    follows a store's or index's own projection.
    """

    def __init__(self, config: EncoderConfig, projection: str | Path | None, *, inputs=()):
        self._artefact_encoder = artefact_encoder(inputs)  # its name, precision and runtime are the defaults
        named = known_encoder_name(config.name)
        if named is not None and self._artefact_encoder is None:  # (beside a store: compared with its own)
            check_encoder_loadable(named)  # before a projection is chosen or work begins
        self._inputs = list(inputs)
        self.config = config
        self.encoder_name = named or (self._artefact_encoder.name if self._artefact_encoder else None)
        if self.encoder_name is None:  # (as `langid --projection` reads it)
            self.encoder_name = projection_encoder(projection)
        self.projection_spec = projection
        self.precision = config.precision
        self._artefact = artefact_projection(inputs)
        self._encoder = None
        self._projection = None

    @functools.cached_property
    def choice(self):
        """The resolved `ProjectionChoice` (path or raw, and why)."""
        return choose_projection(self.projection_spec, encoder_name=self.encoder_name or DEFAULT_ENCODER,
                                 encoder_fp=lambda: self.encoder.fingerprint(), artefact_projection=self._artefact)

    @property
    def encoder(self):
        if self._encoder is None:
            made = self._artefact_encoder
            name = self.encoder_name or DEFAULT_ENCODER
            if made is not None and made.name == name and made.id.weights.startswith(EXTERNAL_ID_PREFIX):
                raise ConfigError(f"the embeddings of encoder {name!r} were made elsewhere (embed --embeddings), so "
                                  "xmine cannot encode text beside them: store the other side's vectors with "
                                  f"`xmine embed TEXT --embeddings FILE --encoder-name {name}` too")
            # The inputs' precision and runtime are the defaults only for their own encoder (was: a
            # bf16 store's precision asked of use-m3, which refused it, hiding that the encoders differ)
            same = made if made is not None and made.name == name else None
            if same is not None and Path(name).is_absolute() and not Path(name).exists():
                # (was: "encoder '/x/enc': not a known xmine encoder ..., and no such model folder exists")
                raise EncoderError(f"{self._artefact_input()} was made with the model folder {name}, which is not "
                                   "there any more: give --encoder with that model's folder where it is now (it is "
                                   "checked to be the same model)")
            precision = self.precision or (same.run_precision if same else DEFAULT_PRECISION)
            given = self.config.prompt is not None or self.config.prompt_name is not None
            if same is not None and not given:  # as the precision: the inputs' first
                prompt = made.id.prompt
            else:  # the prompt given, else the projection's
                prompt = encoding_prompt(self.config.prompt, self.config.prompt_name, (self.projection_spec,), name)
            self._encoder = load_encoder(name, precision=precision, device=self.config.device,
                                         prefix=prompt, prompt_name=self.config.prompt_name,
                                         runtime=runtime_for_artefact(same, self.config.runtime))
            if same is not None:  # the model that name loads here: before any text is encoded beside it
                self._check_same_model(same)
            # Not through `self.projection`: choosing it may ask for this encoder's fingerprint
            # (and would then be chosen, and its notice logged, twice).
            if self._projection is not None:
                self._projection.check_encoder(self._encoder.fingerprint())
        return self._encoder

    def _check_same_model(self, made: EncoderFingerprint) -> None:
        """EncoderMismatchError where the encoder name an input artefact records (`made`) loads
        another model here (was: found once the other side was encoded): a model folder recorded by
        a relative path (before xmine recorded folders absolute) read from another folder, or a
        folder changed since. Precision, runtime and prompt are compared where the sides meet."""
        loaded = EncoderFingerprint.from_dict(self._encoder.fingerprint(), where="the loaded encoder")
        if loaded.id.model == made.id.model:
            return
        where = self._artefact_input()
        relative = " (a relative path, read from this folder)" if not Path(made.name).is_absolute() and \
            Path(made.name).exists() else ""
        raise EncoderMismatchError(f"{where} was made with encoder {made.name!r} ({made.id.weights}), but that name "
                                   f"loads another model here{relative} ({loaded.id.weights}): give --encoder with the "
                                   f"model it was made with{legacy_folder_note(made.id)}")

    def _artefact_input(self) -> str:
        """The first input that is an xmine artefact (a store, an index), as the user named it."""
        return next((str(p) for p in self._inputs if Path(p).is_dir() and (Path(p) / MANIFEST).is_file()), "an input")

    @property
    def projection(self):
        if self._projection is None and self.choice.path is not None:
            self._projection = resolve_projection(self.choice.path)
            if self._encoder is not None:
                self._projection.check_encoder(self._encoder.fingerprint())
        return self._projection

    def projection_fp(self) -> ProjectionFingerprint | None:
        return ProjectionFingerprint(**self.projection.fingerprint()) if self.projection is not None else None

    def check_artefact_encoder(self, fp: EncoderFingerprint, *, what: str) -> None:
        """Refuse an artefact of another encoder than the one named (or the projection's), or of
        another precision, prompt or runtime than the one asked for."""
        # The same name: the encoder is loaded to compare only when a prompt or runtime is asked for
        # (a store-only command loads none); precision is compared from the record below.
        asked_run = self.config.prompt is not None or self.config.prompt_name is not None \
            or self.config.runtime not in (None, "auto")
        if self.encoder_name is not None and (self.encoder_name != fp.name or asked_run):
            made = self._artefact_encoder  # embeddings made elsewhere: compared as recorded, nothing to load
            external = made is not None and made.name == self.encoder_name and made.id.weights.startswith(EXTERNAL_ID_PREFIX)
            check_same_encoder(fp, made if external else self.encoder.fingerprint(), what=what)
        if self.precision is not None:
            made, asked = fp.run_precision, encoder_precision(fp.name, self.precision)
            if made != asked:
                raise EncoderMismatchError(
                    f"{what} was made at precision {made}, but --precision {self.precision} means {asked} here; "
                    f"embeddings of two precisions are never mixed: pass --precision {made} (or rebuild it at {asked})")
        if self.projection is not None:
            self.projection.check_encoder(fp)


def check_lang(given: str | None, recorded: str | None, what: str) -> None:
    """Refuse a language that differs from the artefact's; codes compare as one language in any
    form, keeping the script (de = deu = deu_Latn = de-DE; zho_Hans != zho_Hant: xmine.langs). An
    artefact made without a language (`und`) takes the one given (was: refused every language)."""
    if given and recorded and recorded != UNDETERMINED and not same_language(given, recorded):
        raise ConfigError(f"{what} holds language {recorded!r}, but the language given for it is {given!r}")
