"""What an input path is (a corpus, an embedding store, an index directory) and what an artefact
input's manifest records: its encoder, precision and projection."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Sequence

from xmine.errors import ArtefactError, InputError
from xmine.artefacts.fileio import MANIFEST, load_manifest, manifest_kind, missing
from xmine.artefacts.output_state import being_written, dir_kind
from xmine.io.reader_base import is_dataset_dir
from xmine.artefacts.records import EncoderFingerprint, ProjectionFingerprint, read_field
from xmine.io.stdin import is_stdin


def artefact_kind(path: str | Path, input_format: Any = None) -> str:
    """"text" for a corpus (a file, a Hugging Face dataset folder, or with `--input-format hf` a
    folder of data files: `xmine.io.readers`), else the `kind` in the directory's manifest
    ("embedding-store", "index")."""
    if is_stdin(path):  # standard input, copied into a work directory when read (xmine.io.stdin)
        return "text"
    p = Path(path)
    hf_files = getattr(input_format, "format", None) == "hf" and p.is_dir() and not (p / MANIFEST).is_file()
    if p.is_file() or is_dataset_dir(p) or hf_files:
        return "text"
    if p.is_dir():
        if not (p / MANIFEST).is_file():
            kind, _ = dir_kind(p)
            if kind is not None or (p / "progress.json").is_file():
                what = (kind or "embedding-store").replace("-", " ")
                if being_written(p):  # (was: "its run was interrupted or failed" of a run still going)
                    raise InputError(p, f"an unfinished {what} that another xmine process is writing right now; "
                                        "wait for it to finish")
                raise InputError(p, f"an unfinished {what} (its run was interrupted or failed); run the same "
                                    "command again to finish it")
            raise InputError(p, "a directory without manifest.json: expected a corpus file, a Hugging Face "
                                "save_to_disk folder, an embedding store (xmine embed) or an index (xmine "
                                "build-index); for a folder of data files pass --input-format hf")
        return manifest_kind(p)
    if p.exists():  # a pipe, process substitution or device: inputs are read more than once
        raise InputError(p, "is a pipe or another non-regular file, which is not supported as input; "
                            "save it to a file first")
    raise InputError(p, missing(p) or "no such file or directory")


def _recorded(paths, name: str, want) -> tuple[bool, Any]:
    """(whether an artefact directory among `paths` records field `name`, the first one's, read as `want`)."""
    for p in paths:
        if Path(p).is_dir() and (Path(p) / MANIFEST).is_file():
            try:
                return True, read_field(load_manifest(Path(p) / MANIFEST), name, want,
                                        where=str(Path(p) / MANIFEST))
            except (ValueError, TypeError, ArtefactError):
                continue
    return False, None


def artefact_encoder(paths) -> EncoderFingerprint | None:
    """The encoder fingerprint recorded by the first artefact directory among `paths` (None: only text)."""
    return _recorded(paths, "encoder", EncoderFingerprint)[1]


def _projection_made_for(projection) -> EncoderFingerprint | None:
    """The encoder fingerprint a projection directory records (None: `projection` is None,
    "default", "none", or no projection directory)."""
    if projection in (None, "default", "none") or not Path(projection).is_dir():
        return None
    return artefact_encoder([projection])


def projection_encoder(projection) -> str | None:
    """The name of the encoder a projection directory was made for (None: `projection` is None,
    "default", "none", or no projection directory): the encoder to use where none is given, rather
    than meeting the default encoder's embeddings and being refused."""
    made_for = _projection_made_for(projection)
    return made_for.name if made_for is not None else None


def projection_prompt(projection, encoder_name: str | None = None) -> str | None:
    """The prompt the encoder of a projection directory ran with: the prompt to encode with where
    none is given, since the projection was trained on embeddings made with it. None: not a
    projection directory (as `projection_encoder`), made for another encoder than `encoder_name`
    (where given), or no prompt recorded."""
    made_for = _projection_made_for(projection)
    if made_for is None or (encoder_name is not None and made_for.name != encoder_name):
        return None
    return made_for.id.prompt


def encoding_prompt(prompt: str | None, prompt_name: str | None, projections: Sequence,
                    encoder_name: str | None = None) -> str | None:
    """The prompt to encode with: `prompt` where given; where neither it nor a prompt name is, the
    first of the projection directories `projections` that records one (`projection_prompt`: the
    prompt its training embeddings were made with, so the projection meets the embeddings it expects)."""
    if prompt is not None or prompt_name is not None:
        return prompt
    return next((p for p in (projection_prompt(d, encoder_name) for d in projections) if p is not None), None)


def artefact_lang(path) -> str | None:
    """The language a store or an index directory records (None: a corpus, or none recorded)."""
    return _recorded([path], "lang", str | None)[1]


def artefact_input(path) -> dict | None:
    """What a store or an index directory records of the input it was made from (None: a corpus, or
    none recorded): its path, hashes and how it was read, split into sentences or not."""
    return _recorded([path], "input", dict | None)[1]


def artefact_projection(paths) -> tuple[bool, ProjectionFingerprint | None]:
    """(whether one of `paths` is a store/index, the projection fingerprint the first one records)."""
    return _recorded(paths, "projection", ProjectionFingerprint | None)


def manifest_hash(path: Path) -> str:
    return hashlib.sha256((path / MANIFEST).read_bytes()).hexdigest()
