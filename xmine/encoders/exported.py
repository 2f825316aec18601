"""An `xmine export-st` folder used as an encoder (`--encoder DIR`): the space it computes.

`xmine export-st` writes the encoder and the meaning layer of a projection as standard
sentence-transformers modules (disentangle/st_export.py). Loaded as an encoder, such a folder is a
model xmine did not ship, and its space would have no calibrated default: the threshold estimated
from the run kept 76 of 99 translations where the shipped projection, the same space, keeps 99.
`shipped_projection_of` finds the shipped projection an export was made of, from the export's
manifest (its kind, part and projection fingerprint) checked against the files it records and
against the shipped projection itself, so that `mine` and `score` use that projection's calibrated
values. A folder edited since the export, or made of another projection, gets none.
"""

from __future__ import annotations

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


def shipped_projection_of(encoder_name: str | None) -> Path | None:
    """The folder of the shipped projection whose meaning space the encoder folder `encoder_name`
    computes (an `xmine export-st` of it, every file as its manifest records), else None. A folder
    that says it is such an export but fails a check is logged as a warning and gets None."""
    folder = Path(encoder_name) if encoder_name else None
    if folder is None or not (folder / MANIFEST).is_file():
        return None
    try:
        manifest = load_manifest(folder / MANIFEST)
    except ArtefactError as e:
        log.warning("%s; its calibrated defaults are not used", e)
        return None
    if manifest.get("kind") != PORTABLE_KIND or manifest.get("part") != "meaning":
        return None
    projection: dict[str, Any] = manifest.get("projection") or {}
    shipped = shipped_dir(projection.get("shipped") or "") if isinstance(projection.get("shipped"), str) else None
    if shipped is None:
        return None  # an export of a user's projection: that projection's own calibration applies (--calibration)
    if read_projection_json(shipped, CONFIG)["weights_sha256"][:16] != projection.get("id"):
        log.warning("%s: an export of another version of the shipped projection (id %s); its calibrated defaults "
                    "are not used", folder, projection.get("id"))
        return None
    try:
        check_recorded_files(folder, manifest, what="export")
    except ArtefactError as e:
        log.warning("%s: changed since xmine exported it, so it is not the shipped projection's space; its "
                    "calibrated defaults are not used (%s)", folder, str(e).splitlines()[0])
        return None
    return shipped


__all__ = ["PORTABLE_KIND", "shipped_projection_of"]
