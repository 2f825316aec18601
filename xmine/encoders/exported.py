"""An `xmine export-st` folder used as an encoder (`--encoder DIR`): the space it computes.

`xmine export-st` writes the encoder and the meaning layer of a projection as standard
sentence-transformers modules (disentangle/st_export.py). Loaded as an encoder, such a folder is a
model xmine did not ship, and its space would have no calibrated default: the threshold estimated
from the run kept 76 of 99 translations where the shipped projection, the same space, keeps 99.
`exported_space` reads what an export computes (the encoder and the projection it was made of)
from its manifest, checked against the files it records; `shipped_projection_of` finds the shipped
projection among them, so that `mine` and `score` use that projection's calibrated values, and a
user's `xmine calibrate` record of the projection holds for its export too
(`xmine.mining.calibrate.check_calibration_space`). A folder edited since the export gets neither.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from pathlib import Path
from typing import Any

from xmine.artefacts.fileio import MANIFEST, load_manifest
from xmine.artefacts.verify import check_recorded_files
from xmine.encoders.projection import CONFIG, read_projection_json, shipped_dir
from xmine.errors import ArtefactError

log = logging.getLogger(__name__)

#: the manifest kind of `xmine export-st`'s folder
PORTABLE_KIND = "sentence-transformer-portable"
#: the file of an export naming the encoder and projection it was made of (disentangle/st_export.py)
EXPORT_RECORD = "xmine_projection.json"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportedSpace:
    """The meaning space an `xmine export-st` folder computes."""

    #: the projection's fingerprint id (the first 16 hex digits of its weights' sha256)
    projection_id: str
    #: the name of the encoder the projection was trained on (`me5-small`)
    encoder: str
    #: the shipped projection's folder, where the export was made of one (its `shipped` name)
    shipped_name: str | None


def exported_space(encoder_name: str | None) -> ExportedSpace | None:
    """What the encoder folder `encoder_name` computes where it is an `xmine export-st` of a
    projection's meaning part with every file as its manifest records, else None. A folder that says
    it is such an export but fails a check is logged as a warning and gets None."""
    folder = Path(encoder_name) if encoder_name else None
    if folder is None or not (folder / MANIFEST).is_file():
        return None
    # Every file's sha256 takes seconds for an encoder's weights, so it is computed once per state of
    # the folder: a file's size or modification time changing is a new state.
    state = tuple(sorted((str(p), s.st_size, s.st_mtime_ns) for p in folder.rglob("*") if (s := p.lstat())))
    return _exported_space(folder.resolve(), state)


@functools.lru_cache(maxsize=8)
def _exported_space(folder: Path, _state: tuple) -> ExportedSpace | None:
    try:
        manifest = load_manifest(folder / MANIFEST)
    except ArtefactError as e:
        log.warning("%s; its calibrated defaults are not used", e)
        return None
    if manifest.get("kind") != PORTABLE_KIND or manifest.get("part") != "meaning":
        return None
    projection: dict[str, Any] = manifest.get("projection") or {}
    try:
        check_recorded_files(folder, manifest, what="export")
        encoder = json.loads((folder / EXPORT_RECORD).read_text(encoding="utf-8"))["encoder"]["name"]
    except ArtefactError as e:
        log.warning("%s: changed since xmine exported it, so it is not its projection's space; its calibrated "
                    "values are not used (%s)", folder, str(e).splitlines()[0])
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:  # (its files match the manifest: an export of old)
        log.warning("%s: %s names no encoder (%s); its projection's calibrated values are not used",
                    folder, EXPORT_RECORD, e)
        return None
    if not isinstance(projection.get("id"), str) or not isinstance(encoder, str):
        return None
    shipped = projection.get("shipped")
    return ExportedSpace(projection_id=projection["id"], encoder=encoder,
                         shipped_name=shipped if isinstance(shipped, str) else None)


def shipped_projection_of(encoder_name: str | None) -> Path | None:
    """The folder of the shipped projection whose meaning space the encoder folder `encoder_name`
    computes (an `xmine export-st` of it, checked as `exported_space` checks), else None."""
    space = exported_space(encoder_name)
    shipped = shipped_dir(space.shipped_name) if space is not None and space.shipped_name else None
    if shipped is None:
        return None  # an export of a user's projection: that projection's own calibration applies (--calibration)
    if read_projection_json(shipped, CONFIG)["weights_sha256"][:16] != space.projection_id:
        log.warning("%s: an export of another version of the shipped projection (id %s); its calibrated defaults "
                    "are not used", encoder_name, space.projection_id)
        return None
    return shipped


__all__ = ["EXPORT_RECORD", "ExportedSpace", "PORTABLE_KIND", "exported_space", "shipped_projection_of"]
