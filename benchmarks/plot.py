"""A picture of disentanglement: 2-D PCA of raw, meaning and language embeddings of one pair.

One panel per variant (raw, then meaning and language of a projection), each with its own PCA
fitted on both languages together, points coloured by language, thin grey lines joining a few
translation pairs. What to expect (the papers' first figures): raw embeddings form one cluster
per language; meaning embeddings of the two languages overlap; language embeddings separate
the languages again.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.artefacts.directory import provenance
from xmine.benchmarks.common import Variant, data_fingerprints, machine
from xmine.benchmarks.geometry import flores_codes
from xmine.artefacts.fileio import atomic_path
from xmine.artefacts.output_state import png_metadata
from xmine.errors import ConfigError

#: The kind recorded in the PNG (a text chunk), which marks it as an xmine plot it may replace.
PLOT_KIND = "pca-plot"
#: The PNG text chunk that records what made the plot (JSON: encoder, projections, data, machine,
#: provenance, and each panel's language separation), as a benchmark result records it.
RECORD_KEY = "xmine-record"
LANG_COLOURS = ("#1f77b4", "#d62728")
LINKED_PAIRS = 12


def plotted_languages(data_dir, src_lang: str, tgt_lang: str, out: str | None) -> tuple[str, str]:
    """The FLORES-200 codes of `xmine plot`'s two languages (ISO codes too, as `bench geometry`
    takes them), checked with its --out before anything is claimed or encoded."""
    [src], [tgt] = (flores_codes(data_dir, [code], option=o) for code, o in ((src_lang, "--src-lang"),
                                                                           (tgt_lang, "--tgt-lang")))
    if src == tgt:  # one cloud drawn twice: no separation to see
        raise ConfigError(f"--src-lang and --tgt-lang are both {src}: the plot compares two languages")
    if out is not None and Path(out).suffix.lower() != ".png":  # (was: a PNG written to p.txt without a word)
        raise ConfigError(f"--out {out}: the plot is a PNG image; give a file name ending in .png")
    return src, tgt


def plot_record(encoder, variants: Sequence[Variant], files: Sequence[Path], **parameters: Any) -> dict[str, Any]:
    """What made a plot, as a benchmark result records it: the encoder, each projection, the data
    files (size, sha256), the machine and the provenance with `parameters`."""
    return {"encoder": encoder.fingerprint(),
            "projections": [v.projection for v in variants if v.projection is not None and v.part == "meaning"],
            "data": data_fingerprints(files), "machine": machine(),
            "provenance": provenance(task="plot", encoder=encoder.name, **parameters)}


def pca_2d(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Project rows of x on their first two principal components; also the explained variance ratio."""
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    var = s**2 / max((s**2).sum(), 1e-12)
    return centred @ vt[:2].T, var[:2]


def language_separation(points: np.ndarray, n_first: int) -> float:
    """Distance between the two languages' centroids over the mean spread (how far apart they sit)."""
    a, b = points[:n_first], points[n_first:]
    spread = (np.linalg.norm(a - a.mean(0), axis=1).mean() + np.linalg.norm(b - b.mean(0), axis=1).mean()) / 2
    return float(np.linalg.norm(a.mean(0) - b.mean(0)) / max(spread, 1e-12))


def plot_pca(variants: Sequence[Variant], src_sentences: Sequence[str], tgt_sentences: Sequence[str], out: str | Path,
             *, src_label: str, tgt_label: str, title: str, record: dict[str, Any]) -> dict[str, float]:
    """Write the PNG to `out` (atomically), `record` (what made it) with each panel's language
    separation in its `RECORD_KEY` text chunk; returns the separations."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(src_sentences)
    fig, axes = plt.subplots(1, len(variants), figsize=(5.2 * len(variants), 5.0), squeeze=False)
    separation = {}
    for ax, v in zip(axes[0], variants):
        emb = np.concatenate([v.embed(list(src_sentences)), v.embed(list(tgt_sentences))])
        pts, var = pca_2d(emb)
        for i in range(min(LINKED_PAIRS, n)):
            ax.plot([pts[i, 0], pts[n + i, 0]], [pts[i, 1], pts[n + i, 1]], color="0.7", lw=0.6, zorder=1,
                    label=f"{min(LINKED_PAIRS, n)} translation pairs" if i == 0 else None)
        ax.scatter(pts[:n, 0], pts[:n, 1], s=12, alpha=0.75, c=LANG_COLOURS[0], label=src_label, zorder=2)
        ax.scatter(pts[n:, 0], pts[n:, 1], s=12, alpha=0.75, c=LANG_COLOURS[1], label=tgt_label, marker="^", zorder=2)
        sep = language_separation(pts, n)
        separation[v.name] = sep
        part = {"raw": "raw encoder output", "meaning": "meaning part", "language": "language part"}[v.part]
        ax.set_title(f"{v.name}\n({part}; language separation {sep:.2f})", fontsize=10)
        ax.set_xlabel(f"PC1 ({100 * var[0]:.1f}% of variance)")
        ax.set_ylabel(f"PC2 ({100 * var[1]:.1f}% of variance)")
        ax.grid(alpha=0.25)
        ax.legend(loc="best", fontsize=9, title="language", title_fontsize=9)
    # wrapped to the figure's width: one panel is narrower than the title (was: cut at both ends)
    fig.suptitle(textwrap.fill(title, width=int(60 * len(variants))), fontsize=11)
    fig.tight_layout()
    out = Path(out)
    metadata = {**png_metadata(PLOT_KIND), RECORD_KEY: json.dumps({**record, "separation": separation})}
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=110, format="png", metadata=metadata)
    plt.close(fig)
    return separation
