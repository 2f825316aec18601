"""FMDA's training data from MASSIVE: the rows, their slot masks, BLEU negative pools, and the
prepared token states and targets.

- `read_massive(folder, locale)`: every row of `<locale>.jsonl`, through `xmine.disentangle.massive` (the
  one reader; errors name the file and line).
- `template_and_residual_masks(annotation)`: the character spans masked for each target, from the
  slot spans of `xmine.disentangle.massive.parse_annotation` (which checks them against `utt`).
- Reconstruction targets (FMDA Sec. 3.3, Fig. 3): the utterance re-encoded with its slot tokens
  masked is the TEMPLATE target; with its template (non-slot) tokens masked, the RESIDUAL target.
  An utterance without slots has the whole utterance as template target and an all-masked
  residual target: the construction taken literally.
- `negative_pool(utterances, lang)`: FMDA Sec. 4.2: the utterances whose BLEU to every other
  training utterance of the language is < 0.1 (see `negative_pool` for how that stays cheap).
- `prepare(...)` returns a `FmdaData` for the language pairs (en-US, X): for each locale the token
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
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from xmine.artefacts.directory import atomic_dir
from xmine.artefacts.fileio import atomic_write_json, sha256_file, write_manifest
from xmine.artefacts.outputs import claim_output
from xmine.disentangle.massive import PIVOT, Annotation, read_locale
from xmine.encoders.tokens import build_token_store, share_sentence_vectors
from xmine.errors import ConfigError, InputError
from xmine.langs import normalize_lang
from xmine.paths import xmine_home

log = logging.getLogger("xmine.disentangle")


def read_massive(folder: str | Path, locale: str):
    """All rows (`xmine.disentangle.massive.Record`: id, partition, utt, annot_utt, line) of one locale, in file
    order, read and checked by the one MASSIVE reader (`xmine.disentangle.massive`)."""
    return list(read_locale(folder, locale).records)


def template_and_residual_masks(ann: Annotation) -> tuple[list, list]:
    """(spans masked for the template target, spans masked for the residual target) of the
    utterance `ann.utt`, FMDA Fig. 3.

    Template target: the slot values masked. Residual target: every non-slot stretch masked.
    """
    utt, slots = ann.utt, [(s.start, s.end) for s in ann.slots]
    template, prev = [], 0
    for s, e in slots + [(len(utt), len(utt))]:
        a, b = prev, s
        while a < b and utt[a].isspace():  # spans hold no surrounding space: a SentencePiece token
            a += 1                          # "▁five" starts at the space before "five"
        while b > a and utt[b - 1].isspace():
            b -= 1
        if b > a:
            template.append((a, b))
        prev = e
    return slots, template


# --- BLEU negative pools (FMDA Sec. 4.2) ---------------------------------------------------------

THRESHOLD = 0.1


def bleu_tokenizer_for(lang: str) -> str:
    """sacrebleu tokenizer per language. Choice: '13a' (sacrebleu's default) for space-separated
    scripts; 'char' for Japanese/Chinese/Thai/Khmer/Burmese, where '13a' sees one token per
    utterance (a ja-mecab tokenizer would need MeCab and a dictionary)."""
    return "char" if lang.split("-")[0].lower() in {"ja", "zh", "th", "km", "my", "lo"} else "13a"


def _ngram_matrix(token_lists: list[list[str]], n: int):
    """(counts, binary) sparse matrices sentence x n-gram."""
    from scipy import sparse

    vocab: dict[tuple, int] = {}
    rows, cols, vals = [], [], []
    for i, toks in enumerate(token_lists):
        counts: dict[int, int] = {}
        for k in range(len(toks) - n + 1):
            j = vocab.setdefault(tuple(toks[k:k + n]), len(vocab))
            counts[j] = counts.get(j, 0) + 1
        rows += [i] * len(counts)
        cols += list(counts)
        vals += list(counts.values())
    shape = (len(token_lists), max(1, len(vocab)))
    c = sparse.csr_matrix((np.asarray(vals, np.float32), (rows, cols)), shape=shape)
    b = c.copy()
    b.data[:] = 1.0
    return c, b


def _bleu_upper_bound(u1: np.ndarray, u2: np.ndarray, h: np.ndarray, r: np.ndarray) -> np.ndarray:
    """An upper bound of sacrebleu's sentence BLEU (exp smoothing, effective order) in [0, 1].

    u1 >= matched unigrams, u2 >= matched bigrams (>= matched 3- and 4-grams: a clipped n-gram
    match implies a clipped match of its prefix), h = hypothesis length, r = reference length
    (arrays of one shape, integers). sacrebleu's BLEU is non-decreasing in every matched count (a
    zero-match order's smoothed precision 1/(2^k t_n) is below any non-zero one, 1/t_n, and fewer
    zero orders mean smaller k), so BLEU evaluated at these counts bounds it:

        BP * exp((log p_1 + sum_{n=2..E} log p_n) / E),  E = min(h, 4),  t_n = h - n + 1,
        p_1 = min(u1, h) / h,  p_n = min(u2, t_n) / t_n if u2 >= 1 else 1 / (2^(n-1) t_n)

    (with u2 = 0 every order n >= 2 has no match, so the k-th zero order is n - 1), and 0 when
    u1 = 0 (sacrebleu returns 0 when nothing matches). Logs of integers come from a table, so
    millions of pairs cost well under a second.
    """
    u1, u2, h, r = (np.asarray(x, dtype=np.int64) for x in (u1, u2, h, r))
    top = int(max(h.max(initial=1), u1.max(initial=1), u2.max(initial=1))) + 2
    log = np.log(np.maximum(np.arange(top, dtype=np.float64), 1.0))  # log[0] unused (guarded)
    hh = np.maximum(h, 1)
    total = log[np.minimum(u1, hh)] - log[hh]
    for n in (2, 3, 4):
        t = np.maximum(h - n + 1, 1)
        active = h - n + 1 > 0
        matched = log[np.minimum(np.maximum(u2, 1), t)] - log[t]
        smoothed = -(n - 1) * math.log(2.0) - log[t]
        total = total + np.where(active, np.where(u2 >= 1, matched, smoothed), 0.0)
    order = np.minimum(hh, 4)
    log_bp = np.where(h < r, 1.0 - r / hh, 0.0)
    bound = np.exp(log_bp + total / order)
    return np.where((u1 >= 1) & (h >= 1), bound, 0.0)


def negative_pool(utterances: Sequence[str], lang: str, *, block: int = 512, show_progress: bool = False,
                  stats: dict | None = None) -> np.ndarray:
    """Indices of the utterances whose BLEU to every other utterance is < 0.1 (FMDA Sec. 4.2).

    Choices: BLEU is sacrebleu's `sentence_bleu` (its defaults: exp smoothing, effective order)
    on a 0-1 scale, in both directions (each utterance as hypothesis and as reference: "dissimilar
    from all other utterances"); tokenizer per `bleu_tokenizer_for`.

    Cost: all pairs of 11.5k utterances is 66M sacrebleu calls (~30 min per language). Instead a
    sparse n-gram index gives, for every pair at once (blocked matrix products), upper bounds of
    the matched unigram and bigram counts, and `_bleu_upper_bound` turns them into an upper bound
    of BLEU. Only pairs whose bound reaches 0.1 are scored by sacrebleu, most likely first, and an
    utterance leaves the pool at its first confirmed pair. Every pair that could reach 0.1 is
    scored, so the pool is the one exhaustive scoring would give (tests check this on a sample).
    """
    import sacrebleu
    from sacrebleu.metrics import BLEU
    from tqdm.auto import tqdm

    tok_name = bleu_tokenizer_for(lang)
    tokenizer = BLEU(tokenize=tok_name, effective_order=True, smooth_method="exp").tokenizer
    toks = [tokenizer(u.rstrip()).split() for u in utterances]
    n = len(toks)
    lengths = np.asarray([len(t) for t in toks], dtype=np.int64)
    c1, b1 = _ngram_matrix(toks, 1)
    c2, b2 = _ngram_matrix(toks, 2)
    # The bound factorises: BP(h, r) * B(min(u1, h), min(u2, h), h) with B = the bound at r = 0 (no
    # brevity penalty). Both factors are tables over small integers, so a block of pairs costs
    # two gathers instead of a dozen array operations.
    top = int(lengths.max(initial=1))
    g1, g2, gh = np.meshgrid(np.arange(top + 1), np.arange(top + 1), np.arange(top + 1), indexing="ij")
    b_table = _bleu_upper_bound(g1, g2, gh, np.zeros_like(gh)).astype(np.float32)
    hh, rr = np.meshgrid(np.arange(top + 1), np.arange(top + 1), indexing="ij")
    bp_table = np.where(hh < rr, np.exp(1.0 - rr / np.maximum(hh, 1)), 1.0).astype(np.float32)
    del g1, g2, gh, hh, rr

    def bound_of(u1, u2, h, r):
        return b_table[np.minimum(u1, h), np.minimum(u2, h), h] * bp_table[h, r]

    out = np.zeros(n, dtype=bool)  # True: has a partner with BLEU >= 0.1
    scored = candidates_total = 0
    cache: dict[tuple[int, int], float] = {}

    def score(i: int, j: int) -> float:
        nonlocal scored
        if (i, j) not in cache:
            scored += 1
            cache[i, j] = sacrebleu.sentence_bleu(utterances[i], [utterances[j]], tokenize=tok_name).score / 100.0
        return cache[i, j]

    for start in tqdm(range(0, n, block), desc=f"BLEU negative pool ({lang})", disable=not show_progress):
        rows = slice(start, min(n, start + block))
        # as hypothesis (row) against every reference (column), and the reverse
        u1_h = (c1[rows] @ b1.T).toarray().astype(np.int64)
        u2_h = (c2[rows] @ b2.T).toarray().astype(np.int64)
        u1_r = (b1[rows] @ c1.T).toarray().astype(np.int64)
        u2_r = (b2[rows] @ c2.T).toarray().astype(np.int64)
        h = np.broadcast_to(lengths[rows][:, None], u1_h.shape)
        r = np.broadcast_to(lengths[None, :], u1_h.shape)
        bound = np.maximum(bound_of(u1_h, u2_h, h, r), bound_of(u1_r, u2_r, r, h))
        idx = np.arange(rows.start, rows.stop)
        bound[np.arange(len(idx)), idx] = 0.0  # not against itself
        for a, i in enumerate(idx):
            if out[i]:
                continue
            cand = np.flatnonzero(bound[a] >= THRESHOLD)
            candidates_total += len(cand)
            for j in cand[np.argsort(-bound[a][cand], kind="stable")]:
                if max(score(i, j), score(j, i)) >= THRESHOLD:
                    out[i] = out[j] = True
                    break
    if stats is not None:
        stats.update(utterances=n, pool=int((~out).sum()), candidate_pairs=int(candidates_total),
                     sacrebleu_calls=scored, all_pairs=n * (n - 1), tokenizer=tok_name,
                     sacrebleu_version=sacrebleu.__version__)
    return np.flatnonzero(~out)


@dataclass(kw_only=True)
class PreparedLocale:
    """One locale's FMDA training inputs (its MASSIVE rows are `massive.LocaleData`): the token
    store of its utterances, the masked re-encodings' targets and its negative pool."""

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


@dataclass(kw_only=True)
class FmdaData:
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
        try:  # a cache, so one damaged or edited is computed again (was: a traceback, or indices out of range)
            blob = json.loads(path.read_text(encoding="utf-8"))
            pool = np.asarray(blob["pool"], dtype=np.int64)
            if pool.ndim == 1 and np.all((pool >= 0) & (pool < len(utts))) and np.all(np.diff(pool) > 0) \
                    and isinstance(blob["stats"], dict):
                return pool, blob["stats"]
        except (OSError, ValueError, TypeError, KeyError, OverflowError):
            pass
        log.warning(f"{path}: not a negative pool of these utterances (damaged or edited): computed again")
    stats: dict = {}
    pool = negative_pool(utts, locale, show_progress=show_progress, stats=stats)
    atomic_write_json(path, {"pool": pool.tolist(), "stats": stats})
    return pool, stats


def _aligned_rows(folder: Path, partners: Sequence[str]) -> tuple[list[str], dict[str, list]]:
    """(en-US and the partner locales, their rows), checked to be aligned with en-US by id and partition."""
    locales = [PIVOT] + [p for p in partners if p != PIVOT]
    rows = {loc: read_massive(folder, loc) for loc in locales}
    for loc in locales[1:]:
        here, pivot = rows[loc], rows[PIVOT]
        # the first row whose id or partition differs from en-US's at the same position (was: unnamed)
        at = next((i for i, (a, b) in enumerate(zip(here, pivot)) if (a.id, a.partition) != (b.id, b.partition)),
                  None if len(here) == len(pivot) else min(len(here), len(pivot)))
        if at is not None:
            said = (f"{len(here)} rows, {PIVOT}.jsonl has {len(pivot)}" if at == min(len(here), len(pivot)) else
                    f"row {at + 1} is id {here[at].id!r} ({here[at].partition}), {PIVOT}.jsonl's id {pivot[at].id!r} "
                    f"({pivot[at].partition}, line {pivot[at].line})")
            raise InputError(folder / f"{loc}.jsonl", f"rows are not aligned with {PIVOT}.jsonl by id and partition, "
                                                       f"as FMDA reads them: {said}",
                             line=here[at].line if at < len(here) else None)
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
        train_global = np.asarray([i for i, x in enumerate(r) if x.partition == "train"])
        log(f"{loc}: negative pool over {len(train_global)} train utterances (BLEU < 0.1 to all others)")
        pool_idx, pool_stats = pool_indices([r[i].utt for i in train_global], loc, show_progress=show_progress)
        positions = np.concatenate([train_pos, dev_pos, train_global[pool_idx]]).astype(np.int64)
        utts = [r[i].utt for i in positions]
        store = build_token_store(encoder, utts, show_progress=show_progress, desc=f"token states {loc}")
        share_sentence_vectors(encoder, utts, store)  # the pooled baselines (DREAM) read these
        annotated = np.asarray([r[i].annot_utt is not None for i in positions])
        tp_t = rs_t = None
        if annotated.any():
            ann_rows = np.flatnonzero(annotated)
            masks = [template_and_residual_masks(r[positions[k]].annotation) for k in ann_rows]
            ann_utts = [utts[k] for k in ann_rows]
            tp_t, rs_t = np.zeros((2, len(utts), encoder.dim), np.float32)
            for k, (target, what) in enumerate(((tp_t, "template"), (rs_t, "residual"))):
                target[ann_rows] = build_token_store(encoder, ann_utts, mask_spans=[m[k] for m in masks],
                                                     keep_tokens=False, show_progress=show_progress,
                                                     desc=f"{what} targets {loc}").pooled
        out[loc] = PreparedLocale(utts=utts, store=store, template_target=tp_t, residual_target=rs_t,
                                  annotated=annotated, pool_rows=np.arange(n_tr + n_dev, len(utts)))
        # the file by its content too: the checkpoint's signature reads it, not the path (`run_signature`)
        summary["locales"][loc] = {"file": str(folder / f"{loc}.jsonl"),
                                   "file_sha256": sha256_file(folder / f"{loc}.jsonl"), "pool": pool_stats,
                                   "annotated_train": int(annotated[:n_tr].sum()),
                                   "annotated_dev": int(annotated[n_tr:n_tr + n_dev].sum())}
    return FmdaData(locales=locales, data=out, train_rows=np.arange(n_tr),
                    dev_rows=np.arange(n_tr, n_tr + n_dev), ids_train=[base[i].id for i in train_pos],
                    ids_dev=[base[i].id for i in dev_pos], summary=summary)
