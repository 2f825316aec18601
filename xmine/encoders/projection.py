"""What the core needs of a projection, and where a `--projection` option is resolved.

A projection maps encoder embeddings to a part of them ("meaning" or "language"); the trained
disentanglers of `xmine.disentangle` are one implementation. The core (store writer, input
layer) only calls the three methods of `ProjectionLike`, so it never imports the feature
package: a projection DIRECTORY is opened through the artefact reader registered for the
kind "projection" (`xmine.artefacts.directory.register_readers`, by the composition roots).

Which projection (`choose_projection`): xmine ships a small trained projection for its default
encoder inside the package (`xmine/projections/<encoder>/`: a normal projection directory, plus
`SHIPPED.json` with the command that rebuilds it, its data hashes, the commit and its benchmark
numbers). Commands that embed text (`embed`, `build-index`, `search`, `mine`) then work in its
meaning space by default when its SHIPPED.json says `"is_default": true` (exactly): a shipped
projection becomes the default only after it is at least raw on every benchmark (until then,
`why_not_default` says what is missing, an implicit choice gives raw embeddings with that line in
the log, and `--projection default` opts in). Its SHIPPED.json also holds its own calibrated
mining thresholds (`projection_defaults`), which `xmine mine` uses when no `--threshold` is given:

- not given (`None`) or `default`: the shipped projection of the encoder in use, when there is one
  and the encoder is the one it was trained on (the same weights and prefix, at any precision:
  `xmine.encoders.check_projection_encoder`). Any other encoder gets raw embeddings, said in a
  log line. When an input is
  already an embedding store or an index, an implicit default follows what that artefact was made
  with, so earlier raw artefacts keep working.
- `none`: raw encoder embeddings.
- a directory: that projection (`xmine train`).

Every artefact records the projection's fingerprint (a shipped one carries "shipped": encoder
name), and the mining summary also records how it was chosen (`ProjectionChoice.record`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from xmine.artefacts.directory import open_artefact
from xmine.calibration import SpaceDefaults, parse_defaults
from xmine.encoders import check_projection_encoder
from xmine.errors import ArtefactError, ConfigError, EncoderMismatchError, InputError
from xmine.artefacts.fileio import MANIFEST, VerifiedFiles, check_names, missing, read_manifest
from xmine.artefacts.records import FileRecord, ProjectionFingerprint, read_field
from xmine.langs import normalize_lang

log = logging.getLogger("xmine")

PROJECTION_KIND = "projection"
#: Format 2 records the sha256 of every file (`files`); format 1 recorded none and is not read.
PROJECTION_FORMAT = 2
CONFIG = "config.json"
WEIGHTS = "model.safetensors"


@runtime_checkable
class ProjectionLike(Protocol):
    """A map from encoder embeddings to one of their parts."""

    def transform(self, emb: np.ndarray, part: str = "meaning", *, lang: str | None = None) -> np.ndarray:
        """(n, dim) embeddings -> (n, d') float32 rows of `part`, L2-normalised. `lang`: the
        language of the rows when the caller knows it (a language-dependent projection such as
        `center` uses it; others ignore it)."""

    def fingerprint(self) -> dict[str, Any]:
        """What identifies it: {"path", "method", "id"}; equal ids mean the same projection."""

    def check_encoder(self, encoder_fingerprint: dict[str, Any]) -> None:
        """Raise `EncoderMismatchError` unless it applies to that encoder's embeddings."""


def open_projection(projection: "ProjectionLike | str | Path | None") -> ProjectionLike | None:
    """None, a loaded projection, or a projection directory (opened and validated) -> the projection,
    of any kind: the benchmarks read an FMDA projection's parts through the encoder's token states."""
    if projection is None or isinstance(projection, ProjectionLike):
        return projection  # type: ignore[return-value]
    return open_artefact(projection, PROJECTION_KIND)


def resolve_projection(projection: "ProjectionLike | str | Path | None") -> ProjectionLike | None:
    """`open_projection`, for a command that projects sentence vectors: a ConfigError for one that
    reads token states (an FMDA projection: was found once the first batch of the corpus was
    encoded, in words of the Python API)."""
    opened = open_projection(projection)
    if getattr(opened, "token_level", False):
        raise ConfigError(f"{projection}: a projection of method {getattr(opened, 'method', '?')}, which reads the "
                          "encoder's token states, not sentence vectors as every corpus command projects them; "
                          "give a projection of another method (its benchmarks: xmine bench fmda, tatoeba, massive)")
    return opened


def unseen_languages(fingerprint: ProjectionFingerprint | None, langs, *,
                     projection: ProjectionLike | None = None) -> list[str]:
    """Those of `langs` (codes as given; None skipped) that a user's projection was not trained on
    (the languages its config lists): its meaning part of them is untested. [] for raw embeddings,
    for the shipped projection (measured on languages it never saw: benchmarks/results/notes/
    heldout_news.md), and for a projection that lists no languages or no longer opens. `projection`:
    the one `fingerprint` names, where it is open already (else it is opened)."""
    if fingerprint is None or fingerprint.shipped:
        return []
    try:
        known = {normalize_lang(code) for code in getattr(open_projection(projection or fingerprint.path),
                                                          "languages", [])}
    except (ArtefactError, InputError, OSError):
        return []
    return [lang for lang in langs if known and lang and normalize_lang(lang) not in known]


def unseen_languages_note(projection_dir, unseen: list[str]) -> str:
    """What `mine` and `calibrate` say of the languages `unseen` (`unseen_languages`) a projection
    was not trained on; each adds its remedy."""
    return (f"projection {projection_dir} was not trained on {', '.join(unseen)}: its meaning part of "
            f"{'that language' if len(unseen) == 1 else 'those languages'} is untested")


def warn_of_unseen_languages(projection_dir: str | Path | None, langs) -> None:
    """The warning `embed` and `build-index` give where the projection in `projection_dir` (None:
    raw) was not trained on one of `langs` (`unseen_languages`; was: said only by `mine` and
    `calibrate`, so an index of such vectors was searched without a word)."""
    projection = open_projection(projection_dir) if projection_dir is not None else None
    fingerprint = ProjectionFingerprint.from_dict(projection.fingerprint(), where="projection") if projection else None
    if unseen := unseen_languages(fingerprint, langs, projection=projection):
        log.warning(f"{unseen_languages_note(projection_dir, unseen)}; `xmine bench tatoeba --projection "
                    f"{projection_dir}` measures it, and `--projection none` keeps raw embeddings")


DEFAULT = "default"
NONE = "none"
#: The folder of shipped projections (package data), one sub-folder per encoder name.
SHIPPED_ROOT = Path(__file__).resolve().parent.parent / "projections"
SHIPPED_INFO = "SHIPPED.json"
#: The files a projection's manifest records: always, and (a shipped projection) SHIPPED.json.
PROJECTION_FILES = (CONFIG, WEIGHTS)


def projection_files(directory: str | Path) -> VerifiedFiles:
    """The files of the projection directory `directory` with the sha256 its manifest records,
    to check before any is read. Refused (ArtefactError, one line): a manifest of another kind or
    format, a name that is not one of the writer's (`check_names`), config or weights not recorded,
    and a SHIPPED.json on disk that the manifest does not record (its thresholds would be used
    unchecked)."""
    directory = Path(directory)
    where = directory / MANIFEST
    manifest = read_manifest(directory, PROJECTION_KIND, format_version=PROJECTION_FORMAT)
    files = read_field(manifest, "files", dict[str, FileRecord], where=str(where))
    check_names(files, PROJECTION_FILES + (SHIPPED_INFO,), where=f"{where}: files", what="projection")
    missing = [name for name in PROJECTION_FILES if name not in files]
    if missing:
        raise ArtefactError(f"{where}: files: {missing[0]} is not recorded; the projection is damaged")
    if SHIPPED_INFO not in files and os.path.lexists(directory / SHIPPED_INFO):
        raise ArtefactError(f"{directory / SHIPPED_INFO}: not recorded in the projection's {MANIFEST}; refusing "
                            "to use it (added or edited by hand?)")
    return VerifiedFiles(directory, files, what="projection")


def read_projection_json(directory: str | Path, name: str) -> dict[str, Any]:
    """The JSON object in the projection's file `name` (config.json, SHIPPED.json), its sha256
    checked against the manifest first; ArtefactError naming the file otherwise."""
    projection_files(directory).check(name)
    path = Path(directory) / name
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise ArtefactError(f"{path}: unreadable, not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise ArtefactError(f"{path}: a JSON {type(value).__name__}, not the object xmine writes")
    return value


@dataclasses.dataclass(frozen=True)
class ProjectionChoice:
    """What `--projection` resolved to: a projection directory (None = raw) and why."""

    path: Path | None
    #: "default", "none", "path", "default-unavailable" or "artefact"
    how: str
    reason: str

    def record(self) -> dict[str, Any]:
        return {"how": self.how, "reason": self.reason, "path": str(self.path) if self.path else None}


def shipped_dir(encoder_name: str) -> Path | None:
    """The shipped projection folder for an encoder name, if the package has one."""
    if not encoder_name or "/" in encoder_name or "\\" in encoder_name or encoder_name.startswith("."):
        return None  # a model path or hub name: never a shipped one
    d = SHIPPED_ROOT / encoder_name
    return d if (d / "manifest.json").is_file() and (d / "config.json").is_file() else None


def shipped_encoder(path: str | Path) -> str | None:
    """The encoder whose shipped projection the folder `path` is, or None (any other projection)."""
    where = Path(path).resolve()
    return where.name if where.parent == SHIPPED_ROOT else None


def shipped_info(encoder_name: str) -> dict[str, Any] | None:
    """SHIPPED.json of the shipped projection (recipe, data hashes, commit, numbers), checked
    against its manifest."""
    d = shipped_dir(encoder_name)
    return read_shipped_json(d) if d is not None and (d / SHIPPED_INFO).is_file() else None


def read_shipped_json(directory: str | Path) -> dict[str, Any]:
    """The projection's SHIPPED.json (`read_projection_json`), its `default_thresholds` checked: an
    object of finite numbers by margin (InputError naming the file and the field otherwise)."""
    info = read_projection_json(directory, SHIPPED_INFO)
    path = Path(directory) / SHIPPED_INFO
    thresholds = info.get("default_thresholds", {})
    if not isinstance(thresholds, dict):
        raise InputError(path, f"default_thresholds is {repr(thresholds)[:80]}, not an object of thresholds by margin")
    for margin, t in thresholds.items():
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not np.isfinite(t):
            raise InputError(path, f"default_thresholds.{margin}: expected a finite number, not {t!r}")
    return info


def _takes(trained: dict, actual: dict, *, what: str) -> bool:
    """Whether a projection trained on `trained` applies to `actual`'s embeddings: the encoders'
    one rule (`check_projection_encoder`: the same weights and prefix, at any precision)."""
    try:
        check_projection_encoder(trained, actual, what=what)
    except EncoderMismatchError:
        return False
    return True


def choose_projection(spec: str | Path | None, *, encoder_name: str, encoder_fp=None,
                      artefact_projection: tuple[bool, ProjectionFingerprint | None] = (False, None)
                      ) -> ProjectionChoice:
    """What a `--projection` value means here (see the module doc); loads nothing.

    `encoder_fp`: the encoder's fingerprint, or a callable returning it (called only when the
    shipped projection's encoder name matches, so naming another encoder loads nothing).
    `artefact_projection`: (an input is a store/index, the projection fingerprint it records).
    """
    text = str(spec) if spec is not None else None
    if text is not None and text.lower() == NONE:
        return ProjectionChoice(None, "none", "--projection none: raw encoder embeddings")
    if text is not None and not text:  # (was: Path("") the working directory, read as a projection)
        raise ConfigError("--projection: an empty value; give 'default', 'none' or a projection directory")
    if text is not None and text.lower() != DEFAULT:
        path = Path(text).expanduser()
        if not path.is_dir():
            why = missing(path) or "not a directory"  # (a link that loops or names nothing said to be one)
            raise InputError(path, f"--projection: no projection directory: {why} (or use 'default' / 'none')")
        return ProjectionChoice(path, "path", f"projection {path}")
    explicit = text is not None
    has_artefact, recorded = artefact_projection
    if not explicit and has_artefact:
        if recorded is None:
            return ProjectionChoice(None, "artefact", "the input artefact holds raw embeddings")
        if recorded.shipped:
            d = shipped_dir(encoder_name)
            if d is not None:
                return ProjectionChoice(d, "artefact", "the input artefact was made with the shipped projection")
            raise ConfigError(f"--encoder {encoder_name!r}: the input artefact was made with another encoder (and "
                              "the projection shipped for it); leave --encoder out to use the artefact's own")
        raise ConfigError(f"the input artefact was made with {recorded}; pass it with --projection")
    d = shipped_dir(encoder_name)
    if d is None:
        # (an export-st folder holds its projection: "raw" said of it read as if the projection were dropped)
        msg = (f"no shipped projection for encoder {encoder_name!r}: its own embeddings are used raw, with no "
               "projection on top")
        if explicit:
            raise ConfigError(f"--projection default: {msg.split(':')[0]}")
        log.info(msg)
        return ProjectionChoice(None, "default-unavailable", msg)
    trained = read_projection_json(d, CONFIG).get("encoder")  # what it was trained on
    if not isinstance(trained, dict):
        raise ArtefactError(f"{d / CONFIG}: field 'encoder' is {repr(trained)[:80]}, not an object")
    actual = encoder_fp() if callable(encoder_fp) else encoder_fp
    if actual is not None and not _takes(trained, actual, what=f"the shipped projection {d}"):
        msg = (f"the shipped projection was trained on encoder {trained.get('name')!r} id {trained.get('id')!r}, "
               f"not {actual.get('name')!r} id {actual.get('id')!r} (other weights or prefix)")
        if explicit:  # (asked for by name: refused, not replaced by raw embeddings)
            raise ConfigError(f"--projection default: {msg}; encode with the encoder and prompt it was trained "
                              "with, or pass --projection none for raw embeddings")
        msg += ": using raw embeddings"
        log.info(msg)
        return ProjectionChoice(None, "default-unavailable", msg)
    info = shipped_info(encoder_name) or {}
    if not explicit and info.get("is_default") is not True:
        # Shipped but not yet made the default: it must first be at least raw on every benchmark.
        msg = f"the shipped projection for {encoder_name} is {info.get('why_not_default', 'not the default')}: using raw embeddings"
        log.info(msg)
        return ProjectionChoice(None, "default-off", msg)
    return ProjectionChoice(d, "default", f"the shipped default projection for {encoder_name} ({d})")


def projection_defaults(projection_dir: str | Path) -> SpaceDefaults | None:
    """A projection's calibrated values (its SHIPPED.json), or None (a projection without one)."""
    path = Path(projection_dir) / SHIPPED_INFO
    if not os.path.lexists(path):
        return None
    info = read_projection_json(projection_dir, SHIPPED_INFO)  # recorded in the manifest, sha256 matches
    shipped = shipped_encoder(projection_dir)  # (the summary line names it, not the install's path)
    what = f"the shipped {shipped} projection" if shipped else f"projection {projection_dir}"
    found = parse_defaults(info, path, "", f"calibrated for {what} (its {SHIPPED_INFO})")
    return found if found.thresholds else None


__all__ = ["CONFIG", "DEFAULT", "NONE", "PROJECTION_FILES", "PROJECTION_FORMAT", "PROJECTION_KIND", "ProjectionChoice",
           "ProjectionLike", "SHIPPED_INFO", "SHIPPED_ROOT", "WEIGHTS", "choose_projection", "open_projection",
           "projection_defaults", "projection_files", "read_projection_json", "read_shipped_json",
           "resolve_projection", "shipped_dir", "shipped_encoder", "shipped_info", "unseen_languages",
           "unseen_languages_note", "warn_of_unseen_languages"]
