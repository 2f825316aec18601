"""The defaults of `xmine mine` that depend on the space it scores in: threshold and score cap.

Margin scores are on each space's own scale (translations' ratio margins run about 1.02-1.16 with
raw me5-small, 1.3-2.4 with use-m3, lower than raw in the projection's meaning space), so one number cannot
serve every space. Each space xmine ships has its values calibrated on the same BUCC-style sets
(`benchmarks/lab/calibrate_defaults.py`, docs/mining.md "Default thresholds"), per margin and
operating point (`OPERATING_POINTS`):
- a shipped projection: its SHIPPED.json (`operating_points`, `score_max`; older files:
  `default_thresholds`, the balanced point alone);
- raw embeddings of a shipped encoder: `calibration.json` beside this module, by encoder name;
- an `xmine export-st` folder of a shipped projection, used as the encoder: that projection's.
A space without a calibration (a user's projection, an encoder xmine does not ship) has none
here: its threshold is estimated from the run (`xmine.mining.threshold_rule`), without a score cap,
said in the summary line and OUT.json.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

from xmine.artefacts.records import EncoderId
from xmine.calibration import SpaceDefaults, parse_defaults
from xmine.encoders.exported import shipped_projection_of
from xmine.encoders.projection import projection_defaults
from xmine.errors import InputError

#: "balanced": the F1 default (mean precision >= 0.85 on the calibration sets); "precision": mean
#: precision >= 0.95 on them, fewer pairs (for MT training data).
OPERATING_POINTS = ("balanced", "precision")
DEFAULT_OPERATING_POINT = "balanced"
#: the raw encoders' calibration (package data)
CALIBRATION = Path(__file__).with_name("calibration.json")
#: the margin's neighbours (k) every shipped value was measured with, `xmine mine`'s default -k: the
#: shipped records do not repeat it; the results they were installed from record it
#: (benchmarks/results/calibration-defaults.json, threshold-rules.json, threshold-margins.json: k 4)
SHIPPED_K = 4


@functools.lru_cache(maxsize=1)
def _encoder_records() -> dict:
    try:
        data = json.loads(CALIBRATION.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise InputError(CALIBRATION, f"unreadable: {e}") from None
    encoders = data.get("encoders") if isinstance(data, dict) else None
    if not isinstance(encoders, dict):
        raise InputError(CALIBRATION, "expected an object with 'encoders'")
    return encoders


def encoder_defaults(encoder_name: str | None) -> SpaceDefaults | None:
    """Raw embeddings of `encoder_name`: its calibrated values, or None (an encoder not calibrated)."""
    record = _encoder_records().get(encoder_name) if encoder_name else None
    if record is None:
        return None
    return parse_defaults(record, CALIBRATION, f"encoders.{encoder_name}.",
                          f"calibrated for raw {encoder_name} embeddings (xmine/mining/{CALIBRATION.name})")


def space_defaults(projection_dir, encoder_name: str | None, *,
                   encoder_id: EncoderId | None = None) -> tuple[SpaceDefaults | None, str]:
    """The calibrated values of the space mined in (`projection_dir`'s meaning space, else raw
    `encoder_name`: an `xmine export-st` folder of a shipped projection is that projection's
    space), and what that space is, in words. `encoder_id`: the run's encoder, whose prompt an
    export's space is that projection's with (`_export_values`)."""
    if projection_dir is not None:
        found, what = projection_defaults(projection_dir), f"projection {projection_dir}"
    elif (shipped := shipped_projection_of(encoder_name)) is not None:
        found, what = projection_defaults(shipped), f"{encoder_name} (an xmine export-st of the projection {shipped})"
        if found is not None:
            found = _export_values(found, encoder_id)
    else:
        found, what = encoder_defaults(encoder_name), f"raw {encoder_name or 'unknown-encoder'} embeddings"
    if found is not None and found.k is None:
        found = dataclasses.replace(found, k=SHIPPED_K)
    return found, what


def _export_values(found: SpaceDefaults, encoder_id: EncoderId | None) -> SpaceDefaults:
    """A shipped projection's values for its export run as an encoder: measured with the weights the
    export holds under another id (its own folder's), so the other-encoder note is left to a run
    with another prompt, which is another space."""
    if found.encoder_weights is None or encoder_id is None:
        return found
    if EncoderId.parse(found.encoder_weights).prompt == encoder_id.prompt:
        return dataclasses.replace(found, encoder_weights=None)
    return found


__all__ = ["DEFAULT_OPERATING_POINT", "OPERATING_POINTS", "SHIPPED_K", "SpaceDefaults", "encoder_defaults",
           "projection_defaults", "space_defaults"]
