"""File-level mining: `mine(src, tgt, out=...)` behind `xmine mine`.

Each side is a text file, an embedding store or an index directory (xmine.inputs). Both
sides are deduplicated (mining runs on unique sentences; a pair is output once, with the first
line of each sentence), mined exactly with the blocked kNN (checkpointed in `<out>.work/`, so an
interrupted run resumes) or, with `approximate` or when a side is an index, through FAISS indexes,
and written atomically as `score<TAB>src<TAB>tgt`, highest score first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np

from xmine.artefacts import provenance
from xmine.errors import ArtefactError
from xmine.mining.products import resolve_product
from xmine.mining.select import DIRECTION_NAMES, MinedPairs, MiningConfig, length_mask, mine_embeddings, select_pairs

log = logging.getLogger(__name__)
#: The kind recorded in OUT.json, which marks OUT as a mining result xmine may replace.
MINING_KIND = "mining-result"


def _dedup(side) -> tuple[list[str], np.ndarray, np.ndarray]:
    from xmine.corpus import dedup

    unique, inverse, first = dedup(side.sentences, return_first=True)
    return unique, inverse, first


def _unique_hits(sims: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Drop repeated ids in each row (keep the first = best), then keep k columns (-1 pads)."""
    ids = ids.copy()
    for c in range(1, ids.shape[1]):
        dup = (ids[:, :c] == ids[:, c : c + 1]).any(axis=1)
        ids[dup, c] = -1
    sims = np.where(ids >= 0, sims, -np.inf)
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, order, 1).astype(np.float32), np.take_along_axis(ids, order, 1)


def _approximate_knn(sx, sy, ux, uy, inv_x, inv_y, k: int, work: Path, show_progress: bool, *,
                     on_ray: bool = False):
    """kNN both ways through FAISS indexes: a side's own index dir, else one built in `work`.

    `on_ray`: indexes are built and searched as Ray tasks (`xmine.index.ray_build`): the same
    index and the same hits."""
    from xmine.index.faiss_index import IndexConfig, build_index

    def index_of(side, unique_emb, tag):
        if side.index is not None:
            return side.index, True
        d = work / f"index-{tag}-{side.fingerprint_key()[:16]}"
        from xmine.index.faiss_index import IndexDir

        try:
            return IndexDir.open(d), False
        except ArtefactError as e:  # absent or damaged: (re)build it, atomically, inside OUT.work/
            if d.exists():
                log.warning(f"{d}: {e}; rebuilding it")
            n = len(unique_emb)
            if on_ray:
                from xmine.index.ray_build import build_index_ray

                return build_index_ray(unique_emb, d, sentences=[""] * n, line_numbers=np.arange(1, n + 1),
                                       encoder=side.encoder, projection=side.projection, part=side.part,
                                       config=IndexConfig(), show_progress=show_progress, overwrite=True), False
            return build_index(unique_emb, d, sentences=[""] * n, line_numbers=np.arange(1, n + 1),
                               encoder=side.encoder, projection=side.projection, part=side.part,
                               config=IndexConfig(), show_progress=show_progress, overwrite=True), False

    ix_y, y_orig = index_of(sy, uy, "tgt")
    ix_x, x_orig = index_of(sx, ux, "src")
    extra = 2 * k  # room for duplicates of an index over non-deduplicated rows
    if on_ray:
        from xmine.index.ray_build import search_ray as search
    else:
        def search(ix, queries, kk):
            return ix.search(queries, kk)
    fs, fi = search(ix_y, ux, k + (extra if y_orig else 0))
    if y_orig:
        fi = np.where(fi >= 0, inv_y[np.maximum(fi, 0)], -1)
    fs, fi = _unique_hits(fs, fi, min(k, len(uy)))
    bs, bi = search(ix_x, uy, k + (extra if x_orig else 0))
    if x_orig:
        bi = np.where(bi >= 0, inv_x[np.maximum(bi, 0)], -1)
    bs, bi = _unique_hits(bs, bi, min(k, len(ux)))
    return fs, fi, bs, bi


def mine(
    src: str | Path,
    tgt: str | Path,
    *,
    out: str | Path,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    config: MiningConfig = MiningConfig(),
    encoder: str | None = None,
    precision: str | None = None,
    projection: str | Path | None = None,
    approximate: bool = False,
    line_numbers: bool = False,
    meta: bool = False,
    keep_work: bool = False,
    show_progress: bool = True,
    overwrite: bool = False,
    ray: str | None = None,
) -> dict:
    """Mine `src` against `tgt` into `out`; returns a summary (also written to `<out>.json`).

    `out` is claimed first (`xmine.outputs.claim_output`): it must not be an input, an existing
    `out` (with `out.json`, `out.meta`, `out.work/`) must be an earlier mining result and is
    replaced only with `overwrite`, and a second run writing the same `out` is refused.
    `encoder` and `precision` encode text sides; by default those of the artefact sides (stores,
    indexes), else me5-small at "auto" precision.

    `ray`: None runs in this process; "auto" or a cluster address runs the kNN search as Ray
    tasks (`xmine.mining.ray_knn`, `xmine.index.ray_build`), with the same output.
    """
    from xmine.outputs import claim_output

    out = Path(out)
    # Fail before claiming or encoding anything when the product cannot run (cuda without a GPU)
    # or the Ray cluster cannot be joined.
    if not approximate:
        resolve_product(config.product)
    if ray is not None:
        from xmine.cluster import connect

        connect(ray)
    with claim_output(out, kind=MINING_KIND, form="tsv", inputs=[src, tgt, projection], overwrite=overwrite,
                      companions=(".meta", ".work")) as claim:
        return _mine(src, tgt, claim, src_lang=src_lang, tgt_lang=tgt_lang, config=config, encoder=encoder,
                     precision=precision, projection=projection, approximate=approximate,
                     line_numbers=line_numbers, meta=meta, keep_work=keep_work, show_progress=show_progress, ray=ray)


def _mine(src, tgt, claim, *, src_lang, tgt_lang, config, encoder, precision, projection, approximate, line_numbers,
          meta, keep_work, show_progress, ray) -> dict:
    from xmine.inputs import Encoders, artefact_encoder_name, artefact_precision, check_compatible, load_side

    out = claim.path
    encoders = Encoders(encoder or artefact_encoder_name([src, tgt]), projection, precision,
                        default_precision=artefact_precision([src, tgt]))
    sx = load_side(src, lang=src_lang, encoders=encoders, need_vectors=True, show_progress=show_progress)
    sy = load_side(tgt, lang=tgt_lang, encoders=encoders, need_vectors=True, show_progress=show_progress)
    check_compatible(sx, sy)
    ux_text, inv_x, first_x = _dedup(sx)
    uy_text, inv_y, first_y = _dedup(sy)
    ux = np.asarray(sx.embeddings[first_x], dtype=np.float32)
    uy = np.asarray(sy.embeddings[first_y], dtype=np.float32)
    lx = np.fromiter((len(s) for s in ux_text), dtype=np.int64, count=len(ux_text))
    ly = np.fromiter((len(s) for s in uy_text), dtype=np.int64, count=len(uy_text))
    use_index = approximate or sx.index is not None or sy.index is not None

    key = hashlib.sha256(json.dumps(
        [sx.fingerprint_key(), sy.fingerprint_key(), config.k, config.block_rows, config.block_cols,
         config.min_length, config.max_length], default=str).encode()).hexdigest()
    work = claim.work_dir(".work")
    if use_index:
        fs, fi, bs, bi = _approximate_knn(sx, sy, ux, uy, inv_x, inv_y, config.k, work, show_progress,
                                          on_ray=ray is not None)
        # Length bounds: sentences outside them neither query nor are found.
        for mask, rows_idx, hits_idx in ((length_mask(lx, config), fi, bi), (length_mask(ly, config), bi, fi)):
            if mask is not None:
                rows_idx[~mask] = -1
                hits_idx[(hits_idx >= 0) & ~mask[np.maximum(hits_idx, 0)]] = -1
        mined = select_pairs(fs, fi, bs, bi, config=config, src_lengths=lx, tgt_lengths=ly)
    else:
        if ray is not None:
            from xmine.mining.ray_knn import ray_knn_both as knn
        else:
            from xmine.mining.knn import exact_knn_both as knn
        mined = mine_embeddings(ux, uy, config=config, src_lengths=lx, tgt_lengths=ly,
                                checkpoint_dir=work / ("knn-ray" if ray is not None else "knn"),
                                checkpoint_key=key, show_progress=show_progress, knn=knn)
    lines_x, lines_y = sx.line_numbers[first_x], sy.line_numbers[first_y]
    _write_pairs(claim, mined, ux_text, uy_text, lines_x, lines_y, line_numbers=line_numbers)
    if meta:
        _write_meta(claim, mined, sx.path, sy.path, lines_x, lines_y)
    elif claim.state == "finished":
        # The replaced result's own .meta (checked against its summary by the claim) would be stale.
        claim.companion(".meta").unlink(missing_ok=True)
    summary = {
        "output": str(out), "pairs": len(mined), "k_used": min(config.k, len(ux_text), len(uy_text)),
        "src": {"path": str(sx.path), "kind": sx.kind, "sentences": len(sx.sentences), "unique": len(ux_text)},
        "tgt": {"path": str(sy.path), "kind": sy.kind, "sentences": len(sy.sentences), "unique": len(uy_text)},
        "encoder": sx.encoder, "projection": sx.projection, "part": sx.part,
        "search": "faiss-index" if use_index else "exact",
        "product": None if use_index else resolve_product(config.product),
        "ray": ray,
        "score_quantiles": ({q: float(np.quantile(mined.score, q)) for q in (0.1, 0.5, 0.9)} if len(mined) else {}),
        "provenance": provenance(**asdict(config), src_lang=src_lang, tgt_lang=tgt_lang, approximate=use_index,
                                 inputs=[sx.fingerprint, sy.fingerprint]),
    }
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)
    return claim.finish(summary)


def _clean(text: str) -> str:
    # A tab or newline inside a sentence would break the TSV; corpora read by xmine have none.
    return text.replace("\t", " ").replace("\n", " ")


def _write_pairs(claim, mined: MinedPairs, src_text, tgt_text, lines_x, lines_y, *, line_numbers: bool) -> None:
    rows = []
    for s, t, sc in zip(mined.src_idx.tolist(), mined.tgt_idx.tolist(), mined.score.tolist()):
        row = f"{sc:.6f}\t{_clean(src_text[s])}\t{_clean(tgt_text[t])}"
        if line_numbers:
            row += f"\t{lines_x[s]}\t{lines_y[t]}"
        rows.append(row + "\n")
    claim.write_text("".join(rows))


def _write_meta(claim, mined: MinedPairs, src_path, tgt_path, lines_x, lines_y) -> None:
    """stopes-style meta: score, src file:line, tgt file:line, direction that found the pair."""
    rows = [f"{sc:.6f}\t{src_path}:{lines_x[s]}\t{tgt_path}:{lines_y[t]}\t{DIRECTION_NAMES[int(d)]}\n"
            for s, t, sc, d in zip(mined.src_idx.tolist(), mined.tgt_idx.tolist(), mined.score.tolist(),
                                   mined.direction.tolist())]
    claim.write_text("".join(rows), ".meta")
