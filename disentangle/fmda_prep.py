"""FMDA training data from MASSIVE: the rows, their token states, targets and negative pools.

`prepare(...)` returns a `FmdaData` for the language pairs (en-US, X): for each locale the token
store of its sampled train rows, sampled dev rows and negative-pool members, and for each locale
whose rows carry `annot_utt` the pooled vectors of the template- and residual-masked
re-encodings (FMDA Fig. 3). Everything heavy is cached on disk (`xmine.encoders.tokens`), the
negative pools too (`$XMINE_HOME/fmda-pools/`), so a second run encodes and scores nothing again.

Rows: the same MASSIVE ids for every language pair (a seeded sample of the train split, and of
the dev split for early stopping); no test row is read. MASSIVE's locales are row-aligned by id,
which `prepare` checks.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.artefacts.directory import atomic_dir
from xmine.disentangle.fmda_data import negative_pool, read_massive, template_and_residual_masks
from xmine.encoders.tokens import build_token_store, share_sentence_vectors
from xmine.errors import ConfigError, InputError
from xmine.artefacts.fileio import atomic_write_json, write_manifest
from xmine.langs import normalize_lang
from xmine.artefacts.outputs import claim_output
from xmine.paths import xmine_home

PIVOT = "en-US"


@dataclass(kw_only=True)
class PreparedLocale:
    """One locale's FMDA training inputs (its MASSIVE rows are `massive.LocaleData`): the token
    store of its utterances, the masked re-encodings' targets and its negative pool."""

    locale: str
    #: utterances in store order: train sample, dev sample, pool members (may repeat a train row)
    utts: list[str]
    store: Any  # TokenStore
    #: pooled vectors of the masked re-encodings, (n, D) float32, or None without annotation
    template_target: np.ndarray | None
    residual_target: np.ndarray | None
    #: per store row: has annotation (so both masked targets exist)
    annotated: np.ndarray
    #: store rows of the negative pool
    pool_rows: np.ndarray
    pool_stats: dict


@dataclass(kw_only=True)
class FmdaData:
    folder: Path
    locales: list[str]
    data: dict[str, PreparedLocale]
    #: store rows of the train / dev samples (the same positions in every locale's store)
    train_rows: np.ndarray
    dev_rows: np.ndarray
    ids_train: list[str]
    ids_dev: list[str]
    summary: dict[str, Any] = field(default_factory=dict)


def pool_indices(utts: Sequence[str], locale: str, *, show_progress: bool) -> tuple[np.ndarray, dict]:
    """Negative pool of `utts` (indices), cached on disk."""
    h = hashlib.sha256(("\x00".join(utts) + "|" + locale + "|v1").encode("utf-8")).hexdigest()[:24]
    path = xmine_home() / "fmda-pools" / f"{locale}-{h}.json"
    if path.is_file():
        blob = json.loads(path.read_text(encoding="utf-8"))
        return np.asarray(blob["pool"], dtype=np.int64), blob["stats"]
    stats: dict = {}
    pool = negative_pool(utts, locale, show_progress=show_progress, stats=stats)
    atomic_write_json(path, {"pool": pool.tolist(), "stats": stats})
    return pool, stats


def _aligned_rows(folder: Path, partners: Sequence[str]) -> tuple[list[str], dict[str, list]]:
    """(en-US and the partner locales, their rows), checked to be aligned with en-US by id and partition."""
    locales = [PIVOT] + [p for p in partners if p != PIVOT]
    rows = {loc: read_massive(folder, loc) for loc in locales}
    for loc in locales[1:]:
        if [(r.id, r.partition) for r in rows[loc]] != [(r.id, r.partition) for r in rows[PIVOT]]:
            raise InputError(folder / f"{loc}.jsonl", f"rows are not aligned with {PIVOT}.jsonl by id and partition")
    return locales, rows


def sample_positions(rows, *, max_train: int | None, max_dev: int | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """File positions of the seeded train and dev samples (the same for every locale: rows align)."""
    train_pos = np.asarray([i for i, r in enumerate(rows) if r.partition == "train"])
    dev_pos = np.asarray([i for i, r in enumerate(rows) if r.partition == "dev"])
    rng = np.random.default_rng(seed)
    return train_pos[rng.permutation(len(train_pos))][:max_train], dev_pos[rng.permutation(len(dev_pos))][:max_dev]


def write_sample_pairs(folder: str | Path, partners: Sequence[str], out_dir: str | Path, *, max_train: int | None,
                       max_dev: int | None, seed: int) -> dict[str, int]:
    """Line-aligned text files of the rows FMDA trains on, for the baselines (`xmine train --pairs`).

    `out_dir/fmda-sample.<lang>` for en-US and each partner (ISO 639-3 suffix: eng, deu, ...):
    the same train sample then the same dev sample as `prepare`, so DREAM sees the rows FMDA sees
    (it holds out its own validation share; pass --valid-fraction max_dev / (max_train + max_dev)).
    No test row is written. `out_dir` is claimed like every output (new or empty).
    """
    folder = Path(folder)
    locales, rows = _aligned_rows(folder, partners)
    train_pos, dev_pos = sample_positions(rows[PIVOT], max_train=max_train, max_dev=max_dev, seed=seed)
    positions = np.concatenate([train_pos, dev_pos])
    counts = {}
    with claim_output(out_dir, kind="fmda-sample-pairs", form="dir", inputs=[folder / f"{l}.jsonl" for l in locales]):
        with atomic_dir(out_dir) as tmp:
            for loc in locales:
                lines = [rows[loc][i].utt.replace("\n", " ") for i in positions]
                assert all(rows[loc][i].partition != "test" for i in positions)
                (tmp / f"fmda-sample.{normalize_lang(loc.split('-')[0])}").write_text(
                    "".join(l + "\n" for l in lines), encoding="utf-8")
                counts[loc] = len(lines)
            write_manifest(tmp, "fmda-sample-pairs", {"locales": locales, "train": len(train_pos), "dev": len(dev_pos),
                                                      "seed": seed, "folder": str(folder)})
    return counts


def prepare(encoder, folder: str | Path, partners: Sequence[str], *, max_train: int | None, max_dev: int | None,
            seed: int, show_progress: bool = True, log=lambda m: None) -> FmdaData:
    """Read, sample, build pools, encode (cached). `partners`: the non-English locales (de-DE ...)."""
    folder = Path(folder)
    if not [p for p in partners if p != PIVOT]:
        raise ConfigError("FMDA trains on language pairs with en-US: give at least one other locale (e.g. de-DE)")
    locales, rows = _aligned_rows(folder, partners)
    base = rows[PIVOT]
    train_pos, dev_pos = sample_positions(base, max_train=max_train, max_dev=max_dev, seed=seed)
    n_tr, n_dev = len(train_pos), len(dev_pos)
    out: dict[str, PreparedLocale] = {}
    summary: dict[str, Any] = {"train_rows": n_tr, "dev_rows": n_dev, "seed": seed, "locales": {}}
    for loc in locales:
        r = rows[loc]
        all_train = [x.utt for x in r if x.partition == "train"]
        log(f"{loc}: negative pool over {len(all_train)} train utterances (BLEU < 0.1 to all others)")
        pool_idx, pool_stats = pool_indices(all_train, loc, show_progress=show_progress)
        train_global = np.asarray([i for i, x in enumerate(r) if x.partition == "train"])
        pool_pos = train_global[pool_idx]
        positions = np.concatenate([train_pos, dev_pos, pool_pos]).astype(np.int64)
        utts = [r[i].utt for i in positions]
        store = build_token_store(encoder, utts, show_progress=show_progress, desc=f"token states {loc}")
        share_sentence_vectors(encoder, utts, store)  # the pooled baselines (DREAM) read these
        annotated = np.asarray([r[i].annot_utt is not None for i in positions])
        tp_t = rs_t = None
        if annotated.any():
            ann_rows = np.flatnonzero(annotated)
            masks = [template_and_residual_masks(r[positions[k]].annot_utt, r[positions[k]].utt,
                                                 where=f"{folder / (loc + '.jsonl')}:{r[positions[k]].line}: ")
                     for k in ann_rows]
            ann_utts = [utts[k] for k in ann_rows]
            tp_t, rs_t = np.zeros((2, len(utts), encoder.dim), np.float32)
            for k, (target, what) in enumerate(((tp_t, "template"), (rs_t, "residual"))):
                target[ann_rows] = build_token_store(encoder, ann_utts, mask_spans=[m[k] for m in masks],
                                                     keep_tokens=False, show_progress=show_progress,
                                                     desc=f"{what} targets {loc}").pooled
        out[loc] = PreparedLocale(locale=loc, utts=utts, store=store, template_target=tp_t, residual_target=rs_t,
                              annotated=annotated, pool_rows=np.arange(n_tr + n_dev, len(utts)), pool_stats=pool_stats)
        summary["locales"][loc] = {"file": str(folder / f"{loc}.jsonl"), "pool": pool_stats,
                                   "annotated_train": int(annotated[:n_tr].sum()),
                                   "annotated_dev": int(annotated[n_tr:n_tr + n_dev].sum())}
    return FmdaData(folder=folder, locales=locales, data=out, train_rows=np.arange(n_tr),
                    dev_rows=np.arange(n_tr, n_tr + n_dev), ids_train=[base[i].id for i in train_pos],
                    ids_dev=[base[i].id for i in dev_pos], summary=summary)
