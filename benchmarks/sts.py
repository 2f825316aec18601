"""SemEval-2017 Task 1 STS (Cer et al. 2017): Pearson and Spearman (x100) of cosine vs gold.

Files: `sts2017/STS2017.eval.v1.1/STS.input.track<N>.<l1>-<l2>.txt` (sent1<TAB>sent2) and
`sts2017/STS2017.gs/STS.gs.track<N>.<l1>-<l2>.txt` (one gold score 0-5 a line).

Caveats of the distributed files, handled here:
- Column order is not the one the file name suggests. Checked line by line (script and function
  words): track2 ar-en has English in column 1 on all 250 lines; track4a es-en Spanish first;
  track4b es-en English first; track6 tr-en English first. `TRACKS` records the language of each
  column. (Cosine is symmetric, so the score does not depend on it; reports and per-language
  views do.)
- Track 6's input has 500 lines but its gold 250. The gold scores belong to the FIRST 250 input
  lines: with the real Universal Sentence Encoder multilingual v3, Pearson r between cosine and
  gold is 0.73 for input lines 1-250, against 0.13 for lines 251-500 and 0.01/0.03 for the
  odd/even lines. Lines 251-500 are unscored (as distributed) and are ignored.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

from xmine.benchmarks.common import EmbedFn, correlations, data_locator, mean_of, paired_cosine, read_lines
from xmine.errors import ConfigError, InputError

NEEDS = "sts2017"
HOW_TO_GET = (
    "Get the SemEval-2017 Task 1 test input (STS2017.eval.v1.1) and gold (STS2017.gs), e.g. from "
    "https://github.com/eduardofv/sts_eval (data/sources/Sts2017.*.zip), into sts2017/."
)
locate = data_locator(NEEDS, HOW_TO_GET)


@dataclasses.dataclass(frozen=True)
class Track:
    """One STS 2017 track as distributed."""

    #: e.g. "track4a"
    name: str
    #: the language pair in the file name, e.g. "es-en"
    label: str
    #: language of column 1 and column 2 of the input file
    columns: tuple[str, str]
    #: the gold scores belong to the first `gold_rows` input lines (None: all)
    gold_rows: int | None = None

    @property
    def crosslingual(self) -> bool:
        return self.columns[0] != self.columns[1]


TRACKS = {
    t.name: t
    for t in (
        Track("track1", "ar-ar", ("ar", "ar")),
        Track("track2", "ar-en", ("en", "ar")),
        Track("track3", "es-es", ("es", "es")),
        Track("track4a", "es-en", ("es", "en")),
        Track("track4b", "es-en", ("en", "es")),
        Track("track5", "en-en", ("en", "en")),
        Track("track6", "tr-en", ("en", "tr"), gold_rows=250),
    )
}


@dataclasses.dataclass(frozen=True)
class STSSet:
    """The scored pairs of one track."""

    track: Track
    #: column-1 sentences (language track.columns[0])
    sent1: list[str]
    #: column-2 sentences (language track.columns[1])
    sent2: list[str]
    #: gold similarity 0-5
    gold: list[float]
    input_path: Path
    gold_path: Path


def load_track(folder: str | Path, track: str) -> STSSet:
    """Read one track's input and gold, aligned as documented in the module docstring."""
    if track not in TRACKS:
        raise ConfigError(f"unknown STS 2017 track {track!r}; choose from {', '.join(TRACKS)}")
    t = TRACKS[track]
    folder = Path(folder)
    input_path = folder / "STS2017.eval.v1.1" / f"STS.input.{t.name}.{t.label}.txt"
    gold_path = folder / "STS2017.gs" / f"STS.gs.{t.name}.{t.label}.txt"
    rows = read_lines(input_path, what="STS 2017")
    gold_lines = read_lines(gold_path, what="STS 2017")
    expected = t.gold_rows if t.gold_rows is not None else len(rows)
    if t.gold_rows is not None and len(rows) < expected:  # (was: the gold file blamed for a short input)
        raise InputError(input_path, f"{len(rows)} input lines; {t.name}'s gold scores its first {expected}")
    if len(gold_lines) != expected:
        raise InputError(gold_path, f"{len(gold_lines)} gold scores for {len(rows)} input lines in {input_path.name} "
                                    f"(expected {expected} scored lines): one of the two is cut short, or not the "
                                    "other's")
    sent1, sent2, gold = [], [], []
    for i in range(expected):
        fields = rows[i].split("\t")
        if len(fields) != 2:
            raise InputError(input_path, f"{len(fields)} tab-separated fields, expected 2 (sent1, sent2)", line=i + 1)
        try:
            score = float(gold_lines[i])
        except ValueError:
            raise InputError(gold_path, f"gold score {gold_lines[i]!r} is not a number", line=i + 1) from None
        if not 0 <= score <= 5:  # NaN included (was: every correlation n/a, or 7.5 and -3 correlated as given)
            raise InputError(gold_path, f"gold score {gold_lines[i]!r} is not a number from 0 to 5", line=i + 1)
        for field in fields:  # (was: an empty sentence scored; Tatoeba refuses one)
            if not field.strip():
                raise InputError(input_path, "empty sentence", line=i + 1)
        sent1.append(fields[0])
        sent2.append(fields[1])
        gold.append(score)
    return STSSet(t, sent1, sent2, gold, input_path, gold_path)


def evaluate_sts(embed_fn: EmbedFn, data_dir: str | Path | None = None,
                 tracks: Sequence[str] | None = None) -> dict[str, Any]:
    """Pearson/Spearman (x100) per track, plus cross-lingual, monolingual and overall averages."""
    folder = locate(data_dir)
    tracks = list(tracks) if tracks else list(TRACKS)
    per_track: dict[str, dict[str, Any]] = {}
    files = []
    for name in tracks:
        s = load_track(folder, name)
        files += [str(s.input_path), str(s.gold_path)]
        cos = paired_cosine(embed_fn(s.sent1), embed_fn(s.sent2))
        per_track[name] = correlations(cos, s.gold) | {"pair": s.track.label, "rows": len(s.gold)}

    def average(names: list[str]) -> dict[str, float]:
        return {m: mean_of(per_track[n][m] for n in names) for m in ("pearson", "spearman")} | {"tracks": len(names)}

    return {
        "per_track": per_track,
        "crosslingual": average([n for n in tracks if TRACKS[n].crosslingual]),
        "monolingual": average([n for n in tracks if not TRACKS[n].crosslingual]),
        "average": average(tracks),
        "files": files,
    }
