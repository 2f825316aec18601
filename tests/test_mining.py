"""Mining: hand-checked margins and retrieval modes, blocked kNN vs brute force, real-data accuracy."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xmine.errors import ConfigError
from xmine.mining import MiningConfig, mine_embeddings, select_pairs
from xmine.mining.knn import exact_knn_both
from xmine.mining.select import BOTH, FWD, RETRIEVALS, greedy_one_to_one, margin_score

from flores import flores_lines


# ---------------------------------------------------------------- margin formulas (hand-checked)
def test_margin_formulas_by_hand():
    # cos 0.8, x's neighbourhood mean 0.5, y's 0.3 -> m = 0.4
    assert margin_score(0.8, 0.5, 0.3, "ratio") == pytest.approx(2.0)
    assert margin_score(0.8, 0.5, 0.3, "distance") == pytest.approx(0.4)
    assert margin_score(0.8, 0.5, 0.3, "absolute") == pytest.approx(0.8)
    with pytest.raises(ValueError):
        margin_score(0.8, 0.5, 0.3, "cosine")


def _knn_lists(S: np.ndarray, k: int):
    fi = np.argsort(-S, axis=1, kind="stable")[:, :k]
    bi = np.argsort(-S.T, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(S, fi, 1), fi, np.take_along_axis(S.T, bi, 1), bi


# Similarities of 3 sources x 3 targets: the ratio margin's scores by hand (where the modes agree;
# test_retrieval_modes_differ_by_hand has a case where all four differ).
S3 = np.array([
    [0.90, 0.80, 0.10],
    [0.85, 0.20, 0.10],
    [0.10, 0.15, 0.30],
], dtype=np.float32)


def test_select_pairs_each_mode_by_hand():
    k = 2
    knn = _knn_lists(S3, k)
    # neighbourhood means: x0 (0.9+0.8)/2=.85, x1 (.85+.2)/2=.525, x2 (.3+.15)/2=.225
    #                      y0 (.9+.85)/2=.875, y1 (.8+.2)/2=.5, y2 (.3+.1)/2=.2
    cfg = MiningConfig(k=k, margin="ratio")
    r = lambda c, mx, my: c / ((mx + my) / 2)  # noqa: E731
    s00, s01 = r(.90, .85, .875), r(.80, .85, .5)      # 1.0435, 1.1852 -> x0's best is y1
    s10 = r(.85, .525, .875)                            # 1.2143 -> x1's best is y0
    s22, s21 = r(.30, .225, .2), r(.15, .225, .5)       # 1.4118 -> x2's best is y2
    fwd = select_pairs(*knn, config=cfg.replace(retrieval="fwd"))
    assert dict(zip(fwd.src_idx.tolist(), fwd.tgt_idx.tolist())) == {0: 1, 1: 0, 2: 2}
    assert sorted(fwd.score.tolist(), reverse=True) == pytest.approx([s22, s10, s01], rel=1e-5)
    bwd = select_pairs(*knn, config=cfg.replace(retrieval="bwd"))
    # y0: candidates x0 (s00) and x1 (s10) -> x1; y1: x0 (s01) vs x1 (.2/(.525+.5)*2) -> x0; y2: x2
    assert s00 < s10
    assert dict(zip(bwd.tgt_idx.tolist(), bwd.src_idx.tolist())) == {0: 1, 1: 0, 2: 2}
    inter = select_pairs(*knn, config=cfg.replace(retrieval="intersect"))
    assert inter.pairs() == {(0, 1), (1, 0), (2, 2)}
    assert set(inter.direction.tolist()) == {BOTH}
    mx = select_pairs(*knn, config=cfg.replace(retrieval="max"))
    assert mx.pairs() == {(0, 1), (1, 0), (2, 2)}
    assert list(mx.score) == sorted(mx.score, reverse=True)
    # absolute cosine picks x0-y0 first (0.90), which blocks x1's only good target.
    ab = select_pairs(*knn, config=cfg.replace(margin="absolute", retrieval="max"))
    assert (0, 0) in ab.pairs() and (1, 0) not in ab.pairs()
    assert s21 < s22


def test_retrieval_modes_differ_by_hand():
    # Absolute margin (score = cosine), k = 3 = everything:
    #        y0   y1   y2
    #   x0  .1   .7   .9     fwd: x0->y2 .9, x1->y2 .8, x2->y1 .6
    #   x1  .2   .5   .8     bwd: y0->x2 .4, y1->x0 .7, y2->x0 .9
    #   x2  .4   .6   .3     intersect: only x0<->y2 is mutual
    # max: candidates by score (0,2) .9, (1,2) .8, (0,1) .7, (2,1) .6, (2,0) .4; greedy one-to-one
    # keeps (0,2), drops (1,2) (y2 taken) and (0,1) (x0 taken), keeps (2,1), drops (2,0) (x2 taken).
    S = np.array([[.1, .7, .9], [.2, .5, .8], [.4, .6, .3]], dtype=np.float32)
    knn = _knn_lists(S, 3)
    cfg = MiningConfig(k=3, margin="absolute")
    got = {r: select_pairs(*knn, config=cfg.replace(retrieval=r)) for r in RETRIEVALS}
    assert got["fwd"].pairs() == {(0, 2), (1, 2), (2, 1)}
    assert got["bwd"].pairs() == {(0, 1), (0, 2), (2, 0)}
    assert got["intersect"].pairs() == {(0, 2)}
    assert got["max"].pairs() == {(0, 2), (2, 1)}
    assert got["max"].score.tolist() == pytest.approx([.9, .6])
    assert dict(zip(got["max"].tgt_idx.tolist(), got["max"].direction.tolist())) == {2: BOTH, 1: FWD}


def test_ratio_margin_where_the_neighbourhood_mean_is_not_positive():
    # m = (mean_x + mean_y) / 2 <= 0: c / m would flip the sign (c=.1, m=-.05 -> -2) or explode
    # (m -> 0+): such candidates score -inf and are never mined; m > 0 is the usual c / m.
    scores = margin_score(np.array([.1, .1, .5, .2]), np.array([-.05, 0., .4, 1e-3]),
                          np.array([-.05, 0., .6, -1e-3]), "ratio")
    assert scores[0] == -np.inf and scores[1] == -np.inf and scores[3] == -np.inf
    assert scores[2] == pytest.approx(.5 / .5)
    # The same definition on the mining path: the anti-correlated pair is not output, the other is.
    x = np.array([[1, 0], [-1, 0]], dtype=np.float32)
    y = np.array([[1, 0], [0, 1]], dtype=np.float32)
    mined = mine_embeddings(x, y, config=MiningConfig(k=2, retrieval="fwd"))
    assert mined.pairs() == {(0, 0)}  # x1's neighbourhood mean (-1 + 0) / 2 < 0: not scorable


def test_greedy_one_to_one_matches_the_plain_walk():
    rng = np.random.default_rng(3)
    for _ in range(5):
        n = 6000
        src, tgt = rng.integers(0, 1500, n), rng.integers(0, 1500, n)
        score = rng.random(n).astype(np.float32).round(3)  # many ties
        keep = greedy_one_to_one(src, tgt, score)
        order = np.argsort(-score.astype(np.float64), kind="stable")
        us, ut, ref = set(), set(), []
        for p in order:
            if src[p] not in us and tgt[p] not in ut:
                us.add(src[p]), ut.add(tgt[p]), ref.append(p)
        assert keep.tolist() == ref


def test_greedy_small_hand_case():
    # (0,0) .9 wins; (0,1) .8 blocked by src 0; (1,0) .7 blocked by tgt 0; (1,1) .6 kept.
    keep = greedy_one_to_one(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([.9, .8, .7, .6]))
    assert keep.tolist() == [0, 3]


@pytest.mark.parametrize("retrieval", ["max", "fwd", "bwd", "intersect"])
def test_threshold_is_honoured_in_every_mode(retrieval):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((80, 16)).astype(np.float32)
    y = np.concatenate([x[:40] + 0.3 * rng.standard_normal((40, 16)), rng.standard_normal((50, 16))]).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    cfg = MiningConfig(retrieval=retrieval)
    everything = mine_embeddings(x, y, config=cfg)
    thr = float(np.median(everything.score))
    kept = mine_embeddings(x, y, config=cfg.replace(threshold=thr))
    assert len(kept) > 0 and (kept.score >= thr).all()
    assert len(kept) == int((everything.score >= thr).sum())  # the same pairs, cut at thr
    assert kept.pairs() == {p for p, s in zip(zip(everything.src_idx.tolist(), everything.tgt_idx.tolist()),
                                              everything.score) if s >= thr}


@pytest.mark.parametrize("retrieval", ["max", "fwd", "bwd", "intersect"])
def test_a_score_just_below_the_threshold_is_dropped(retrieval):
    """"At least this" in float64 (was: the Python float threshold cast to float32, as numpy 2
    casts it meeting float32 scores, so a score up to half a float32 step below it was kept)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((30, 8)).astype(np.float32)
    y = (x + 0.2 * rng.standard_normal((30, 8))).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    cfg = MiningConfig(retrieval=retrieval)
    everything = mine_embeddings(x, y, config=cfg)
    lowest = float(everything.score.min())
    assert len(mine_embeddings(x, y, config=cfg.replace(threshold=lowest))) == len(everything)
    above = float(np.nextafter(lowest, np.inf))  # a double above the float32 score, below the next float32
    assert np.float32(above) == np.float32(lowest)
    assert len(mine_embeddings(x, y, config=cfg.replace(threshold=above))) == len(everything) - 1


def test_max_mode_is_one_to_one_and_finds_planted_pairs():
    rng = np.random.default_rng(1)
    n = 300
    x = rng.standard_normal((n, 32)).astype(np.float32)
    perm = rng.permutation(n)
    y = x[perm] + 0.4 * rng.standard_normal((n, 32)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    mined = mine_embeddings(x, y, config=MiningConfig(block_rows=37, block_cols=53))
    assert len(set(mined.src_idx.tolist())) == len(mined) == len(set(mined.tgt_idx.tolist()))
    gold = {(int(perm[j]), j) for j in range(n)}
    assert len(mined.pairs() & gold) >= 0.97 * n


@pytest.mark.parametrize("shape,blocks,k", [
    ((61, 47), (1, 1), 3), ((61, 47), (7, 13), 4), ((61, 47), (5, 3), 50), ((61, 47), (61, 47), 1),
    ((2500, 2200), (512, 1000), 4), ((2500, 2200), (999, 333), 10), ((1300, 1700), (4096, 16384), 4),
])
def test_blocked_knn_equals_brute_force(shape, blocks, k):
    """Exact means exact: every index and every score equals the brute-force top-k of the
    canonical scores (rescore.exact_dot; ties by lower index), whatever the block shape."""
    from xmine.mining.rescore import exact_dot

    rng = np.random.default_rng(sum(shape) + k)
    x = rng.standard_normal((shape[0], 24)).astype(np.float32)
    y = rng.standard_normal((shape[1], 24)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    fs, fi, bs, bi = exact_knn_both(x, y, k, block_rows=blocks[0], block_cols=blocks[1])
    S = x.astype(np.float64) @ y.T.astype(np.float64)
    kx, ky = min(k, shape[1]), min(k, shape[0])
    assert fi.shape == (shape[0], kx) and bi.shape == (shape[1], ky)
    # float64 decides the order (no float64 near-ties in random data); scores are the float32
    # nearest the exact dot products.
    ri, ci = np.argsort(-S, axis=1)[:, :kx], np.argsort(-S.T, axis=1)[:, :ky]
    np.testing.assert_array_equal(fi, ri)
    np.testing.assert_array_equal(bi, ci)
    rows = np.repeat(np.arange(shape[0]), kx)
    np.testing.assert_array_equal(fs.ravel(), exact_dot(x[rows], y[ri.ravel()]))
    cols = np.repeat(np.arange(shape[1]), ky)
    np.testing.assert_array_equal(bs.ravel(), exact_dot(x[ci.ravel()], y[cols]))
    assert (np.diff(fs, axis=1) <= 0).all()


def test_float16_input_gives_same_neighbours():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 32)).astype(np.float16)
    y = rng.standard_normal((250, 32)).astype(np.float16)
    a = exact_knn_both(x, y, 4, block_rows=64, block_cols=100)
    b = exact_knn_both(x.astype(np.float32), y.astype(np.float32), 4)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


class _Killed(Exception):
    pass


def test_checkpoint_resume_gives_identical_results(tmp_path, caplog, monkeypatch):
    import xmine.mining.knn as knn

    rng = np.random.default_rng(6)
    x = rng.standard_normal((500, 16)).astype(np.float32)
    y = rng.standard_normal((400, 16)).astype(np.float32)
    ref = exact_knn_both(x, y, 4, block_rows=100)
    ck, tiles = tmp_path / "ck", dict(block_rows=100, block_cols=100, tile_rows=200, tile_cols=300)
    real = knn.tile_knn
    ran, stop_at = [], [3]

    def tile_knn(*a, **kw):
        ran.append(a[2:6])
        if len(ran) in stop_at:
            raise _Killed  # the run stops in its third tile
        return real(*a, **kw)

    monkeypatch.setattr(knn, "tile_knn", tile_knn)
    with pytest.raises(_Killed):
        exact_knn_both(x, y, 4, checkpoint_dir=ck, checkpoint_key="a", **tiles)
    assert len(list(ck.glob("tile_*.npz"))) == 2
    stop_at.clear()
    # Same key, full x, another product: only the tiles not saved are computed (exact scores do
    # not depend on the product).
    ran.clear()
    got = exact_knn_both(x, y, 4, checkpoint_dir=ck, checkpoint_key="a", product="bf16", **tiles)
    assert "damaged" not in caplog.text
    assert ran == [(200, 400, 0, 300), (200, 400, 300, 400), (400, 500, 0, 300), (400, 500, 300, 400)]
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(r, g)
    # Another key: the old tiles are discarded, results still right.
    ran.clear()
    got = exact_knn_both(x, y, 4, checkpoint_dir=ck, checkpoint_key="b", **tiles)
    assert len(ran) == 6
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(r, g)


@pytest.mark.parametrize("damage", ["garbled", "indices out of the tile", "truncated lists"])
def test_a_damaged_tile_is_recomputed_never_read(tmp_path, caplog, damage):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((300, 16)).astype(np.float32)
    y = rng.standard_normal((200, 16)).astype(np.float32)
    ck, tiles = tmp_path / "ck", dict(block_rows=50, block_cols=50, tile_rows=100, tile_cols=100)
    ref = exact_knn_both(x, y, 4, checkpoint_dir=ck, **tiles)
    path = sorted(ck.glob("tile_*.npz"))[1]
    if damage == "garbled":
        path.write_bytes(b"PK\x03\x04 not a zip")
    else:
        with np.load(path) as z:
            saved = dict(z)
        if damage.startswith("indices"):
            saved["fi"] = saved["fi"] + 1000
        else:
            saved["bs"], saved["bi"] = saved["bs"][:-1], saved["bi"][:-1]
        np.savez(path, **saved)
    got = exact_knn_both(x, y, 4, checkpoint_dir=ck, **tiles)
    assert f"{path}: damaged mining checkpoint" in caplog.text and "recomputing" in caplog.text
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(r, g)


def test_in_this_process_a_tile_is_a_stripe_of_rows_against_all_of_y(monkeypatch):
    import xmine.mining.knn as knn

    ran, real = [], knn.tile_knn
    monkeypatch.setattr(knn, "tile_knn", lambda *a, **kw: (ran.append(a[2:6]), real(*a, **kw))[1])
    rng = np.random.default_rng(9)
    x, y = rng.standard_normal((300, 8)).astype(np.float32), rng.standard_normal((5000, 8)).astype(np.float32)
    knn.exact_knn_both(x, y, 4, block_rows=64, block_cols=4096)  # y: more than one block, not two
    knn.exact_knn_both(x, y, 4, block_rows=64, block_cols=4096, tile_rows=128)
    assert ran == [(0, 300, 0, 5000), (0, 128, 0, 5000), (128, 256, 0, 5000), (256, 300, 0, 5000)]


def test_workers_share_row_blocks_without_changing_neighbours():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((700, 16)).astype(np.float32)
    y = rng.standard_normal((650, 16)).astype(np.float32)
    one = exact_knn_both(x, y, 4, block_rows=64, block_cols=100, workers=1)
    three = exact_knn_both(x, y, 4, block_rows=64, block_cols=100, workers=3)
    for a, b in zip(one, three):
        np.testing.assert_array_equal(a, b)  # scores are canonical: no BLAS rounding to tolerate
    with pytest.raises(ValueError, match="workers"):
        exact_knn_both(x, y, 4, workers=0)


def test_merged_worker_lists_keep_best_then_lowest_index():
    from xmine.mining.knn_product import _merged_cols

    def _merge_states(states):
        return _merged_cols(states, 0, len(states[0][0]))

    a = (np.array([[0.9, 0.5, -np.inf]], np.float32), np.array([[7, 3, -1]]))
    b = (np.array([[0.9, 0.8, 0.5]], np.float32), np.array([[2, 9, 1]]))
    sims, idx = _merge_states([a, b])
    np.testing.assert_array_equal(sims, np.array([[0.9, 0.9, 0.8]], np.float32))  # 0.9: index 2 before 7
    np.testing.assert_array_equal(idx, [[2, 7, 9]])
    sims, idx = _merge_states([(a[0][:, :2], a[1][:, :2]), (np.full((1, 2), -np.inf, np.float32), np.full((1, 2), -1))])
    np.testing.assert_array_equal(idx, [[7, 3]])


def test_filters_length_ratio_and_bounds():
    x = np.eye(4, dtype=np.float32)
    y = np.eye(4, dtype=np.float32)
    src_len, tgt_len = np.array([10, 10, 3, 50]), np.array([11, 40, 3, 50])
    mined = mine_embeddings(x, y, config=MiningConfig(k=2, max_length_ratio=2.0), src_lengths=src_len,
                            tgt_lengths=tgt_len)
    assert (1, 1) not in mined.pairs()  # 40/10 = 4 > 2
    assert {(0, 0), (2, 2), (3, 3)} <= mined.pairs()
    mined = mine_embeddings(x, y, config=MiningConfig(k=2, min_length=5, max_length=45), src_lengths=src_len,
                            tgt_lengths=tgt_len)
    assert mined.pairs() == {(0, 0), (1, 1)}  # rows 2 (too short) and 3 (too long) are not mined
    assert mined.length_ratio_dropped is None  # no ratio bound, nothing counted


def test_the_length_ratio_bound_counts_the_distinct_candidates_it_drops():
    """(a helper: --max-length-ratio took 72 of 133 pairs without a count anywhere) The count is of
    distinct (source, target) candidates among each side's k nearest, against a brute force."""
    from xmine.mining.knn import exact_knn_both

    rng = np.random.default_rng(5)
    for trial in range(20):
        n, m, k = int(rng.integers(1, 40)), int(rng.integers(1, 40)), int(rng.integers(1, 6))
        x = rng.standard_normal((n, 8)).astype(np.float32)
        y = rng.standard_normal((m, 8)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        sl, tl = rng.integers(1, 60, n), rng.integers(1, 60, m)
        bound = float(rng.choice([1.0, 1.5, 3.0]))
        knn = exact_knn_both(x, y, k)
        fs, fi, bs, bi = knn
        def over(i, j):
            return max(sl[i], tl[j]) / min(sl[i], tl[j]) > bound

        expected = {(i, int(j)) for i in range(n) for j in fi[i] if j >= 0 and over(i, j)}
        expected |= {(int(i), j) for j in range(m) for i in bi[j] if i >= 0 and over(i, j)}
        mined = select_pairs(*knn, config=MiningConfig(k=k, margin="distance", max_length_ratio=bound), src_lengths=sl,
                             tgt_lengths=tl)
        assert mined.length_ratio_dropped == len(expected), trial
        assert not {(s, t) for s, t in mined.pairs() if over(s, t)}


def test_config_is_validated():
    with pytest.raises(ConfigError):
        MiningConfig(margin="cos")
    with pytest.raises(ConfigError):
        MiningConfig(retrieval="both")
    with pytest.raises(ConfigError):
        MiningConfig(k=0)
    with pytest.raises(ConfigError, match="product"):
        MiningConfig(product="int8")


def test_dedup_mapping_used_by_mining(tmp_path):
    from xmine.io.dedup import dedup

    unique, inverse, first = dedup(["a  b", "c", "a b", "c", "d"], return_first=True)
    assert unique == ["a  b", "c", "d"] and inverse.tolist() == [0, 1, 0, 1, 2] and first.tolist() == [0, 1, 4]


# ---------------------------------------------------------------- real data, real encoder
def _flores(data_dir: Path, lang: str) -> list[str]:
    return flores_lines(data_dir, lang)


@pytest.fixture(scope="module")
def flores_setup(data_dir, me5):
    """300 German sentences; English: their 300 translations shuffled + 200 unrelated sentences."""
    from xmine.encoders.embed_cache import cached_encode

    de, en = _flores(data_dir, "deu_Latn"), _flores(data_dir, "eng_Latn")
    src = de[:300]
    tgt = en[:300] + en[600:800]
    order = list(range(len(tgt)))
    random.Random(0).shuffle(order)
    tgt = [tgt[i] for i in order]
    gold = {i: order.index(i) for i in range(300)}  # src row i -> its translation's row in tgt
    x = cached_encode(me5, src, show_progress=False)
    y = cached_encode(me5, tgt, show_progress=False)
    return x, y, gold, src, tgt


def _pr(mined, gold):
    found = mined.pairs()
    tp = len(found & set(gold.items()))
    return tp / max(len(found), 1), tp / len(gold)


def test_accuracy_on_flores_with_me5(flores_setup):
    x, y, gold, _, _ = flores_setup
    mined = mine_embeddings(x, y, config=MiningConfig(threshold=1.04))
    p, r = _pr(mined, gold)
    assert p >= 0.97 and r >= 0.95, (p, r)  # measured 1.0, 0.987
    # Swapping the sides' roles in the gold (a wrong direction) matches nothing.
    assert _pr(mined, {v: k for k, v in gold.items()})[0] < 0.05
    # bwd gives each of the 500 targets its best source, 200 of them unrelated: the ratio margin at
    # 1.04 removes those; plain cosine at a typical cosine threshold (0.8) keeps most of them.
    p_bwd, r_bwd = _pr(mine_embeddings(x, y, config=MiningConfig(threshold=1.04, retrieval="bwd")), gold)
    assert p_bwd >= 0.97 and r_bwd >= 0.95, (p_bwd, r_bwd)  # measured 1.0, 0.987
    p_cos, _ = _pr(mine_embeddings(x, y, config=MiningConfig(margin="absolute", threshold=0.8, retrieval="bwd")), gold)
    assert p_cos < 0.8, p_cos  # measured 0.649
    # A ratio threshold means nothing on the cosine scale: nothing reaches 1.04.
    assert len(mine_embeddings(x, y, config=MiningConfig(margin="absolute", threshold=1.04))) == 0
    # The stricter stopes threshold trades recall for nothing here (precision already 1).
    assert _pr(mine_embeddings(x, y, config=MiningConfig(threshold=1.06)), gold)[1] <= r


@pytest.mark.slow
def test_mine_command_end_to_end(tmp_path, data_dir, flores_setup):
    """`xmine mine` on text files (embedded into stores in OUT.work/), with dedup; the work dir is removed."""
    _, _, gold, src, tgt = flores_setup
    (tmp_path / "de.txt").write_text("\n".join(src + src[:20]) + "\n", encoding="utf-8")  # 20 repeats
    (tmp_path / "en.txt").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    out = tmp_path / "mined.tsv"
    cmd = [sys.executable, "-m", "xmine.cli", "mine", str(tmp_path / "de.txt"), str(tmp_path / "en.txt"),
           "--src-lang", "de", "--tgt-lang", "en", "-o", str(out), "--threshold", "1.04", "--line-numbers", "--meta",
           "--projection", "none"]  # raw embeddings: 1.04 is WikiMatrix's threshold for them
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    scores = [float(r[0]) for r in rows]
    assert scores == sorted(scores, reverse=True) and min(scores) >= 1.04
    good = sum(1 for r in rows if int(r[4]) - 1 == gold.get(int(r[3]) - 1))
    assert good >= 0.95 * 300 and len(rows) <= 310  # the repeated 20 lines are mined once
    assert len({r[1] for r in rows}) == len(rows)
    assert (tmp_path / "mined.tsv.meta").read_text().count("\n") == len(rows)
    assert not (tmp_path / "mined.tsv.work").exists()


@pytest.mark.slow
def test_mine_through_indexes_matches_exact(tmp_path, flores_setup):
    """--approximate and an index directory as the target side go through FAISS; with exact
    (Flat) and near-exact (HNSW) indexes on 500 sentences they must mine what the exact path mines."""
    _, _, gold, src, tgt = flores_setup
    de, en = tmp_path / "de.txt", tmp_path / "en.txt"
    de.write_text("\n".join(src) + "\n", encoding="utf-8")
    en.write_text("\n".join(tgt) + "\n", encoding="utf-8")

    from click.testing import CliRunner

    from xmine.cli import main

    def run(*args) -> set[tuple[str, str]]:
        # In-process, so the encoder is loaded once (load_encoder reuses it).
        result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        out = Path(args[args.index("-o") + 1])
        return {tuple(r.split("\t")[3:5]) for r in out.read_text(encoding="utf-8").splitlines()} if out.suffix == ".tsv" else set()

    # raw embeddings, at WikiMatrix's threshold for them (the shipped projection has its own)
    common = ["--src-lang", "de", "--tgt-lang", "en", "--threshold", "1.04", "--line-numbers", "--projection", "none"]
    exact = run("mine", de, en, "-o", tmp_path / "exact.tsv", *common)
    # IVF with exact vectors, every list visited: approximate machinery, exact answer.
    approx = run("mine", de, en, "-o", tmp_path / "approx.tsv", "--approximate", "--index-type", "ivf",
                 "--nlist", "4", "--nprobe", "4", *common)
    run("build-index", en, "--lang", "en", "--index-type", "hnsw", "--projection", "none", "-o", tmp_path / "idx")
    via_index = run("mine", de, tmp_path / "idx", "-o", tmp_path / "via-index.tsv", *common)
    run("build-index", en, "--lang", "en", "--index-type", "flat", "--projection", "none", "-o", tmp_path / "flat")
    en_de = ["--src-lang", "en", "--tgt-lang", "de", *common[4:]]  # the index side as the source
    run("mine", tmp_path / "flat", de, "-o", tmp_path / "via-flat.tsv", *en_de)
    run("mine", en, de, "-o", tmp_path / "exact-en.tsv", *en_de)
    assert len(exact) >= 0.95 * 300
    assert approx == exact
    assert len(via_index & exact) >= 0.98 * len(exact)
    # Every search scores its candidates with the exact path's scorer: where the index's answer is
    # exact, the files are the same bytes, scores included.
    assert (tmp_path / "approx.tsv").read_bytes() == (tmp_path / "exact.tsv").read_bytes()
    # OUT.json records the indexes the approximate search built (was: its settings as given only)
    import json

    used = json.loads((tmp_path / "approx.tsv.json").read_text())["approximate_index"]
    assert used == {"nlist": 4, "nprobe": 4, "factory": "IVF4,Flat", "shard_rows": 500}  # (one shard: the budget)
    assert "approximate_index" not in json.loads((tmp_path / "exact.tsv.json").read_text())
    assert (tmp_path / "via-flat.tsv").read_bytes() == (tmp_path / "exact-en.tsv").read_bytes()
