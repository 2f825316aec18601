"""WMT20 sentence-level quality estimation (Task 1), unsupervised, as DREAM / MEAT / SEED report.

The score of a translation is cos(embedding of the source, embedding of the translation); the
metric is Pearson r (x100) with the human `z_mean` on test20 (1000 rows per pair), per pair and
averaged; Spearman is given beside it. Files: `mlqe/<pair>/test20.<srctgt>.df.short.tsv`, tab
separated with a header (index, original, translation, scores, mean, z_scores, z_mean,
model_scores), read without quoting (csv.QUOTE_NONE): sentences contain quote characters.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Sequence

from xmine.benchmarks.common import EmbedFn, correlations, data_locator, mean_of, paired_cosine
from xmine.errors import ConfigError, InputError
from xmine.io.corpus import iter_lines

NEEDS = "mlqe"
HOW_TO_GET = (
    "Get the WMT20 QE Task 1 data from https://github.com/facebookresearch/mlqe (data/*.tar.gz, "
    "unpacked as mlqe/<pair>/test20.<srctgt>.df.short.tsv)."
)
locate = data_locator(NEEDS, HOW_TO_GET)
PAIRS = ("en-de", "en-zh", "et-en", "ne-en", "ro-en", "si-en")
REQUIRED_COLUMNS = ("original", "translation", "z_mean")
QUICK_ROWS = 200


@dataclasses.dataclass(frozen=True)
class QESet:
    """One language pair's QE rows."""

    #: e.g. "en-de"
    pair: str
    #: source sentences
    sources: list[str]
    #: machine translations, aligned with `sources`
    translations: list[str]
    #: human direct-assessment z-score means, aligned with `sources`
    z_mean: list[float]
    #: the file read
    path: Path


def qe_file(folder: Path, pair: str, split: str = "test20") -> Path:
    return folder / pair / f"{split}.{pair.replace('-', '')}.df.short.tsv"


def load_qe(path: str | Path, pair: str, *, max_rows: int | None = None) -> QESet:
    """Read one `*.df.short.tsv` file; errors name the file, line and problem."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, f"missing WMT20 QE file for {pair}")
    sources, translations, z = [], [], []
    # (xmine.io.corpus: invalid UTF-8 is one error naming the line; was a UnicodeDecodeError traceback)
    lines = iter_lines(path, keep_tabs=True)
    first = next(lines, None)
    if first is None or not first[1].strip():
        raise InputError(path, "empty file (expected a header line)", line=1)
    header = first[1].split("\t")
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InputError(path, f"header lacks column(s) {', '.join(missing)} (has: {', '.join(header)})", line=1)
    col = {c: header.index(c) for c in REQUIRED_COLUMNS}
    for line_no, text in lines:
        row = text.split("\t")
        if len(row) != len(header):
            raise InputError(path, f"{len(row)} tab-separated fields, expected {len(header)}", line=line_no)
        try:
            score = float(row[col["z_mean"]])
        except ValueError:
            raise InputError(path, f"z_mean {row[col['z_mean']]!r} is not a number", line=line_no) from None
        if not math.isfinite(score):  # (was: every correlation n/a, or a Spearman of an infinity)
            raise InputError(path, f"z_mean {row[col['z_mean']]!r} is not a finite number", line=line_no)
        for name in ("original", "translation"):  # (was: an empty sentence scored; Tatoeba refuses one)
            if not row[col[name]].strip():
                raise InputError(path, f"empty {name} sentence", line=line_no)
        z.append(score)
        sources.append(row[col["original"]])
        translations.append(row[col["translation"]])
        if max_rows is not None and len(z) >= max_rows:
            break
    if not z:
        raise InputError(path, "no data rows")
    return QESet(pair, sources, translations, z, path)


def evaluate_qe(embed_fn: EmbedFn, data_dir: str | Path | None = None, pairs: Sequence[str] | None = None, *,
                split: str = "test20", max_rows: int | None = None) -> dict[str, Any]:
    """Pearson/Spearman (x100) of cos(source, translation) with z_mean, per pair and averaged.

    Returns {"per_pair": {pair: {"pearson", "spearman", "rows"}}, "average": {...}, "files"}.
    """
    folder = locate(data_dir)
    pairs = list(pairs) if pairs else list(PAIRS)
    per_pair: dict[str, dict[str, float]] = {}
    files = []
    for pair in pairs:
        if pair not in PAIRS and not qe_file(folder, pair, split).is_file():
            reverse = "-".join(reversed(pair.split("-")))
            hint = f" ({reverse}: a pair names the source language first)" if reverse in PAIRS else ""
            raise ConfigError(f"unknown QE pair {pair!r}; WMT20 has {', '.join(PAIRS)}{hint}")
        qe = load_qe(qe_file(folder, pair, split), pair, max_rows=max_rows)
        files.append(str(qe.path))
        cos = paired_cosine(embed_fn(qe.sources), embed_fn(qe.translations))
        per_pair[pair] = correlations(cos, qe.z_mean) | {"rows": len(qe.z_mean)}
    return {
        "per_pair": per_pair,
        "average": {m: mean_of(r[m] for r in per_pair.values()) for m in ("pearson", "spearman")},
        "files": files,
    }
