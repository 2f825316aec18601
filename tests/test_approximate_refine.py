"""Approximate mining at a threshold keeps what exact mining keeps: the neighbourhoods that decide
a pair are searched again wider (mining/approximate.py, `refine_passing`), so missed neighbours
do not lift margins."""

from __future__ import annotations

import numpy as np
import pytest

from xmine.errors import ConfigError
from xmine.mining.approximate import ApproximateConfig, approximate_knn_both
from xmine.mining.knn import exact_knn_both
from xmine.mining.select import MiningConfig, passing_rows, select_pairs

THRESHOLD = 1.06


def _clustered(n: int, dim: int = 32, topics: int = 40, pairs: int = 300, seed: int = 0):
    """Two sides of unit vectors around shared topic centres (neighbours close together, as real
    sentence embeddings are), `pairs` target rows noisy copies of source rows."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((topics, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)

    def side():
        a = centres[rng.integers(0, topics, n)] + 0.8 * rng.standard_normal((n, dim)).astype(np.float32) / np.sqrt(dim)
        return a / np.linalg.norm(a, axis=1, keepdims=True)

    x, y = side(), side()
    px, py = rng.choice(n, pairs, replace=False), rng.choice(n, pairs, replace=False)
    y[py] = x[px] + 0.35 * rng.standard_normal((pairs, dim)).astype(np.float32) / np.sqrt(dim)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    return x, y


def _agreement(exact: set, approx: set) -> tuple[float, float]:
    both = len(exact & approx)
    return both / len(exact), (len(approx) - both) / len(exact)


@pytest.fixture(scope="module")
def data():
    x, y = _clustered(4000)
    config = MiningConfig(threshold=THRESHOLD)
    exact = select_pairs(*exact_knn_both(x, y, 4), config=config).pairs()
    assert 300 <= len(exact) < 2000  # the hidden pairs and some neighbours within topics
    return x, y, config, exact


@pytest.mark.slow
def test_refined_neighbourhoods_keep_exact_pairs_and_add_few(data, tmp_path):
    """Without the refinement, PQ-ranked candidates from 2 of 64 lists lower the neighbourhood
    means and pairs the exact path drops pass; with it, <= 2% are added, and no pair is lost
    (what is still missed are pairs the first search never proposed)."""
    x, y, config, exact = data
    approx = ApproximateConfig(index_type="ivfpqfs", nlist=64, nprobe=2, pq_m=8)

    def passing(*knn):
        return passing_rows(*knn, config=config)

    plain = select_pairs(*approximate_knn_both(x, y, 4, config=approx, work_dir=tmp_path / "plain"), config=config)
    plain_kept, added = _agreement(exact, plain.pairs())
    assert added > 0.05, (plain_kept, added)  # the drift the refinement is for

    knn = approximate_knn_both(x, y, 4, config=approx, work_dir=tmp_path / "refined", passing=passing,
                               passing_key="t")
    refined = select_pairs(*knn, config=config)
    kept, added = _agreement(exact, refined.pairs())
    assert added <= 0.02 and kept >= max(plain_kept, 0.95), (kept, added, plain_kept)
    # Refining never raises a margin: every pair it keeps scores at most what the plain run gave it.
    before = dict(zip(zip(plain.src_idx.tolist(), plain.tgt_idx.tolist()), plain.score.tolist()))
    for s, t, sc in zip(refined.src_idx.tolist(), refined.tgt_idx.tolist(), refined.score.tolist()):
        if (s, t) in before:
            assert sc <= before[(s, t)] + 1e-6


def test_refinement_resumes_from_its_checkpoint(data, tmp_path):
    """A finished refinement is read back, not searched again; another threshold refines anew."""
    x, y, config, _ = data
    approx = ApproximateConfig(index_type="ivfpqfs", nlist=64, nprobe=2, pq_m=8)
    calls = []

    def passing(*knn):
        calls.append(1)
        return passing_rows(*knn, config=config)

    first = approximate_knn_both(x, y, 4, config=approx, work_dir=tmp_path, passing=passing, passing_key="a")
    rounds = len(calls)
    assert rounds >= 2 and (tmp_path / "refined.npz").is_file()
    calls.clear()
    again = approximate_knn_both(x, y, 4, config=approx, work_dir=tmp_path, passing=passing, passing_key="a")
    assert len(calls) == 1  # only the check that nothing is left to refine
    for a, b in zip(first, again):
        assert np.array_equal(a, b)
    calls.clear()
    approximate_knn_both(x, y, 4, config=approx, work_dir=tmp_path, passing=passing, passing_key="b")
    assert len(calls) == rounds


@pytest.mark.parametrize("damaged", ["refined.npz", "fwd-rescored.npz", "trained.faiss"])
def test_a_damaged_checkpoint_is_computed_again(data, tmp_path, caplog, damaged):
    """A checkpoint truncated from outside (they are written atomically) is said and computed again,
    to the same neighbours (a helper: a truncated `fwd-rescored.npz` or `trained.faiss` was a traceback,
    exit 1, with --overwrite too, the key unchanged)."""
    x, y, config, _ = data
    approx = ApproximateConfig(index_type="ivfpqfs", nlist=64, nprobe=2, pq_m=8)

    def passing(*knn):
        return passing_rows(*knn, config=config)

    first = approximate_knn_both(x, y, 4, config=approx, work_dir=tmp_path, passing=passing, passing_key="a")
    path = tmp_path / damaged
    path.write_bytes(path.read_bytes()[:100])
    if damaged == "trained.faiss":  # (it is read only where something is left to build)
        for f in [*tmp_path.glob("*-rescored.npz"), *tmp_path.glob("*-block-*.npz"), tmp_path / "refined.npz"]:
            f.unlink()
    with caplog.at_level("WARNING"):
        again = approximate_knn_both(x, y, 4, config=approx, work_dir=tmp_path, passing=passing, passing_key="a")
    assert any(r.getMessage().startswith(f"{path}: damaged checkpoint") for r in caplog.records), caplog.text
    for a, b in zip(first, again):
        assert np.array_equal(a, b)


def test_no_threshold_refines_nothing(data):
    x, y, _, _ = data
    knn = exact_knn_both(x[:50], y[:50], 4)
    assert passing_rows(*knn, config=MiningConfig(threshold=None)) is None
    assert passing_rows(*knn, config=MiningConfig(threshold=1.0, margin="absolute")) is None


def test_sharded_refinement_reads_every_shard_then_removes_them(data, tmp_path):
    """With several index shards the refined rows see every shard's lists (the same pairs as one
    shard), and the shard files, kept for the refinement, are gone afterwards."""
    x, y, config, exact = data

    def passing(*knn):
        return passing_rows(*knn, config=config)

    def mined(shard_rows, work):
        approx = ApproximateConfig(index_type="ivfpqfs", nlist=64, nprobe=2, pq_m=8, shard_rows=shard_rows)
        return select_pairs(*approximate_knn_both(x, y, 4, config=approx, work_dir=work, passing=passing,
                                                  passing_key="t"), config=config).pairs()

    one, three = mined(None, tmp_path / "one"), mined(1500, tmp_path / "three")
    assert not list((tmp_path / "three").rglob("*-shard*.faiss"))
    assert len(one ^ three) <= 0.005 * len(exact)
    assert _agreement(exact, three)[1] <= 0.02


def test_default_shards_fit_the_memory_budget(data, tmp_path, caplog):
    """Without shard_rows the larger side is cut into as few equal shards as each fit the memory
    budget (was: one shard of the whole side whatever the budget); the search is the one at those
    shard rows given, and the shard rows are what `used` (OUT.json) records."""
    from xmine.index.choose import IndexChoice, index_fixed_bytes, index_row_bytes

    x, y, _, _ = data
    dim = x.shape[1]
    choice = IndexChoice(kind="ivf", factory="IVF64,Flat", nlist=64)
    budget = index_fixed_bytes(choice, dim) + 1600 * index_row_bytes(choice, dim)  # 1,600 of 4,000 rows
    runs = {}
    for name, extra in (("budget", {"memory_budget": budget}), ("given", {"shard_rows": 1334}), ("default", {})):
        used = {}
        approx = ApproximateConfig(index_type="ivf", nlist=64, nprobe=8, **extra)
        runs[name] = approximate_knn_both(x, y, 4, config=approx, work_dir=tmp_path / name, used=used), used
    assert runs["budget"][1]["shard_rows"] == 1334 == runs["given"][1]["shard_rows"]  # 3 equal shards
    assert runs["default"][1]["shard_rows"] == len(x)  # a quarter of this machine's memory: one shard
    for got, want in zip(runs["budget"][0], runs["given"][0]):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ConfigError, match="memory_budget"):
        ApproximateConfig(memory_budget=0)
    # a budget below the index's own lists: said, with the shards it takes instead (a helper: unsaid)
    from xmine.mining.approximate import approximate_plan

    with caplog.at_level("WARNING", logger="xmine"):
        plan = approximate_plan(ApproximateConfig(index_type="ivf", nlist=64, memory_budget=1), len(x), len(y), dim)
    assert plan["shard_rows"] == 64 and any(
        "a memory budget of 1 bytes cannot hold a shard of the IVF64,Flat index of 32 dimensions" in r.getMessage()
        and "shards of 64 rows, 63 of them" in r.getMessage() for r in caplog.records), caplog.text


def test_fast_scan_sub_quantisers_on_odd_dimensions_and_tiny_pq_m(tmp_path):
    """ivfpqfs (the --approximate default) needs an even number of sub-quantisers dividing the
    dimension: an odd dimension has none, a one-line ConfigError (a helper's 3-dimensional vectors:
    StopIteration, a traceback), and the advice for too few rows no longer names it there; --pq-m 1
    takes the smallest even divisor (was: StopIteration too)."""
    from xmine.index.build import few_rows_advice
    from xmine.index.choose import pq_subquantisers

    assert pq_subquantisers(384, 1, even=True) == 2 and pq_subquantisers(384, 64, even=True) == 64
    assert pq_subquantisers(6, 3, even=True) == 2 and pq_subquantisers(9, 3) == 3
    rng = np.random.default_rng(0)
    x = rng.standard_normal((100, 3)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    with pytest.raises(ConfigError, match="dimension 3: fast-scan PQ .* odd one has none; use --index-type ivf "):
        approximate_knn_both(x, x[::-1].copy(), 4, work_dir=tmp_path)
    # ivfpq's count named as it is (a helper: "one byte for a prime" said of 61, where ivfpq builds PQ61)
    from xmine.index.choose import pq_subquantisers

    for dim, m in ((61, 61), (67, 1), (63, 63)):
        with pytest.raises(ConfigError, match=f"or ivfpq, whose sub-quantisers must divide the dimension too: {m} here "
                                              "at --pq-m 64"):
            pq_subquantisers(dim, 64, even=True)
    plan = {"factory": "IVF4,PQ3", "nlist": 4}
    assert "ivfpqfs" not in few_rows_advice(plan, "exact mining", dim=3)
    assert "ivfpqfs" in few_rows_advice(plan, "exact mining", dim=6)
    # nor where its codes would be coarse (766 = 2 x 383: PQ2), as the run's other warning says
    assert "ivfpqfs" not in few_rows_advice(plan, "exact mining", dim=766)
    assert "ivfpqfs" in few_rows_advice(plan, "exact mining", dim=384)
    sims = approximate_knn_both(x, x[::-1].copy(), 4, config=ApproximateConfig(index_type="ivf", nlist=2),
                                work_dir=tmp_path / "ivf")[0]
    assert sims.shape == (100, 4)


def test_agreement_benchmark_counts_pairs_by_line_numbers(tmp_path):
    """benchmarks/lab/approximate_agreement.py: pairs read from `--line-numbers` outputs, the shares of
    exact's pairs kept and added; and the families' sides written from line ranges of real files."""
    from labscripts import lab_module

    bench = lab_module("approximate_agreement")

    exact, approx = tmp_path / "exact.tsv", tmp_path / "approx.tsv"
    exact.write_text("1.2\ta\tb\t1\t7\n1.1\tc\td\t2\t9\n1.05\te\tf\t3\t4\n", encoding="utf-8")
    approx.write_text("1.3\ta\tb\t1\t7\n1.1\tc\tx\t2\t8\n", encoding="utf-8")
    got = bench.agreement(bench.mined_pairs(exact), bench.mined_pairs(approx))
    assert got == {"pairs": 2, "both": 1, "only_exact": 2, "only_approximate": 1, "kept": 1 / 3, "added": 1 / 3}
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("four\n", encoding="utf-8")
    files = bench.write_side(tmp_path, [("a.txt", 2, None), ("b.txt", 1, 1)], tmp_path / "side.txt")
    assert (tmp_path / "side.txt").read_text(encoding="utf-8") == "two\nthree\nfour\n"
    assert len(files) == 2 and all(len(f["sha256"]) == 64 for f in files)


def test_settings_the_index_cannot_take_as_given_are_said(tmp_path, caplog):
    """(was: --nlist 50000 on 300 rows made IVF299, --nprobe 100 of 16 lists visited 16, --pq-m 7
    made PQ6 (7 does not divide the dimension), each without a word)"""
    import logging

    x, y = _clustered(300, dim=32, pairs=50)
    runs = [(ApproximateConfig(index_type="ivf", nlist=50_000), "--nlist 50000: 300 used"),
            (ApproximateConfig(index_type="ivf", nlist=16, nprobe=100), "--nprobe 100: 16 used"),
            (ApproximateConfig(index_type="ivfpq", nlist=4, pq_m=7), "--pq-m 7: 4 used (the sub-quantisers must "
                                                                       "divide the dimension 32)")]
    for i, (config, message) in enumerate(runs):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="xmine"):
            approximate_knn_both(x, y, 4, config=config, work_dir=tmp_path / str(i), key="k")
        assert any(r.getMessage().startswith(message) for r in caplog.records), [r.getMessage() for r in caplog.records]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="xmine"):  # what it takes as given: no word
        approximate_knn_both(x, y, 4, config=ApproximateConfig(index_type="ivf", nlist=8, nprobe=4),
                             work_dir=tmp_path / "ok", key="k")
    assert not [r for r in caplog.records if " used (" in r.getMessage()]


def test_pq_codes_the_dimension_leaves_coarse_are_said(caplog):
    """On a prime dimension PQ takes one sub-quantiser (383 dimensions a code byte), and on twice a
    prime two: said for mine --approximate and build-index, with --pq-m given or not (was: PQ1
    built without a word). A dimension with a divisor near 64 is not warned of."""
    from xmine.index.choose import choose_index
    from xmine.mining.approximate import approximate_plan

    def warned(make) -> list[str]:
        caplog.clear()
        with caplog.at_level("WARNING", logger="xmine"):
            make()
        return [r.getMessage() for r in caplog.records if "sub-quantisers up to" in r.getMessage()]

    got = warned(lambda: approximate_plan(ApproximateConfig(index_type="ivfpq"), 5000, 5000, 383))
    assert len(got) == 1 and got[0].startswith("PQ1: the dimension 383 splits into no more than 1 sub-quantisers up "
                                               "to 64") and "383 dimensions a code byte" in got[0]
    assert "--index-type ivf" in got[0]
    assert len(warned(lambda: approximate_plan(ApproximateConfig(index_type="ivfpqfs"), 5000, 5000, 766))) == 1
    assert warned(lambda: approximate_plan(ApproximateConfig(index_type="ivfpq"), 5000, 5000, 384)) == []
    assert warned(lambda: approximate_plan(ApproximateConfig(index_type="ivfpq"), 5000, 5000, 300)) == []  # (PQ60)
    assert warned(lambda: approximate_plan(ApproximateConfig(index_type="ivf"), 5000, 5000, 383)) == []
    assert len(warned(lambda: choose_index(20_000, 383, kind="ivfpq"))) == 1
    assert len(warned(lambda: choose_index(20_000, 383, kind="opq", pq_m=16))) == 1
    assert warned(lambda: choose_index(20_000, 383, kind="flat")) == []
    assert warned(lambda: choose_index(20_000, 384, kind="opq", pq_m=16)) == []


def test_an_estimated_threshold_refines_nothing_and_says_so(tmp_path, caplog):
    """(a helper: with a threshold estimated from the run, a space with no calibrated one, nothing was
    refined while OUT.json recorded refine: true) Said, and recorded as `approximate_index.refined`;
    a threshold given refines, as before."""
    import json

    from tests.clitools import ok, xm

    x, y = _clustered(800, dim=16, pairs=200, seed=3)
    for side, name in ((x, "de"), (y, "en")):
        (tmp_path / f"{name}.txt").write_text("".join(f"{name} Satz {i}\n" for i in range(len(side))), encoding="utf-8")
        np.save(tmp_path / f"{name}.npy", side)
        ok(xm("embed", tmp_path / f"{name}.txt", "--embeddings", tmp_path / f"{name}.npy", "--encoder-name", "test16",
              "--lang", name, "-q", "-o", tmp_path / f"{name}.store"))
    args = ("mine", tmp_path / "de.store", tmp_path / "en.store", "--approximate", "--index-type", "ivf", "--nlist", 8,
            "--no-lang-filter", "--no-filters", "-q")
    with caplog.at_level("WARNING", logger="xmine"):
        ok(xm(*args, "-o", tmp_path / "est.tsv"))
    refined = json.loads((tmp_path / "est.tsv.json").read_text())["approximate_index"].get("refined", "")
    assert refined.startswith("no: the threshold is estimated from the run's candidates after the search"), refined
    assert any(refined in r.getMessage() for r in caplog.records)
    ok(xm(*args, "--threshold", "1.05", "-o", tmp_path / "given.tsv"))
    assert "refined" not in json.loads((tmp_path / "given.tsv.json").read_text())["approximate_index"]
