"""Never lose a user's data (issue #12): every case through the CLI, as a user would run it.

Each refused case asserts exit status 2, the one-line error's text, no traceback, and that every
file that existed before is byte-identical afterwards (a sha256 of the whole workspace tree).
Artefacts are small and made with the fast `use-m3` encoder; me5-small only where the encoder's
tokenizer matters (truncation at 512 tokens).
"""

from __future__ import annotations

import hashlib
import json
import logging
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

from clitools import tree, untouched
from manifests import rewrite_manifest
from paused_xmine import log_of, paused_xmine
from xmine.cli import main

REPO = Path(__file__).resolve().parent.parent
N = 40  # sentences per side


# ------------------------------------------------------------------------------------- helpers


def xm(*args, env: dict | None = None):
    """Run `xmine ARGS` in-process (click's runner; stdout and stderr together in .output)."""
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def ok(res):
    assert res.exit_code == 0, res.output
    return res


def refused(res, *fragments: str) -> str:
    """Exit 2, one error line containing every fragment, no traceback."""
    out = res.output
    assert res.exit_code == 2, out
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in out and "Usage:" not in out  # one line, not click's usage block
    errors = [l for l in out.splitlines() if l.startswith("xmine: error:")]
    assert len(errors) == 1, out
    for f in fragments:
        assert f in errors[0], errors[0]
    return errors[0]


def _head(src: Path, dest: Path, n: int) -> Path:
    dest.write_text("".join(src.read_text(encoding="utf-8").splitlines(keepends=True)[:n]), encoding="utf-8")
    return dest


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Inputs and one artefact of each kind, made once through the CLI (copied by each test)."""
    d = tmp_path_factory.mktemp("made")
    de, en = _head(REPO / "demo" / "de.txt", d / "de.txt", N), _head(REPO / "demo" / "en.txt", d / "en.txt", N)
    # Line-aligned pairs for `train` from the demo's gold alignment.
    gold = [l.split("\t") for l in (REPO / "demo" / "gold.tsv").read_text().splitlines()[1:]]
    de_all = (REPO / "demo" / "de.txt").read_text(encoding="utf-8").splitlines()
    en_all = (REPO / "demo" / "en.txt").read_text(encoding="utf-8").splitlines()
    (d / "pairs.de").write_text("".join(de_all[int(a) - 1] + "\n" for a, _ in gold), encoding="utf-8")
    (d / "pairs.en").write_text("".join(en_all[int(b) - 1] + "\n" for _, b in gold), encoding="utf-8")
    ok(xm("embed", de, "--lang", "de", "--encoder", "use-m3", "--shard-rows", 16, "-q", "-o", d / "store"))
    ok(xm("build-index", en, "--lang", "en", "--encoder", "use-m3", "-o", d / "index"))
    ok(xm("train", "--method", "center", "--pairs", f"{d / 'pairs.de'}:{d / 'pairs.en'}", "--encoder", "use-m3",
          "-q", "-o", d / "proj"))
    return d


@pytest.fixture
def ws(made, tmp_path):
    """A workspace: copies of the inputs and artefacts, a foreign directory and a foreign file."""
    for name in ("de.txt", "en.txt", "pairs.de", "pairs.en", "store", "index", "proj"):
        src = made / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, tmp_path / name)
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "chapter1.tex").write_text("\\section{Results}\nsix months of work\n")
    (thesis / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "notes.txt").write_text("my notes\n")
    (tmp_path / "results").mkdir()  # what `bench report` reads: one result (written before results were sealed)
    (tmp_path / "results" / "sts.json").write_text(json.dumps(
        {"kind": "xmine-benchmark-result", "task": "sts", "table": {"columns": ["variant", "r"], "rows": [["raw", 71.5]]}}))
    return tmp_path


# ------------------------------------------- every writing command: foreign dir, file, own input

def _writers(w: Path) -> dict:
    """command -> (function of the output path -> argv, the command's own input as an output)."""
    de, en = w / "de.txt", w / "en.txt"
    return {
        "embed": (lambda o: ["embed", de, "--lang", "de", "--encoder", "use-m3", "-q", "-o", o], de),
        "build-index (text)": (lambda o: ["build-index", en, "--encoder", "use-m3", "-o", o], en),
        "build-index (store)": (lambda o: ["build-index", w / "store", "-o", o], w / "store"),
        "search": (lambda o: ["search", w / "index", de, "-o", o], de),
        "search (index)": (lambda o: ["search", w / "index", de, "-o", o], w / "index" / "sentences.txt"),
        "mine": (lambda o: ["mine", de, en, "--encoder", "use-m3", "-o", o], de),
        "mine (store)": (lambda o: ["mine", w / "store", en, "-o", o], w / "store" / "manifest.json"),
        "train": (lambda o: ["train", "--method", "center", "--pairs", f"{w / 'pairs.de'}:{w / 'pairs.en'}",
                             "--encoder", "use-m3", "-q", "-o", o], w / "pairs.de"),
        "train (into a store)": (lambda o: ["train", "--method", "center", "--pairs",
                                            f"{w / 'pairs.de'}:{w / 'pairs.en'}", "--encoder", "use-m3", "-q",
                                            "-o", o], None),
        "langid": (lambda o: ["langid", "--projection", w / "proj", de, "-o", o], de),
        "bench": (lambda o: ["bench", "sts", "--quick", "--encoder", "use-m3", "--projection", w / "proj",
                             "--out", o], w / "proj" / "config.json"),
        "plot": (lambda o: ["plot", "--encoder", "use-m3", "--projection", w / "proj", "--out", o],
                 w / "proj" / "model.safetensors"),
        "bench report": (lambda o: ["bench", "report", "--results", w / "results", "--out", o], None),
        "bench bucc": (lambda o: ["bench", "bucc", "--encoder", "use-m3", "--projection", w / "proj", "--out", o],
                       w / "proj" / "manifest.json"),
    }


WRITERS = ["embed", "build-index (text)", "build-index (store)", "search", "search (index)", "mine", "mine (store)",
           "train", "train (into a store)", "langid", "bench", "plot", "bench report", "bench bucc"]


@pytest.mark.parametrize("command", WRITERS)
def test_writer_never_touches_a_foreign_directory_a_foreign_file_or_its_input(ws, command):
    argv, own_input = _writers(ws)[command]
    with untouched(ws):
        # (For a file output click's own path check may answer first: "... is a directory".)
        refused(xm(*argv(ws / "thesis")), "thesis")
        refused(xm(*argv(ws / "notes.txt")), "notes.txt")
        if own_input is not None:
            refused(xm(*argv(own_input)), str(own_input))
        if command.startswith(("build-index", "train")) and own_input != ws / "store":
            refused(xm(*argv(ws / "store")), "store", "embedding store")  # the issue's cases


def test_build_index_replaces_its_own_index_only_with_overwrite(ws):
    with untouched(ws):
        refused(xm("build-index", ws / "en.txt", "--encoder", "use-m3", "-o", ws / "index"),
                "already exists", "--overwrite")
    before = tree(ws)
    ok(xm("build-index", ws / "de.txt", "--encoder", "use-m3", "--overwrite", "-o", ws / "index"))
    after = tree(ws)
    assert {k: v for k, v in after.items() if not k.startswith("index")} == \
           {k: v for k, v in before.items() if not k.startswith("index")}
    assert after["index/sentences.txt"] != before["index/sentences.txt"]
    assert not [k for k in after if ".old" in k or ".tmp" in k]  # nothing left beside it


def test_mine_refuses_its_own_result_without_overwrite_and_an_edited_one_always(ws):
    out = ws / "mined.tsv"
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--meta", "-o", out))
    summary = json.loads((ws / "mined.tsv.json").read_text())
    assert summary["kind"] == "mining-result" and set(summary["output_files"]) == {"mined.tsv", "mined.tsv.meta"}
    with untouched(ws):
        refused(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-o", out), "already exists")
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--overwrite", "-o", out))
    assert not (ws / "mined.tsv.meta").exists()  # the replaced result's own .meta went with it
    with open(out, "a") as f:
        f.write("my own line\n")
    with untouched(ws):
        refused(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--overwrite", "-o", out),
                "changed since xmine wrote it")
    # A result deleted by hand leaves xmine's own summary: replaced with --overwrite (was: refused
    # as "changed since xmine wrote it (move it away first)", with nothing to move)
    out.unlink()
    with untouched(ws):
        refused(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-o", out),
                "already exists (an xmine mining result, its files removed since: mined.tsv.json is left); "
                "pass --overwrite")
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--overwrite", "-o", out))
    assert out.is_file()


@pytest.mark.parametrize("sidecar", [".json", ".meta"])
def test_mine_never_replaces_a_foreign_file_beside_its_output(ws, sidecar):
    (ws / f"new.tsv{sidecar}").write_text("someone else's\n")
    with untouched(ws):
        refused(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--meta", "-o", ws / "new.tsv"),
                f"new.tsv{sidecar}", "refusing")


def test_a_second_writer_of_the_same_output_is_refused_at_once(ws):
    from xmine.artefacts.outputs import claim_output

    out = ws / "mined.tsv"
    # Another run holds the output (the lock is per open file, so this process counts as another).
    with claim_output(out, kind="mining-result", form="tsv"):
        with untouched(ws):  # (a writer that waited for the lock would never return: pytest's timeout)
            refused(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-o", out),
                    "another xmine process is writing this output")
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-o", out))  # free again
    assert not list(ws.glob(".*lock"))


def test_a_refused_artefact_names_its_kind_as_a_phrase(tmp_path):
    from xmine.artefacts.fileio import atomic_write_json
    from xmine.artefacts.outputs import claim_output
    from xmine.benchmarks.common import RESULT_KIND
    from xmine.errors import OutputError

    out = tmp_path / "tatoeba.json"
    with claim_output(out, kind=RESULT_KIND, form="json"):  # as `xmine bench` claims and writes it
        atomic_write_json(out, {"kind": RESULT_KIND, "task": "tatoeba"})
    with pytest.raises(OutputError) as e:
        with claim_output(out, kind=RESULT_KIND, form="json"):
            pass
    assert "already exists (an xmine benchmark result)" in str(e.value), e.value
    export = tmp_path / "st"
    export.mkdir()
    (export / "user.txt").write_text("a user's file")
    with pytest.raises(OutputError) as e:  # the kind of `xmine export-st`, read as a phrase
        with claim_output(export, kind="sentence-transformer-portable", form="dir"):
            pass
    assert "is not an xmine portable sentence-transformers export" in str(e.value), e.value

    # An input of another kind reads as phrases too ("is an xmine embedding store, not an xmine projection").
    from xmine.artefacts.fileio import read_manifest, write_manifest
    from xmine.errors import ArtefactError

    store = tmp_path / "store"
    store.mkdir()
    write_manifest(store, "embedding-store", {})
    with pytest.raises(ArtefactError) as e:
        read_manifest(store, "projection")
    assert str(e.value) == f"{store}: is an xmine embedding store, not an xmine projection", e.value
    (tmp_path / "nothing").mkdir()
    with pytest.raises(ArtefactError) as e:
        read_manifest(tmp_path / "nothing", ("embedding-store", "faiss-index"))
    assert "not an xmine embedding store or faiss index (no manifest.json)" in str(e.value), e.value
    with pytest.raises(ArtefactError) as e:  # (was: the same "not an xmine ..." for a path that is not there)
        read_manifest(tmp_path / "typo", "projection")
    assert str(e.value) == f"{tmp_path / 'typo'}: no such file or directory", e.value


def test_search_result_is_recognised_and_replaced_only_when_asked(ws):
    out = ws / "hits.tsv"
    ok(xm("search", ws / "index", ws / "de.txt", "-k", 3, "-o", out))
    assert len(out.read_text().splitlines()) == 3 * N
    with untouched(ws):
        refused(xm("search", ws / "index", ws / "de.txt", "-o", out), "already exists")
    ok(xm("search", ws / "index", ws / "de.txt", "-k", 2, "--overwrite", "-o", out))
    assert len(out.read_text().splitlines()) == 2 * N


# ----------------------------------------------------------------------------- bad options


BAD_OPTIONS = [
    (["mine", "{de}", "{en}", "-o", "{o}", "--threshold", "nan"], "'nan' is not a finite number"),
    (["mine", "{de}", "{en}", "-o", "{o}", "--threshold", "inf"], "'inf' is not a finite number"),
    (["mine", "{de}", "{en}", "-o", "{o}", "--max-length-ratio", "nan"], "'nan' is not a finite number"),
    (["mine", "{de}", "{en}", "-o", "{o}", "--max-length-ratio", "0.5"], "--max-length-ratio"),
    (["mine", "{de}", "{en}", "-o", "{o}", "-k", "0"], "-k"),
    (["mine", "{de}", "{en}", "-o", "{o}", "--src-lang", "xx"], "'xx' is not a known language code"),
    (["build-index", "{en}", "-o", "{o}", "--memory-budget-gb", "nan"], "'nan' is not a finite number"),
    (["build-index", "{en}", "-o", "{o}", "--memory-budget-gb", "-1"], "--memory-budget-gb"),
    (["build-index", "{en}", "-o", "{o}", "--memory-budget-gb", "0"], "--memory-budget-gb"),
    (["build-index", "{en}", "-o", "{o}", "--nlist", "0"], "--nlist"),
    (["build-index", "{en}", "-o", "{o}", "--nprobe", "-1"], "--nprobe"),
    (["build-index", "{en}", "-o", "{o}", "--pq-m", "0"], "--pq-m"),
    (["build-index", "{en}", "-o", "{o}", "--shard-rows", "0"], "--shard-rows"),
    # (was: 2048 threads crashed torch, exit 139 and no word)
    (["train", "--method", "center", "--pairs", "{de}:{en}", "-o", "{o}", "--threads", "2048"],
     "2048 is not in the range 1<=x<=1024"),
    (["search", "{index}", "{de}", "-k", "0"], "-k"),
    (["train", "--pairs", "{de}:{en}", "-o", "{o}", "--lr", "nan"], "'nan' is not a finite number"),
    (["train", "--pairs", "{de}:{en}", "-o", "{o}", "--valid-fraction", "1.5"], "--valid-fraction"),
    (["train", "--pairs", "{de}:{en}", "-o", "{o}", "--langs", "deu,klingon"], "klingon"),
    (["embed", "{de}", "--lang", "de", "-o", "{o}", "--device", "foo"], "not a torch device"),
    (["embed", "{de}", "--lang", "de", "-o", "{o}", "--device", "cuda"], "CUDA is not available"),
    (["embed", "{de}", "--lang", "zz", "-o", "{o}"], "'zz' is not a known language code"),
    # (was: read and dropped without a word)
    (["encoders", "--precision", "int8", "--prompt", "q: "], "--precision, --prompt: options of running an encoder"),
    # --keep-filtered naming a file of the output (was: "is an input", or "another xmine process is writing")
    (["mine", "{de}", "{en}", "--encoder", "use-m3", "-o", "{o}.tsv", "--keep-filtered", "{o}.tsv"],
     "it or its summary is OUT of this command"),
    (["mine", "{de}", "{en}", "--encoder", "use-m3", "-o", "{o}.tsv", "--meta", "--keep-filtered", "{o}.tsv.meta"],
     "it or its summary is OUT.meta of this command"),
    (["mine", "{de}", "{en}", "--encoder", "use-m3", "-o", "{o}", "--format", "moses", "--keep-filtered", "{o}.src"],
     "it or its summary is OUT.src of this command"),
    # the cuda product on Ray's CPU tasks (was, on a GPU machine: a failure inside every task)
    (["mine", "{de}", "{en}", "-o", "{o}.tsv", "--product", "cuda", "--ray", "127.0.0.1:1"],
     "--product cuda with --ray: Ray's tiles run as CPU tasks"),
    # a locale given twice (was: the last one kept without a word)
    (["bench", "fmda", "--fmda", "de-DE={index}", "--fmda", "de-DE={index}", "--dream", "de-DE={index}"],
     "de-DE given twice"),
    # ... in any of its codes: `de` is MASSIVE's de-DE, as bench massive reads it (was: `--fmda de=...` beside
    # `--dream de-DE=...` refused as "not the same locales")
    (["bench", "fmda", "--fmda", "de={index}", "--fmda", "deu={index}", "--dream", "de-DE={index}"],
     "de-DE given twice"),
    (["bench", "fmda", "--fmda", "pt-BR={index}", "--dream", "pt-BR={index}"], "unknown MASSIVE locale(s) pt-BR"),
    # (was: "PATH: no such file or directory", naming no option)
    (["bench", "fmda", "--fmda", "de-DE={o}", "--dream", "de-DE={index}"],
     "Invalid value for --fmda: de-DE="),
    # a file where a projection directory goes (was: "no such projection directory" for a file that exists)
    (["bench", "fmda", "--fmda", "de-DE={de}", "--dream", "de-DE={index}"],
     "de.txt: a file, not a projection directory"),
    # (was: accepted, the whole of FLORES drawn and 5000 recorded)
    (["bench", "mining", "--flores-rows", "5000", "--out", "{o}.json"], "5000 is not in the range 10<=x<=1012"),
    # click's own refusals, one line too (was: usage, a hint and the error on three lines)
    (["mine", "{de}", "-o", "{o}"], "mine: Missing argument 'TGT' (see '"),
    (["mine", "{de}", "{en}", "-o", "{o}", "--threshold", "abc"], "'abc' is not a valid float"),
    (["nope", "{de}"], "No such command 'nope'"),
    (["bench", "nope", "{de}"], "bench: No such command 'nope'"),
    (["--no-such-option", "{de}"], "No such option '--no-such-option'"),
]


@pytest.mark.parametrize("argv,fragment", BAD_OPTIONS, ids=[" ".join(a[:1] + a[-2:]) for a, _ in BAD_OPTIONS])
def test_bad_option_is_one_clear_error(ws, argv, fragment):
    if "cuda" in argv:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    paths = {"de": ws / "de.txt", "en": ws / "en.txt", "o": ws / "out", "index": ws / "index"}
    with untouched(ws):
        refused(xm(*[a.format(**paths) for a in argv]), fragment)


def test_a_long_value_in_a_message_is_cut_to_its_start_and_end(ws):
    """A 5,000-character option value in an error, or a line a warning quotes, is printed with its
    start and end and the count left out between (was: printed whole, one 5 KB line)."""
    from xmine.errors import LONG_VALUE, shortened

    value = "q" * 2000 + "z" * 3000
    error = refused(xm("mine", ws / "de.txt", ws / "en.txt", "--src-lang", value, "-o", ws / "out"),
                    "Invalid value for '--src-lang': 'qqq", "…[4,842 characters]…", "zzz' is not a known language")
    assert len(error) < 600, error
    short = "x" * (LONG_VALUE - 3)
    assert shortened(f"a '{short}' b /{short}") == f"a '{short}' b /{short}"  # up to the limit: whole
    prose = "the run's threshold " + "is kept as it was and " * 15 + "the rule's cap holds"  # (apostrophes, no quotes)
    assert shortened(prose) == prose and len(prose) > LONG_VALUE  # (a helper: cut between two possessives)
    cut = shortened(f"line 7: '{value}' is too long")
    assert cut == f"line 7: '{value[:99]}…[4,842 characters]…{value[-59:]}' is too long", cut
    assert shortened("/" + value) == "/" + value[:99] + "…[4,841 characters]…" + value[-60:]
    from xmine.cli import _ShortFormatter  # warnings, as the command line prints them

    record = logging.LogRecord("xmine", logging.WARNING, "", 0, "line 7 is cut: %r", (value,), None)
    assert _ShortFormatter("xmine: %(message)s").format(record) == \
        f"xmine: line 7 is cut: '{value[:99]}…[4,842 characters]…{value[-59:]}'"


def test_too_small_for_a_pq_index_is_one_clear_error(ws):
    with untouched(ws):
        refused(xm("build-index", ws / "en.txt", "--encoder", "use-m3", "--index-type", "ivfpq", "-o", ws / "pq"),
                "--index-type ivfpq: PQ learns 256 centroids per sub-quantiser",
                f"needs at least 256 vectors, and there are {N}", "use --index-type flat")


def test_unknown_encoder_fails_fast_offline(ws, monkeypatch):
    # Fast means: no network connection is even tried (a resolver or a hub client waiting on one
    # took 26 s offline, minutes without a network).
    import socket

    tried = []

    def no_network(*args, **kwargs):
        tried.append(args)
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    with untouched(ws):
        refused(xm("embed", ws / "de.txt", "--lang", "de", "--encoder", "no-such/encoder-xyz", "-o", ws / "e",
                   env={"HF_HUB_OFFLINE": "1"}), "no-such/encoder-xyz", "HF_HUB_OFFLINE")
        refused(xm("embed", ws / "de.txt", "--lang", "de", "--encoder", "./no/such/folder", "-o", ws / "e"),
                "no such model folder")
    assert not tried, tried


# --------------------------------------------------------------------------- damaged artefacts


def _reorder_rows(npy: Path) -> None:
    """Rows reversed in place: the same size and shape, other content."""
    a = np.load(npy)
    np.save(npy, a[::-1].copy())


def test_a_shard_changed_in_place_is_caught_before_anything_is_written(ws):
    _reorder_rows(ws / "store" / "emb-00001.npy")
    with untouched(ws):
        refused(xm("mine", ws / "store", ws / "en.txt", "-o", ws / "m.tsv"), "emb-00001.npy", "sha256")
        refused(xm("embed", ws / "de.txt", "--lang", "de", "--encoder", "use-m3", "--shard-rows", 16, "-q",
                   "-o", ws / "store"), "emb-00001.npy", "--overwrite")
        refused(xm("verify", ws / "store"), "emb-00001.npy")
    ok(xm("verify", ws / "index", ws / "proj"))


def test_a_large_store_is_checked_on_first_read(ws, monkeypatch):
    # Above VERIFY_ON_OPEN_BYTES a store is not hashed on open but shard by shard as it is read.
    from xmine.artefacts import fileio

    monkeypatch.setattr(fileio, "VERIFY_ON_OPEN_BYTES", 0)
    _reorder_rows(ws / "store" / "emb-00002.npy")
    from xmine.store import EmbeddingStore

    store = EmbeddingStore.open(ws / "store")  # opens: sizes and shapes are fine
    rows = store.rows()
    rows[0:8]  # shard 0 is intact
    with pytest.raises(Exception, match="emb-00002.npy: content differs"):
        rows[:]
    with untouched(ws):
        refused(xm("build-index", ws / "store", "-o", ws / "ix2"), "emb-00002.npy")


@pytest.mark.parametrize("damage", ["line_numbers truncated", "faiss shard garbled", "sentences not UTF-8",
                                    "faiss shard garbled (manifest with no sums)"])
def test_a_damaged_index_is_one_clear_error(ws, damage):
    ix = ws / "index"
    if damage.startswith("line_numbers"):
        target = ix / "line_numbers.npy"
        target.write_bytes(target.read_bytes()[:-16])
    elif damage.startswith("faiss"):
        target = ix / "shard_00000.faiss"
        data = bytearray(target.read_bytes())
        data[:64] = b"\x00" * 64
        target.write_bytes(bytes(data))
        if "no sums" in damage:  # a manifest that records no sums is damaged itself
            rewrite_manifest(ix / "manifest.json", lambda m: m.pop("files"))
            target = ix / "manifest.json"
    else:
        target = ix / "sentences.txt"
        target.write_bytes(b"\xff\xfe" + target.read_bytes())
    with untouched(ws):
        err = refused(xm("search", ix, ws / "de.txt", "-o", ws / "hits.tsv"), target.name)
        assert any(w in err for w in ("damaged", "differs from the manifest", "unreadable", "missing field")), err


def test_damaged_store_files_are_one_clear_error(ws):
    lines = ws / "store" / "line_numbers.npy"
    lines.write_bytes(b"\x93NUMPY garbage")
    with untouched(ws):
        refused(xm("mine", ws / "store", ws / "en.txt", "-o", ws / "m.tsv"), "line_numbers.npy")


@pytest.mark.parametrize("damage", ["a tile garbled", "a tile missing"])
def test_a_damaged_mining_checkpoint_is_recomputed(ws, damage, caplog):
    args = ["mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--block-rows", 8, "--keep-work"]
    ok(xm(*args, "-o", ws / "first.tsv"))
    first = (ws / "first.tsv").read_bytes()
    knn = ws / "first.tsv.work" / "knn"
    tile = sorted(knn.glob("tile_*.npz"))[0]
    if damage.endswith("garbled"):
        tile.write_bytes(b"PK\x03\x04 not a zip")
    else:
        tile.unlink()
    ok(xm(*args, "--overwrite", "-o", ws / "first.tsv"))
    assert tile.exists()  # computed again
    # (pytest's log capture takes the warnings the CLI prints to stderr otherwise)
    assert ("damaged mining checkpoint" in caplog.text and "recomputing" in caplog.text) == damage.endswith("garbled")
    assert (ws / "first.tsv").read_bytes() == first


def test_an_unfinished_store_says_so_and_a_store_without_manifest_is_rebuilt_with_overwrite(ws):
    bad = ws / "bad.txt"
    lines = (ws / "de.txt").read_bytes().splitlines(keepends=True)
    bad.write_bytes(b"".join(lines[:30]) + b"\xff\xfe broken\n" + b"".join(lines[30:]))
    res = xm("embed", bad, "--lang", "de", "--encoder", "use-m3", "--shard-rows", 10, "-q", "-o", ws / "half")
    refused(res, "bad.txt:31", "invalid UTF-8")
    with untouched(ws):
        refused(xm("mine", ws / "half", ws / "en.txt", "-o", ws / "m.tsv"), "unfinished embedding store",
                "run the same command again")
    (ws / "store" / "manifest.json").unlink()
    with untouched(ws):
        refused(xm("embed", ws / "de.txt", "--lang", "de", "--encoder", "use-m3", "--shard-rows", 16, "-q",
                   "-o", ws / "store"), "no manifest.json", "--overwrite")
    ok(xm("embed", ws / "de.txt", "--lang", "de", "--encoder", "use-m3", "--shard-rows", 16, "-q", "--overwrite",
          "-o", ws / "store"))
    ok(xm("verify", ws / "store"))



def test_a_store_directory_without_manifest_or_marker_is_not_taken_for_a_store(ws):
    # (what an interrupted run of an older xmine, before the marker, left): refused, never cleared
    for name in ("manifest.json", ".xmine-output.json"):
        (ws / "store" / name).unlink()
    with untouched(ws):
        refused(xm("embed", ws / "de.txt", "--lang", "de", "--encoder", "use-m3", "--shard-rows", 16, "-q",
                   "--overwrite", "-o", ws / "store"), "store: exists and is not an xmine embedding store")

# ------------------------------------------------------------------------------ input handling


def test_cr_only_line_ends_are_line_breaks(ws):
    mac = ws / "mac.txt"
    mac.write_bytes("\r".join(f"Satz Nummer {i} steht hier." for i in range(50)).encode() + b"\r")
    ok(xm("embed", mac, "--lang", "de", "--encoder", "use-m3", "-q", "-o", ws / "mac"))
    m = json.loads((ws / "mac" / "manifest.json").read_text())
    assert m["count"] == 50 and m["input"]["lines"] == 50
    assert (ws / "mac" / "sentences.txt").read_text().splitlines()[49] == "Satz Nummer 49 steht hier."


def test_text_cut_at_the_encoders_token_limit_is_counted_and_reported(ws, me5, caplog):
    # me5-small sees 512 tokens: two long Japanese lines that differ only at the end get one vector.
    long = "東京の天気はとても良いです。" * 90  # ~640 tokens, 1,260 characters (under --max-chars)
    f = ws / "long.txt"
    f.write_text(f"Kurzer Satz.\n{long}A\n{long}B\n", encoding="utf-8")
    ok(xm("embed", f, "--lang", "ja", "-q", "-o", ws / "long"))
    assert "2 line(s) longer than the encoder's 512 tokens" in caplog.text and "lines 2, 3" in caplog.text
    m = json.loads((ws / "long" / "manifest.json").read_text())
    assert m["input_stats"]["token_cut_lines"] == 2


def test_center_subtracts_the_known_languages_mean(ws):
    from xmine.disentangle import load_projection
    from xmine.encoders import load_encoder

    for lang in ("de", "en"):
        ok(xm("embed", ws / "de.txt", "--lang", lang, "--encoder", "use-m3", "--projection", ws / "proj",
              "--dtype", "float32", "-q", "-o", ws / f"c-{lang}"))
    proj = load_projection(ws / "proj")
    raw = load_encoder("use-m3").encode((ws / "de.txt").read_text(encoding="utf-8").splitlines())
    for lang, code in (("de", "deu"), ("en", "eng")):
        mean = proj.model.language_means.numpy()[proj.languages.index(code)]
        want = (raw - mean) / np.linalg.norm(raw - mean, axis=1, keepdims=True)
        got = np.load(ws / f"c-{lang}" / "emb-00000.npy")
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_language_codes_compare_normalised_and_k_is_recorded_as_used(ws):
    out = ws / "m.tsv"
    ok(xm("mine", ws / "store", ws / "en.txt", "--src-lang", "deu", "--tgt-lang", "eng_Latn", "-k", 100, "-o", out))
    summary = json.loads((ws / "m.tsv.json").read_text())
    assert summary["provenance"]["parameters"]["k"] == 100 and summary["k_used"] == N
    # one side smaller than k: the other side's sentences have that many neighbours, its own have k
    (ws / "five.txt").write_text("".join((ws / "en.txt").read_text(encoding="utf-8").splitlines(True)[:5]))
    ok(xm("mine", ws / "store", ws / "five.txt", "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3",
          "-k", 8, "--threshold", "none", "-o", ws / "m5.tsv"))
    small = json.loads((ws / "m5.tsv.json").read_text())
    assert small["k_used"] == 5 and small["k_used_per_side"] == {"src": 5, "tgt": 8}
    with untouched(ws):
        refused(xm("mine", ws / "store", ws / "en.txt", "--src-lang", "fr", "-o", ws / "m2.tsv"),
                "holds language 'de', but the language given for it is 'fr'")


def test_train_restores_torchs_thread_count(ws):
    import torch

    torch.set_num_threads(2)
    ok(xm("train", "--method", "seed", "--pairs", f"{ws / 'pairs.de'}:{ws / 'pairs.en'}", "--encoder", "use-m3",
          "--threads", 1, "--max-epochs", 1, "-q", "-o", ws / "p2"))
    assert torch.get_num_threads() == 2


def test_train_refuses_another_runs_checkpoint_before_it_embeds(ws, monkeypatch):
    """A checkpoint `train` would refuse (other settings, or this run trained beyond --max-epochs) is
    refused before any sentence is embedded (was: after embedding all of them, hours on a large
    corpus); the projection and its checkpoint are left as they were."""
    from xmine.disentangle import trainer

    train = ("train", "--method", "seed", "--pairs", f"{ws / 'pairs.de'}:{ws / 'pairs.en'}", "--encoder", "use-m3",
             "-q", "-o", ws / "p")
    ok(xm(*train, "--max-epochs", 2))
    embedded = []
    real = trainer.cached_encode
    monkeypatch.setattr(trainer, "cached_encode", lambda *a, **k: embedded.append(1) or real(*a, **k))
    with untouched(ws / "p"):
        refused(xm(*train, "--max-epochs", 2, "--lr", "0.001", "--overwrite"),
                "holds a run with other settings or data", "config.lr")
        refused(xm(*train, "--max-epochs", 1, "--overwrite"), "trained for 2 epochs, more than --max-epochs 1")
    assert embedded == []
    ok(xm(*train, "--max-epochs", 3, "--overwrite"))  # its own run resumes (and embeds)
    assert embedded == [1]


def test_train_overwrite_replaces_a_projection_whole_and_never_the_shipped_one(ws, monkeypatch):
    """`train --overwrite` over a projection that came with a SHIPPED.json (a copy of the shipped
    one) removes it (was: kept and listed in the new manifest, so `mine` used the old projection's
    thresholds on the new one); a replacement stopped before its manifest leaves an unfinished
    projection that readers refuse and `train` finishes (was: new weights under the old manifest);
    an output inside the shipped projections is refused, --overwrite or not."""
    from xmine.disentangle import projection as projection_module
    from xmine.encoders.projection import SHIPPED_INFO, SHIPPED_ROOT

    pairs = f"{ws / 'pairs.de'}:{ws / 'pairs.en'}"
    train = ("train", "--method", "seed", "--pairs", pairs, "--encoder", "use-m3", "--max-epochs", 1, "-q")
    shutil.copytree(SHIPPED_ROOT / "me5-small", ws / "pinned")
    ok(xm(*train, "-o", ws / "pinned", "--overwrite"))
    assert not (ws / "pinned" / SHIPPED_INFO).exists()
    assert SHIPPED_INFO not in json.loads((ws / "pinned" / "manifest.json").read_text())["files"]
    ok(xm("verify", ws / "pinned"))

    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    # (this process's handler as a program's own is: earlier tests leave Ray's driver's, which ends it)
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        monkeypatch.setattr(projection_module, "write_projection_manifest", terminated)
        assert xm(*train, "--max-epochs", 2, "-o", ws / "pinned", "--overwrite").exit_code == 143
        # A program that embeds xmine with a SIGTERM handler of its own (Ray's driver): a Ctrl-C after
        # the SIGTERM above is said as Ctrl-C (was: exit 143, the earlier command's SIGTERM remembered)
        monkeypatch.setattr(projection_module, "write_projection_manifest", interrupted)
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        assert xm(*train, "--max-epochs", 2, "-o", ws / "pinned", "--overwrite").exit_code == 130
    finally:
        signal.signal(signal.SIGTERM, before)
    monkeypatch.undo()
    refused(xm("verify", ws / "pinned"), "an unfinished xmine projection")
    refused(xm("mine", ws / "de.txt", ws / "en.txt", "--projection", ws / "pinned", "-o", ws / "m.tsv"),
            "an unfinished xmine projection")
    ok(xm(*train, "--max-epochs", 2, "-o", ws / "pinned"))  # resumed and finished, without --overwrite
    ok(xm("verify", ws / "pinned"))

    for target in (SHIPPED_ROOT / "me5-small", SHIPPED_ROOT / "me5-small" / "mine"):
        with untouched(SHIPPED_ROOT):
            refused(xm(*train, "-o", target, "--overwrite"), "lies inside the projections shipped with xmine")


@pytest.mark.slow
def test_a_full_disk_is_one_clear_error(ws):
    # A real ENOSPC: a 256 KiB tmpfs in a private mount namespace, filled before mining into it.
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1)")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user namespaces are not allowed here")
    full = ws / "full"
    full.mkdir()
    xmine = [sys.executable, "-m", "xmine.cli"]
    script = (f"mount -t tmpfs -o size=256k tmpfs {full} && "
              f"(dd if=/dev/zero of={full}/filler bs=4k 2>/dev/null; true) && "
              f"{' '.join(xmine)} mine {ws / 'de.txt'} {ws / 'en.txt'} --encoder use-m3 -o {full}/m.tsv; "
              f"echo rc=$?; ls -a {full}")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    with untouched(ws):  # the tmpfs lives in the namespace only: nothing appears here
        res = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env,
                             timeout=120)
    assert "rc=2" in res.stdout, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    errors = [l for l in res.stderr.splitlines() if l.startswith("xmine: error:")]
    assert len(errors) == 1 and "no space left on device" in errors[0], res.stderr
    assert "m.tsv" in errors[0]
    listing = res.stdout.split("rc=2", 1)[1].split()
    assert sorted(listing) == [".", "..", "filler"], listing  # no partial output, no lock left


def _store_with_a_nan_row(path: Path, row: int) -> Path:
    """A store whose shard holds NaN at `row` with a consistent manifest (as another tool, or a
    diverged projection's output, could write it; xmine's own writer refuses such rows)."""
    from xmine.store import StoreWriter

    x = np.random.default_rng(0).standard_normal((40, 8)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    with StoreWriter(path, encoder={"name": "synthetic-8", "dim": 8, "id": "syn8"}, lang="en", dim=8) as w:
        w.add(x, [f"s{i}" for i in range(40)])
    shard = path / "emb-00000.npy"
    rows = np.load(shard)
    rows[row, 3] = np.nan
    np.save(shard, rows)
    rewrite_manifest(path / "manifest.json", lambda m: m["shards"][0].update(
        bytes=shard.stat().st_size, sha256=hashlib.sha256(shard.read_bytes()).hexdigest()))
    return path


def test_the_store_writer_refuses_a_non_finite_row(tmp_path):
    from xmine.errors import ConfigError
    from xmine.store import StoreWriter

    x = np.ones((3, 8), np.float32)
    x[1, 0] = 1e6  # finite in float32, inf in the store's float16
    with pytest.raises(ConfigError, match="embedding 1 of this batch is not finite"):
        with StoreWriter(tmp_path / "s", encoder={"name": "synthetic-8", "dim": 8, "id": "syn8"}, lang="en",
                         dim=8) as w:
            w.add(x, ["a", "b", "c"])


@pytest.mark.parametrize("search", [[], ["--approximate"]], ids=["exact", "approximate"])
def test_a_non_finite_row_is_one_error_naming_store_row_and_line(tmp_path, search):
    a = _store_with_a_nan_row(tmp_path / "a", 7)
    b = _store_with_a_nan_row(tmp_path / "b", 0)
    np.save(b / "emb-00000.npy", np.nan_to_num(np.load(b / "emb-00000.npy")) + np.eye(40, 8, dtype=np.float16))
    shard = b / "emb-00000.npy"
    rewrite_manifest(b / "manifest.json", lambda m: m["shards"][0].update(
        bytes=shard.stat().st_size, sha256=hashlib.sha256(shard.read_bytes()).hexdigest()))
    with untouched(tmp_path):
        # (--no-pre-clean: the synthetic sentences "s0".."s39" are near-duplicates of one another)
        refused(xm("mine", b, a, "-o", tmp_path / "m.tsv", "--no-pre-clean", *search),
                f"{a}: embedding row 7 (input line 8)",
                "not finite")


# ------------------------------------------------------------- ship_projection's result JSONs


def _ship_projection(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / "lab" / "run.py"), "ship-projection", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def _one_line_refusal(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [l for l in proc.stderr.splitlines() if l.startswith("lab: error:")]
    assert len(errors) == 1, proc.stderr
    for f in fragments:
        assert f in errors[0], errors[0]


@pytest.mark.parametrize("how", [["--recalibrate", "--calibration-out"], ["--raw-only", "--evaluate"]])
def test_ship_projection_refuses_a_foreign_result_path_before_any_work(tmp_path, data_dir, how):
    """--calibration-out / --evaluate naming a file that is not an xmine result: refused at once,
    the file, the workspace and the shipped projection untouched (SHIPPED.json is not rewritten)."""
    foreign = tmp_path / "notes.json"
    foreign.write_text('{"mine": "not xmine\'s"}\n', encoding="utf-8")
    shipped = REPO / "xmine" / "projections" / "me5-small"
    with untouched(tmp_path), untouched(shipped):
        proc = _ship_projection(*how, foreign, "--data-dir", data_dir)
    _one_line_refusal(proc, str(foreign))


def test_ship_projection_calibration_out_needs_a_calibration(tmp_path, data_dir):
    with untouched(tmp_path):
        proc = _ship_projection("--calibration-out", tmp_path / "cal.json", "--data-dir", data_dir)
    _one_line_refusal(proc, "--calibration-out needs --install or --recalibrate")


# ------------------------------------------- what --overwrite and a rerun may delete (issue #23)


def _numbered(src: Path, dest: Path, n: int) -> Path:
    """`n` distinct lines made from `src`'s (enough work that a run can be interrupted midway)."""
    lines = src.read_text(encoding="utf-8").splitlines()
    dest.write_text("".join(f"{lines[i % len(lines)]} ({i})\n" for i in range(n)), encoding="utf-8")
    return dest


def test_build_index_overwrite_never_deletes_files_put_into_the_index(ws):
    with untouched(ws):
        refused(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-o", ws / "index" / "out.tsv"),
                "lies inside the xmine index")
    (ws / "index" / "NOTES.md").write_text("my notes\n")
    with untouched(ws):
        refused(xm("build-index", ws / "en.txt", "--encoder", "use-m3", "--overwrite", "-o", ws / "index"),
                "NOTES.md", "not part of the xmine index")
    (ws / "index" / "NOTES.md").unlink()
    ok(xm("build-index", ws / "de.txt", "--encoder", "use-m3", "--overwrite", "-o", ws / "index"))
    ok(xm("verify", ws / "index"))


def test_a_finished_embed_run_again_keeps_files_the_user_added(ws):
    for name in (".gitattributes", "text-notes.txt", "lines-todo.npy", "emb-old.npy", ".x.tmp.npy"):
        (ws / "store" / name).write_text("mine\n")
    with untouched(ws):
        res = ok(xm("embed", ws / "de.txt", "--lang", "de", "--encoder", "use-m3", "--shard-rows", 16, "-o",
                    ws / "store"))
    assert "already" in res.output


def test_embed_overwrite_never_deletes_files_put_into_the_store(ws):
    (ws / "store" / "README.txt").write_text("how I made it\n")
    (ws / "store" / "analysis").mkdir()
    (ws / "store" / "analysis" / "plot.csv").write_text("x,y\n")
    with untouched(ws):
        refused(xm("embed", ws / "de.txt", "--lang", "de", "--encoder", "use-m3", "--dtype", "float32",
                   "--overwrite", "-q", "-o", ws / "store"), "README.txt", "analysis", "not part of the embedding store")


def test_a_file_put_into_the_store_while_its_replacement_is_built_is_never_deleted(ws, monkeypatch):
    """(a helper: checked at the start only, so a file put there during an hour's rebuild went with
    the old store at the swap)"""
    import xmine.store.writer as writer

    encode = writer._encode_shards

    def encode_then_a_user_writes(*a, **k):
        encode(*a, **k)
        (ws / "store" / "notes.txt").write_text("written while it ran\n")

    monkeypatch.setattr(writer, "_encode_shards", encode_then_a_user_writes)
    args = ["embed", ws / "de.txt", "--lang", "de", "--encoder", "use-m3", "--dtype", "float32", "--overwrite",
            "-q", "-o", ws / "store"]
    refused(xm(*args), "store: holds files that are not part of the embedding store (notes.txt)",
            "the new store is kept in .store.xmine-rebuild")
    assert (ws / "store" / "notes.txt").read_text() == "written while it ran\n"
    monkeypatch.undo()
    (ws / "store" / "notes.txt").rename(ws / "notes-moved.txt")
    ok(xm(*args))  # the same command again: the finished replacement put in place
    assert json.loads((ws / "store" / "manifest.json").read_text())["dtype"] == "float32"
    assert not (ws / ".store.xmine-rebuild").exists()
    ok(xm("verify", ws / "store"))


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_an_interrupted_embed_overwrite_leaves_the_old_store_whole(tmp_path, sig):
    big = _numbered(REPO / "demo" / "de.txt", tmp_path / "big.txt", 2000)
    store = tmp_path / "store"
    args = ["embed", big, "--lang", "de", "--encoder", "use-m3", "--shard-rows", 50, "-q", "-o", store]
    ok(xm(*args))
    before = tree(store)
    # stopped as the rebuild's progress is saved the 3rd time: two shards written beside the old store
    with paused_xmine("xmine.store.resume:Progress.save", 3, *args, "--dtype", "float32", "--overwrite") as proc:
        assert (tmp_path / ".store.xmine-rebuild" / "emb-00001.npy").is_file()
        proc.send_signal(sig)
        proc.wait(timeout=60)
        assert proc.returncode == (-9 if sig == signal.SIGKILL else 130), log_of(proc)
    assert tree(store) == before  # the old store, whole
    ok(xm("verify", store))
    ok(xm("mine", store, store, "--allow-same-input", "-o", tmp_path / "m.tsv"))
    ok(xm(*args, "--dtype", "float32", "--overwrite"))  # resumes the rebuild, then swaps it in
    assert json.loads((store / "manifest.json").read_text())["dtype"] == "float32"
    ok(xm("verify", store))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt", "m.tsv", "m.tsv.json", "store"]


@pytest.mark.parametrize("companion", [".meta", ".work"])
def test_mine_overwrite_never_deletes_a_foreign_file_beside_its_result(ws, companion):
    out = ws / "m.tsv"
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-o", out))
    foreign = ws / f"m.tsv{companion}"
    if companion == ".work":
        foreign.mkdir()
        (foreign / "results.csv").write_text("a,b\n")
    else:
        foreign.write_text("someone else's\n")
    with untouched(ws):
        refused(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--overwrite", "-o", out),
                f"m.tsv{companion}", "not part of the xmine mining result")


def test_a_failed_mine_overwrite_keeps_the_old_result(ws):
    out = ws / "m.tsv"
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--meta", "-o", out))
    bad = ws / "bad.txt"
    bad.write_bytes((ws / "en.txt").read_bytes() + b"\xff\xfe broken\n")
    before = tree(ws)
    refused(xm("mine", ws / "de.txt", bad, "--encoder", "use-m3", "--overwrite", "-o", out), "bad.txt", "UTF-8")
    after = tree(ws)
    assert {k: after.get(k) for k in before} == before  # (the work done, in m.tsv.work/, is kept)
    ok(xm("verify", out))
    with untouched(ws):
        refused(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-o", out), "already exists")


@pytest.mark.slow
def test_an_interrupted_mine_overwrite_keeps_the_old_result(tmp_path):
    de = _numbered(REPO / "demo" / "de.txt", tmp_path / "de.txt", 1500)
    en = _numbered(REPO / "demo" / "en.txt", tmp_path / "en.txt", 1500)
    out = tmp_path / "m.tsv"
    ok(xm("mine", de, en, "--encoder", "use-m3", "--meta", "-o", out))
    before = {k: v for k, v in tree(tmp_path).items()}
    # stopped as progress is saved the 4th time: the source side embedded, the target's store begun
    with paused_xmine("xmine.store.resume:Progress.save", 4, "mine", de, en, "--encoder", "use-m3", "-k", 2,
                      "--overwrite", "-o", out) as proc:
        assert (tmp_path / "m.tsv.work" / "src" / "store" / "manifest.json").is_file()
        assert (tmp_path / "m.tsv.work" / "tgt" / "store" / "progress.json").is_file()
        proc.kill()
        proc.wait(timeout=60)
        assert proc.returncode == -9
    after = tree(tmp_path)
    assert {k: after.get(k) for k in before} == before  # every earlier file, byte-identical
    ok(xm("verify", out))
    assert (tmp_path / ".m.tsv.lock").read_text() == "xmine output lock\n"  # the killed run's, removed next
    refused(xm("mine", de, en, "--encoder", "use-m3", "-o", out), "already exists", "--overwrite")
    after = tree(tmp_path)
    assert {k: after.get(k) for k in before} == before
    ok(xm("mine", de, en, "--encoder", "use-m3", "-k", 2, "--overwrite", "-o", out))
    assert json.loads((tmp_path / "m.tsv.json").read_text())["provenance"]["parameters"]["k"] == 2
    assert not (tmp_path / "m.tsv.meta").exists()  # the replaced result's .meta went with it
    ok(xm("verify", out))


def test_two_fields_or_columns_of_one_file_are_two_sides(ws):
    """(a helper: a JSON Lines file's `de` and `en` fields, or a TSV's two columns, given as SRC and
    TGT were refused "every sentence would be mined with itself", which --allow-same-input showed
    false: 100 of 100 pairs.) One file read the same way twice is still refused."""
    de, en = ((ws / f"{lang}.txt").read_text(encoding="utf-8").splitlines() for lang in ("de", "en"))
    (ws / "two.jsonl").write_text("".join(json.dumps({"de": d, "en": e}) + "\n" for d, e in zip(de, en)),
                                  encoding="utf-8")
    (ws / "two.tsv").write_text("".join(f"{d}\t{e}\n" for d, e in zip(de, en)), encoding="utf-8")
    ok(xm("mine", ws / "two.jsonl", ws / "two.jsonl", "--src-text-field", "de", "--tgt-text-field", "en",
          "--encoder", "use-m3", "-o", ws / "j.tsv"))
    ok(xm("mine", ws / "two.tsv", ws / "two.tsv", "--input-format", "tsv", "--src-text-field", "1",
          "--tgt-text-field", "2", "--encoder", "use-m3", "-o", ws / "t.tsv"))
    assert (ws / "j.tsv").read_text(encoding="utf-8") and (ws / "j.tsv").read_bytes() == (ws / "t.tsv").read_bytes()
    for same in (("--text-field", "de"), ("--src-text-field", "en", "--tgt-text-field", "en"),
                 ("--text-field", "de", "--tgt-input-format", "jsonl")):  # (a format named or detected: one)
        refused(xm("mine", ws / "two.jsonl", ws / "two.jsonl", *same, "--encoder", "use-m3", "-o", ws / "x.tsv"),
                "given as both SRC and TGT")
    (ws / "named.tsv").write_text("de\ten\n" + (ws / "two.tsv").read_text(encoding="utf-8"), encoding="utf-8")
    refused(xm("mine", ws / "named.tsv", ws / "named.tsv", "--input-format", "tsv", "--header", "--src-text-field",
               "1", "--tgt-text-field", "de", "--encoder", "use-m3", "-o", ws / "x.tsv"),  # (a column by number, by name)
            "given as both SRC and TGT")


def test_a_language_an_artefact_contradicts_is_refused_before_anything_is_written(ws):
    """(a helper: refused when the store was loaded, after the text side was encoded, leaving
    OUT.json and OUT.work/ behind.) An index made without a language (`und`) takes the one given
    (was: refused every --tgt-lang, 'holds language und')."""
    with untouched(ws):
        refused(xm("mine", ws / "en.txt", ws / "store", "--src-lang", "en", "--tgt-lang", "fr", "--encoder", "use-m3",
                   "-o", ws / "m.tsv"), "embedding store", "holds language 'de', but the language given for it is 'fr'")
        refused(xm("mine", ws / "index", ws / "de.txt", "--src-lang", "fr", "-o", ws / "m.tsv"),
                "index", "holds language 'en'")
        refused(xm("score", "--src", ws / "pairs.de", "--tgt", ws / "pairs.en", "--src-lang", "de", "--tgt-lang", "en",
                   "--tgt-corpus", ws / "store", "--encoder", "use-m3", "-o", ws / "s.tsv"),  # (was: both sides
                "embedding store", "holds language 'de', but the language given for it is 'en'")  # encoded, left)
    ok(xm("build-index", ws / "en.txt", "--encoder", "use-m3", "-o", ws / "und", "-q"))
    assert json.loads((ws / "und" / "manifest.json").read_text())["lang"] == "und"
    ok(xm("mine", ws / "de.txt", ws / "und", "--src-lang", "de", "--tgt-lang", "en", "-o", ws / "u.tsv", "-q"))
    assert json.loads((ws / "u.tsv.json").read_text())["filters"]["languages"] == ["de", "en"]


def test_an_explicit_language_filter_takes_the_languages_stores_record(ws):
    """(a helper: `mine s_de/ s_en/ --lang-filter` refused, "give --src-lang and --tgt-lang", where
    the default turned the filter on with the stores' languages)"""
    ok(xm("mine", ws / "store", ws / "index", "--lang-filter", "-o", ws / "lf.tsv", "-q"))
    summary = json.loads((ws / "lf.tsv.json").read_text())
    assert summary["lang_filter"]["source"] == "--lang-filter"
    # the languages mined as recorded, as score records them (a regression pass: null, as given)
    assert (summary["provenance"]["parameters"]["src_lang"], summary["provenance"]["parameters"]["tgt_lang"]) == \
        ("de", "en")
    refused(xm("mine", ws / "store", ws / "en.txt", "--lang-filter", "--encoder", "use-m3", "-o", ws / "x.tsv"),
            "--lang-filter needs the language of each side: give --tgt-lang")


def test_the_pairs_the_length_ratio_bound_drops_are_counted(ws):
    """(a helper: --max-length-ratio 1.1 took 72 of 133 pairs, counted nowhere, and OUT.json showed
    only the pair filter's bound 3.0)"""
    res = ok(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--max-length-ratio", "1.1", "-o",
                ws / "r.tsv"))
    record = json.loads((ws / "r.tsv.json").read_text())["max_length_ratio"]
    assert record["bound"] == 1.1 and record["candidates_dropped"] > 0
    assert f"; {record['candidates_dropped']:,} candidate pairs over --max-length-ratio 1.1 dropped before " \
           "matching" in res.output
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-o", ws / "n.tsv", "-q"))
    assert "max_length_ratio" not in json.loads((ws / "n.tsv.json").read_text())


def test_an_empty_directory_made_for_an_output_is_refused_with_what_to_do(ws):
    """(a helper: `mkdir out; mine ... -o out --format hf` was told to "choose another output file")"""
    (ws / "out").mkdir()
    for args in (("--format", "hf"), ("--format", "tsv"), ()):
        refused(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-o", ws / "out", *args),
                f"{ws / 'out'}: exists, an empty directory; refusing to replace it (xmine creates an output, a dataset "
                "folder too: remove it, or name one that does not exist)")
    assert (ws / "out").is_dir() and not any((ws / "out").iterdir()) and not (ws / "out.json").exists()


def test_an_output_written_with_a_trailing_slash_is_a_dataset_folder(ws):
    """(a helper: `-o newdir/` wrote a TSV file named newdir, the slash dropped without a word)"""
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-o", f"{ws / 'newdir'}/", "-q"))
    assert (ws / "newdir").is_dir() and json.loads((ws / "newdir.json").read_text())["format"] == "hf"
    for args in (("mine", ws / "de.txt", ws / "en.txt"), ("score", "--src", ws / "pairs.de", "--tgt", ws / "pairs.en")):
        refused(xm(*args, "--encoder", "use-m3", "-o", f"{ws / 'other'}/", "--format", "jsonl"),
                "other/: names a directory (a trailing '/'), but --format jsonl writes a file")
    assert not (ws / "other").exists()


def test_the_meta_of_a_store_side_names_the_file_its_line_is_of(ws, made):
    """(a helper: `--meta` named the store directory with a line number of its input file, where the
    JSON Lines rows name the file)"""
    ok(xm("mine", ws / "store", ws / "en.txt", "--encoder", "use-m3", "--meta", "-o", ws / "m.tsv", "-q"))
    cells = [line.split("\t") for line in (ws / "m.tsv.meta").read_text(encoding="utf-8").splitlines()]
    assert cells and all(src.startswith(f"{made / 'de.txt'}:") and tgt.startswith(f"{ws / 'en.txt'}:")
                         for _, src, tgt in cells), cells[:2]


def test_a_file_named_like_the_lock_is_left_alone(ws):
    lock = ws / ".lockt.tsv.lock"
    lock.write_text("my file\n")
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-o", ws / "lockt.tsv"))
    assert lock.read_text() == "my file\n"


def test_mining_a_side_against_itself_needs_allow_same_input(ws, caplog):
    with untouched(ws):
        refused(xm("mine", ws / "de.txt", ws / "de.txt", "--encoder", "use-m3", "-o", ws / "m.tsv"),
                "given as both SRC and TGT", "--allow-same-input")
        refused(xm("mine", ws / "store", ws / "store/", "-o", ws / "m.tsv"), "--allow-same-input")
    caplog.set_level("INFO", logger="xmine")
    ok(xm("mine", ws / "de.txt", ws / "de.txt", "--encoder", "use-m3", "--allow-same-input", "-o", ws / "m.tsv"))
    assert "--allow-same-input" in ok(xm("mine", "--help")).output
    # every sentence is a copy of the other side's: the cleaning removes them, and says so (was: a note
    # about "0 distinct sentences, fewer than k" and a threshold read off a share of no candidates)
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"the pre-search cleaning removed every sentence of the source and target sides "
                            f"(source: {N} by copies; target: {N} by copies): each is also on the other side")
               for m in said), said
    assert not any("fewer than k=" in m or "share 0.000" in m for m in said), said
    assert (ws / "m.tsv").read_text() == "" and json.loads((ws / "m.tsv.json").read_text())["threshold"]["share"] is None
    ok(xm("mine", ws / "de.txt", ws / "de.txt", "--encoder", "use-m3", "--allow-same-input", "-o", ws / "k.tsv",
          "--no-pre-clean-step", "copies", "--no-filter", "identical"))
    assert [line.split("\t")[1] == line.split("\t")[2] for line in (ws / "k.tsv").read_text().splitlines()] == [True] * N


def test_a_diverged_training_stops_with_one_line(ws):
    res = xm("train", "--method", "seed", "--pairs", f"{ws / 'pairs.de'}:{ws / 'pairs.en'}", "--encoder", "use-m3",
             "--lr", "1e308", "--max-epochs", 3, "-q", "-o", ws / "p-nan")
    refused(res, "training diverged", "not finite", "lower --lr")
    assert not (ws / "p-nan" / "manifest.json").exists()


def test_non_finite_projection_weights_are_refused_on_load_and_verify(ws):
    from safetensors.numpy import load_file, save_file

    weights = ws / "proj" / "model.safetensors"
    state = load_file(str(weights))
    name = next(k for k, v in state.items() if v.dtype.kind == "f" and v.size)
    state[name] = np.full_like(state[name], np.nan)
    save_file(state, str(weights))
    config = json.loads((ws / "proj" / "config.json").read_text())
    config["weights_sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    (ws / "proj" / "config.json").write_text(json.dumps(config))
    from xmine.disentangle.projection import write_projection_manifest

    write_projection_manifest(ws / "proj", config)  # the sums of the new files: only the weights can tell
    with untouched(ws):
        refused(xm("verify", ws / "proj"), "model.safetensors", "not finite")
        refused(xm("langid", "--projection", ws / "proj", ws / "de.txt", "-o", ws / "l.tsv"), "not finite")


def test_a_projection_spec_naming_more_languages_than_its_weights_hold_is_refused_before_building(ws):
    """(was: 500,000 languages in config.json, every sum re-signed, built 1.8 GB of buffers before
    the weights were read)"""
    from xmine.disentangle.projection import write_projection_manifest

    config = json.loads((ws / "proj" / "config.json").read_text())
    config["spec"]["languages"] = [f"l{i}" for i in range(100_000)]
    (ws / "proj" / "config.json").write_text(json.dumps(config))
    write_projection_manifest(ws / "proj", config)
    with untouched(ws):
        refused(xm("verify", ws / "proj"), "config.json: its spec names 100000 languages, but",
                "model.safetensors holds centroids of")


def test_a_store_of_non_finite_rows_is_refused_by_verify_and_build_index(ws, monkeypatch):
    """A store whose rows are NaN with every sum re-signed (was: verify said OK, build-index indexed
    it, and every search then found nothing, its warning blaming the index type)."""
    shard = ws / "store" / "emb-00000.npy"
    rows = np.load(shard)
    rows[3] = np.nan
    np.save(shard, rows)

    def resign(manifest):
        for entry in manifest["shards"]:
            if entry["file"] == shard.name:
                entry["sha256"] = hashlib.sha256(shard.read_bytes()).hexdigest()
    rewrite_manifest(ws / "store" / "manifest.json", resign)
    line = int(np.load(ws / "store" / "line_numbers.npy")[3])
    with untouched(ws):
        refused(xm("verify", ws / "store"), f"embedding row 3 (input line {line}) is not finite")
        refused(xm("build-index", ws / "store", "-o", ws / "idx"), f"embedding row 3 (input line {line}) is not finite")
        # a store too large to be hashed on open: verify hashes and scans each shard in one read
        from xmine.artefacts import fileio

        monkeypatch.setattr(fileio, "VERIFY_ON_OPEN_BYTES", 0)
        monkeypatch.setattr(fileio, "_VERIFIED", set())
        refused(xm("verify", ws / "store"), f"embedding row 3 (input line {line}) is not finite")
    assert not (ws / "idx").exists()


# ------------------------------------------------------------- one line instead of a traceback


def test_a_gzip_damaged_mid_stream_is_one_line(ws):
    import gzip

    data = bytearray(gzip.compress(_numbered(REPO / "demo" / "de.txt", ws / "many.txt", 3000).read_bytes()))
    data[len(data) // 2] ^= 0xFF
    (ws / "bad.txt.gz").write_bytes(bytes(data))
    with untouched(ws):
        refused(xm("embed", ws / "bad.txt.gz", "--lang", "de", "--encoder", "use-m3", "-q", "-o", ws / "s"),
                "bad.txt.gz", "cannot read")


@pytest.mark.parametrize("value", ["1e308", "1e-12"])
def test_a_memory_budget_out_of_range_names_the_option(ws, value):
    with untouched(ws):
        refused(xm("build-index", ws / "en.txt", "--encoder", "use-m3", "--memory-budget-gb", value, "-o", ws / "i"),
                "--memory-budget-gb", "0.001<=x<=1000000")


def test_search_with_a_huge_k_returns_every_row(ws):
    ok(xm("search", ws / "index", ws / "de.txt", "-k", 100_000_000_000, "-o", ws / "hits.tsv"))
    assert len((ws / "hits.tsv").read_text().splitlines()) == N * N


def test_approximate_mining_too_small_for_pq_is_one_line(ws):
    before = tree(ws)
    refused(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "--approximate", "--index-type",
               "ivfpq", "-o", ws / "m.tsv"), "--approximate: cannot train", "use --index-type ivf (no codebook to "
            "train), --index-type ivfpqfs (16 centroids a codebook, not 256), or exact mining (no --approximate)")
    after = tree(ws)
    assert {k: after.get(k) for k in before} == before  # (the sides embedded in m.tsv.work/ are kept)
    # 3 x 3 lines at the default (fast-scan) and nlist 1: only what would help (was: "use --index-type
    # ivf or ivfpqfs, a smaller --nlist", two of which are what the run used)
    for side in ("de", "en"):
        (ws / f"three.{side}").write_text("".join((ws / f"{side}.txt").read_text().splitlines(keepends=True)[:3]))
    refused(xm("mine", ws / "three.de", ws / "three.en", "--encoder", "use-m3", "--approximate", "-o", ws / "t.tsv"),
            "use --index-type ivf (no codebook to train), or exact mining (no --approximate)")
    # score takes neither --index-type nor --nlist: only what it can do (was: "use --index-type ivf")
    said = refused(xm("score", f"{ws / 'three.de'}:{ws / 'three.en'}", "--encoder", "use-m3", "--approximate", "-o",
                      ws / "s.tsv"), "use exact search (no --approximate) for corpora this small")
    assert "--index-type" not in said and "--nlist" not in said


@pytest.mark.parametrize("where", ["notes.txt/m.tsv", "notes.txt/sub/m.tsv", ""])
def test_an_output_that_cannot_be_a_path_is_one_line(ws, where):
    out = str(ws / where) if where else ""
    with untouched(ws):
        refused(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-o", out),
                "is not a directory" if where else "empty path")


@pytest.mark.parametrize("command", ["mine", "score", "calibrate"])
def test_standard_output_is_no_output(ws, monkeypatch, command):
    """`-o -` (was: a file named '-' and its '-.json' written in the working folder, exit 0)."""
    monkeypatch.chdir(ws)
    args = {"mine": ("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3"),
            "score": ("score", f"{ws / 'de.txt'}:{ws / 'en.txt'}", "--encoder", "use-m3"),
            "calibrate": ("calibrate", "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3")}[command]
    with untouched(ws):
        refused(xm(*args, "-o", "-"), "output '-': xmine writes its outputs to files")


# ------------------------------------------------------------------------------ clear errors


def test_a_pipe_as_input_is_refused_clearly(ws, tmp_path_factory):
    fifo = tmp_path_factory.mktemp("fifo") / "pipe.txt"  # (outside ws: reading it to hash it would block)
    os.mkfifo(fifo)
    with untouched(ws):
        refused(xm("embed", fifo, "--lang", "de", "--encoder", "use-m3", "-q", "-o", ws / "s"), "pipe.txt",
                "is a pipe", "not supported")
        refused(xm("mine", fifo, ws / "en.txt", "--encoder", "use-m3", "-q", "-o", ws / "m.tsv"), "is a pipe")


def test_a_damaged_work_store_is_rebuilt_with_overwrite(ws):
    args = ["mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-q", "--keep-work", "-o", ws / "m.tsv"]
    ok(xm(*args))
    first = (ws / "m.tsv").read_bytes()
    # (was: "an unfinished xmine mining result work", of a finished run's kept work)
    refused(xm("verify", ws / "m.tsv.work"), "m.tsv.work: the work folder of an xmine mining result",
            f"verify the output it belongs to ({ws / 'm.tsv'})")
    (ws / "m.tsv.work" / "src" / "store" / "emb-00000.npy").write_bytes(b"garbage")
    with untouched(ws):
        refused(xm(*args), "already exists")
    ok(xm(*args, "--overwrite"))
    assert (ws / "m.tsv").read_bytes() == first


def test_a_users_files_in_the_work_folder_outlive_the_runs_that_finish_it(ws, monkeypatch, caplog):
    """(was: OUT.work/ removed whole when a run finished: the notes a user put into a kept or an
    interrupted run's work folder went with it)"""
    import xmine.mining.pipeline as pipeline

    args = ["mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-q", "-o", ws / "m.tsv"]
    work = ws / "m.tsv.work"
    ok(xm(*args, "--keep-work"))
    assert list(work.rglob("emb-*.npy")) and list(work.rglob("tile_*.npz"))
    theirs = {work / "notes.txt": "my notes", work / "mine" / "a.txt": "analysis",
              work / "src" / "store" / "picked.txt": "sentences I picked"}
    for path, text in theirs.items():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    ok(xm(*args, "--overwrite"))
    assert {p: p.read_text() for p in theirs} == theirs
    assert "m.tsv.work: kept" in caplog.text and "notes.txt" in caplog.text
    # what stays is theirs and the folder's marker: xmine's stores and checkpoints went
    left = {p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file()}
    assert left == {"notes.txt", "mine/a.txt", "src/store/picked.txt", ".xmine-output.json"}

    # an interrupted run's folder, notes put into it, then the same command again
    def killed(*a, **k):
        raise RuntimeError("killed while writing")

    monkeypatch.setattr(pipeline, "write_mined", killed)
    args2 = [*args[:-1], ws / "m2.tsv"]
    assert xm(*args2).exit_code != 0
    monkeypatch.undo()
    (ws / "m2.tsv.work" / "notes.txt").write_text("why it stopped")
    ok(xm(*args2))
    assert (ws / "m2.tsv.work" / "notes.txt").read_text() == "why it stopped"
    assert not list((ws / "m2.tsv.work").rglob("*.np[yz]"))
    # with nothing of the user's in it, the folder goes whole
    ok(xm(*args2, "--overwrite", "-o", ws / "m3.tsv"))
    assert not (ws / "m3.tsv.work").exists()
    # and so it does where a side's rows were written there: an index's vectors, a store's projected
    # (a helper: both said to be the user's, and left, a float32 copy of the index)
    ok(xm("mine", ws / "de.txt", ws / "index", "--encoder", "use-m3", "-q", "-o", ws / "m4.tsv"))
    ok(xm("mine", ws / "store", ws / "en.txt", "--encoder", "use-m3", "--projection", ws / "proj", "-q",
          "-o", ws / "m5.tsv"))
    assert not (ws / "m4.tsv.work").exists() and not (ws / "m5.tsv.work").exists()
    assert "m4.tsv.work" not in caplog.text and "m5.tsv.work" not in caplog.text
    # no text side to mark the folder: a store against an index (a helper: the index's vectors left,
    # called the user's, and the next --overwrite refused, "m6.tsv.work: exists and is not part of ...")
    for flags in ((), ("--overwrite",)):
        ok(xm("mine", ws / "store", ws / "index", "--encoder", "use-m3", "-q", "-o", ws / "m6.tsv", *flags))
        assert not (ws / "m6.tsv.work").exists() and "m6.tsv.work" not in caplog.text


def test_an_unknown_encoder_with_a_store_input_names_the_encoder(ws, me5):
    ok(xm("embed", ws / "de.txt", "--lang", "de", "-q", "-o", ws / "st5"))
    with untouched(ws):
        refused(xm("mine", ws / "st5", ws / "en.txt", "--encoder", "no-such-encoder", "-o", ws / "m.tsv",
                   env={"HF_HUB_OFFLINE": "1"}), "--encoder 'no-such-encoder'", "leave --encoder out")


def test_a_failed_embed_leaves_no_stub_behind(ws):
    bad = ws / "bad.txt"
    bad.write_bytes(b"\xff\xfe broken\n" + (ws / "de.txt").read_bytes())
    with untouched(ws):
        refused(xm("embed", bad, "--lang", "de", "--encoder", "use-m3", "-q", "-o", ws / "s"), "bad.txt:1", "UTF-8")
    # A failed rebuild of a finished store leaves the store, and nothing beside it.
    with untouched(ws):
        refused(xm("embed", bad, "--lang", "de", "--encoder", "use-m3", "-q", "--overwrite", "-o", ws / "store"),
                "bad.txt:1")


# ------------------------------------------------ declared languages, languages a projection never saw

SHIPPED = REPO / "xmine" / "projections" / "me5-small"


def _new_files(before: dict, after: dict) -> set[str]:
    """Paths created in between; every path that existed before must be byte-identical after."""
    assert {p: h for p, h in after.items() if p in before} == before
    return set(after) - set(before)


def test_a_mislabelled_side_is_warned_about_and_recorded(ws, me5, caplog):
    # The default (shipped) projection identifies German and English: `--src-lang fr` on German input
    # is mined as asked, with one warning line and the summary saying so (was: two, the language
    # filter's and the check's); both sides given each other's language (`--src-lang en --tgt-lang de`)
    # are refused (was: mined, every output labelling German as English; `score` refused it).
    refused(xm("mine", ws / "de.txt", ws / "en.txt", "--src-lang", "en", "--tgt-lang", "de", "-q", "-o", ws / "s.tsv"),
            "--src-lang en and --tgt-lang de look swapped: ", "of the source's sampled lines look like 'deu'",
            "of the target's like 'eng'; give each side its language")
    assert not (ws / "s.tsv").exists()
    caplog.clear()
    before = tree(ws)
    res = ok(xm("mine", ws / "de.txt", ws / "en.txt", "--src-lang", "fr", "--tgt-lang", "en", "-q", "-o", ws / "m.tsv"))
    assert _new_files(before, tree(ws)) == {"m.tsv", "m.tsv.json"}
    assert "Traceback" not in res.output and "Usage:" not in res.output  # one line, not click's usage block
    # (the CLI prints log records to stderr as `xmine: ...`; under pytest they go to caplog)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and (
        "likeliest language" in r.getMessage() or "another language" in r.getMessage())]
    assert len(warned) == 1 and "\n" not in warned[0], warned
    assert warned[0].startswith(f"src {ws / 'de.txt'}: 100% of its sentences fail the language filter for "
                                "--src-lang fr (another language, or not surely fr); ") \
        and "sampled lines is 'deu'" in warned[0] and "the automatic language filter leaves this side as it is" \
        in warned[0], warned
    check = json.loads((ws / "m.tsv.json").read_text())["language_check"]
    assert check["src"]["status"] == "mismatch" and check["tgt"]["status"] == "consistent"
    assert check["src"]["looks_like"] == "deu" and check["src"]["share"] > 0.8 and check["src"]["sample"] == N
    # the automatic language filter would drop the whole side: it leaves it, and says so
    lf = json.loads((ws / "m.tsv.json").read_text())["lang_filter"]
    assert lf["on"] and set(lf["skipped"]) == {"src"} and lf["skipped"]["src"] > 0.5
    mined = (ws / "m.tsv").read_text()
    assert mined  # mined as asked
    # Correct codes in any form say nothing; a language the projection does not know is not checked,
    # never a false warning.
    before = tree(ws)
    caplog.clear()
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--src-lang", "de-DE", "--tgt-lang", "pl", "-q", "-o", ws / "m2.tsv"))
    assert _new_files(before, tree(ws)) == {"m2.tsv", "m2.tsv.json"}
    assert "look like" not in caplog.text, caplog.text
    check = json.loads((ws / "m2.tsv.json").read_text())["language_check"]
    assert check["src"]["status"] == "consistent" and check["src"]["labels"].get("deu", 0) > 0.8 * N
    assert (ws / "m2.tsv").read_text() == mined  # the same pairs as with the mislabelled sides
    assert check["tgt"] == {"declared": "pl", "sample": 0, "status": "not-checked",
                            "why": "'pol' is not one of the projection's languages"}


def test_langid_says_why_a_projection_that_trusts_no_language_calls_every_line_unknown(ws):
    # ws's projection was trained on 40 pairs: each language's held-out accuracy rests on a few lines
    res = ok(xm("langid", "--projection", ws / "proj", ws / "de.txt", "-q"))
    assert {l.split("\t")[2] for l in res.output.splitlines() if l.startswith(str(ws))} == {"unknown"}
    note = next(l for l in res.output.splitlines() if "'unknown'" in l)
    assert note.startswith(f"xmine: {N} of {N} line(s) 'unknown' (the projection identifies none of its languages "
                           "reliably (deu: held-out accuracy measured on "), note
    assert "so every line is; --guess prints the nearest" in note


def test_langid_says_unknown_for_a_language_the_projection_never_saw(ws, me5, data_dir):
    # Amharic is none of the shipped projection's 40 languages; its nearest centroid is a label the
    # projection does not identify reliably, so the line is 'unknown' instead of a confident guess.
    _head(data_dir / "parallel" / "flores200" / "devtest" / "amh_Ethi.devtest", ws / "amh.txt", N)
    with untouched(ws):
        res = ok(xm("langid", "--projection", SHIPPED, ws / "amh.txt", ws / "de.txt"))
    rows = [l.split("\t") for l in res.output.splitlines() if l.startswith(str(ws))]
    assert len(rows) == 2 * N
    amh = [r[2] for r in rows if r[0].endswith("amh.txt")]
    de = [r[2] for r in rows if r[0].endswith("de.txt")]
    assert amh.count("unknown") >= 0.8 * N, amh
    assert de.count("deu") >= 0.8 * N, de
    notes = [l for l in res.output.splitlines() if "'unknown'" in l]
    unknown = amh.count("unknown") + de.count("unknown")
    assert len(notes) == 1 and notes[0].startswith(f"xmine: {unknown} of {2 * N} line(s) 'unknown'"), notes
    with untouched(ws):
        res = ok(xm("langid", "--projection", SHIPPED, "--guess", ws / "amh.txt"))
    guessed = [l.split("\t")[2] for l in res.output.splitlines() if l.startswith(str(ws))]
    assert len(guessed) == N and "unknown" not in guessed and "'unknown'" not in res.output
    # --eval of a language it never saw scores the lines called unknown (was: refused, so the case its
    # trust rule exists for could not be measured); the language by the file's name before its dot
    (ws / "amh_Ethi.txt").write_bytes((ws / "amh.txt").read_bytes())
    with untouched(ws):
        res = ok(xm("langid", "--projection", SHIPPED, "--eval", ws / "amh_Ethi.txt", "-q"))
    row = next(l for l in res.output.splitlines() if l.startswith(str(ws)))
    assert row.startswith(f"{ws / 'amh_Ethi.txt'}\tamh (unseen: right when unknown)\taccuracy "), row
    assert f"({amh.count('unknown')}/{N})" in row
    with untouched(ws):
        refused(xm("langid", "--projection", SHIPPED, "--eval", "--guess", ws / "amh_Ethi.txt"), "amh_Ethi.txt",
                "language 'amh' is not one the projection knows", "with --guess")
    # `center`'s score is the embedding's cosine to its language, not the constant 1.0000 of its
    # language part; a projection trained on ~100 pairs has no trusted label at all.
    with untouched(ws):
        res = ok(xm("langid", "--projection", ws / "proj", ws / "de.txt"))
    scores = [float(l.split("\t")[3]) for l in res.output.splitlines() if l.startswith(str(ws))]
    assert len(scores) == N and max(scores) < 0.9999 and len(set(scores)) > 1
    assert f"xmine: {N} of {N} line(s) 'unknown'" in res.output


@pytest.mark.parametrize("command", ["build-index", "search"])
def test_sigterm_ends_a_command_cleanly_leaving_no_hidden_work(ws, monkeypatch, command):
    """SIGTERM (a scheduler's stop, `kill`) is handled as Ctrl-C is: clean-up runs, exit 143, and no
    hidden work folder is left (was: the process ended on the spot, leaving `.IDX.work-*` beside
    the index or `xmine-side-*` in the temporary folder, which no later run removes)."""
    tmp = ws / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))  # the child's temporary folder, to look into
    text = _numbered(REPO / "demo" / "en.txt", ws / "big.txt", 200)
    before = tree(ws)
    args = (["build-index", text, "--lang", "en", "--encoder", "use-m3", "--shard-rows", 50, "-q", "-o", ws / "idx"]
            if command == "build-index" else ["search", ws / "index", text, "-o", ws / "hits.tsv"])
    # stopped as the text's store saves its progress the 2nd time: one shard encoded
    with paused_xmine("xmine.store.resume:Progress.save", 2, *args) as proc:
        assert any(p.name.startswith((".idx.work-", "xmine-side-")) for p in [*ws.iterdir(), *tmp.iterdir()])
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        assert proc.returncode == 143, log_of(proc)
        assert "xmine: terminated; its output was not written, run the same command again." in log_of(proc)
    assert tree(ws) == before


def test_a_store_another_run_is_writing_is_said_to_be_so_not_to_have_stopped(ws):
    """(was: "an unfinished embedding store (its run was interrupted or failed); run the same command
    again to finish it", of a store whose run was still going)"""
    text = _numbered(REPO / "demo" / "de.txt", ws / "big.txt", 200)
    args = ["embed", text, "--lang", "de", "--encoder", "use-m3", "--shard-rows", 50, "-q", "-o", ws / "growing"]
    with paused_xmine("xmine.store.resume:Progress.save", 2, *args) as proc:
        refused(xm("mine", ws / "growing", ws / "en.txt", "--encoder", "use-m3", "-o", ws / "m.tsv"),
                "growing: an unfinished embedding store that another xmine process is writing right now")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    refused(xm("mine", ws / "growing", ws / "en.txt", "--encoder", "use-m3", "-o", ws / "m.tsv"),
            "growing: an unfinished embedding store (its run was interrupted or failed)")


def test_a_reader_that_stops_early_ends_the_command_quietly(ws):
    """`xmine search ... | head`: the reader has what it wanted (was: "xmine: error: broken pipe",
    exit 2). Exit 141, as a program ended by SIGPIPE, and nothing on stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "xmine.cli", "search", ws / "index", ws / "de.txt", "-k", "40"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    first = proc.stdout.readline()
    proc.stdout.close()  # 1,600 lines of hits: more than the pipe holds, so the writer meets the closed end
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert first.count(b"\t") >= 4 and "error" not in err and "Traceback" not in err, err


def test_the_hidden_work_a_killed_run_left_is_removed_by_the_next_run_of_that_output(ws, caplog, monkeypatch):
    """SIGKILL runs no clean-up: build-index's `.IDX.work-*` (a partial store) stayed for good,
    as did `.OUT.*.tmp` of the atomic writers. The next run of the same output holds its locks, so
    no live writer owns them: it removes them and says so. Names that only look alike stay."""
    text = _numbered(REPO / "demo" / "en.txt", ws / "big.txt", 200)
    args = ["build-index", text, "--lang", "en", "--encoder", "use-m3", "--shard-rows", 50, "-q", "-o", ws / "idx"]
    with paused_xmine("xmine.store.resume:Progress.save", 2, *args) as proc:
        proc.kill()
        proc.wait(timeout=60)
    left = [p.name for p in ws.iterdir() if p.name.startswith(".idx.work-")]
    assert len(left) == 1, sorted(p.name for p in ws.iterdir())
    (ws / ".m.tsv.k2j3x9_a.tmp").mkdir(mode=0o700)  # an atomic_dir's (a dataset folder output), private as
    (ws / ".m.tsv.k2j3x9_a.tmp" / "data-00000-of-00001.arrow").write_bytes(b"x" * 1000)  # tempfile makes it
    (ws / ".m.q8w7e6r5.tmp.tsv").write_text("half a TSV\n")  # an atomic_path's
    (ws / ".m.q8w7e6r5.tmp.tsv").chmod(0o600)
    alike = [".m.tsv.notes.tmp", ".m.tsv.k2j3x9_a.tmp.bak", ".idx.work-mine", ".other.q8w7e6r5.tmp.tsv"]
    for name in alike:
        (ws / name).write_text("the user's\n")
    # named exactly as a temporary, but not private as tempfile makes one: the user's (a helper: removed)
    (ws / ".m.tsv.abcd1234.tmp").mkdir(mode=0o755)
    (ws / ".m.tsv.abcd1234.tmp" / "thesis.txt").write_text("precious\n")
    (ws / ".m.abcd1234.tmp.tsv").write_text("the user's\n")
    (ws / ".m.abcd1234.tmp.tsv").chmod(0o644)
    alike += [".m.tsv.abcd1234.tmp", ".m.abcd1234.tmp.tsv"]
    # a killed run's own folder, a user's notes put into it: left, and said (a helper: removed with them)
    (ws / ".m.tsv.zz9zz9zz.tmp").mkdir(mode=0o700)
    (ws / ".m.tsv.zz9zz9zz.tmp" / "state.json").write_text("{}")
    (ws / ".m.tsv.zz9zz9zz.tmp" / "notes.txt").write_text("why it stopped\n")
    alike += [".m.tsv.zz9zz9zz.tmp"]
    listed, real_iterdir = [], Path.iterdir

    def counting_iterdir(self):
        listed.append(self)
        return real_iterdir(self)

    with caplog.at_level("INFO", logger="xmine"):
        ok(xm(*args))
        monkeypatch.setattr(Path, "iterdir", counting_iterdir)
        ok(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-q", "-o", ws / "m.tsv"))
        monkeypatch.undo()
    # the output's folder listed once for the temporaries of all its claimed files (was: once each)
    assert listed.count(ws) == 1, listed
    assert not [p for p in ws.iterdir() if p.name.startswith(".idx.work-") and p.name != ".idx.work-mine"]
    assert sorted(p.name for p in ws.iterdir() if p.name.startswith(".") and not p.name.endswith(".lock")) == sorted(alike)
    said = [r.getMessage() for r in caplog.records if "removed, the hidden work" in r.getMessage()]
    assert len(said) == 3 and f"{ws / left[0]}: removed, the hidden work of an earlier run of idx that was killed" in said[0]
    assert (ws / ".m.tsv.zz9zz9zz.tmp" / "notes.txt").read_text() == "why it stopped\n"
    assert f"{ws / '.m.tsv.zz9zz9zz.tmp'}: left where it is: the hidden work of an earlier run of m.tsv that was " \
        "killed, but it holds files xmine did not write (notes.txt)" in caplog.text


def test_resuming_at_another_shard_size_is_refused_not_redone_under_a_resuming_message(ws):
    """(was: "resuming after 2 finished shard(s)", then every shard encoded again, one warning each)"""
    big = _numbered(REPO / "demo" / "de.txt", ws / "big.txt", 300)
    args = ["embed", big, "--lang", "de", "--encoder", "use-m3", "-q", "-o", ws / "s"]
    with paused_xmine("xmine.store.resume:Progress.save", 3, *args, "--shard-rows", 50) as proc:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        assert proc.returncode == 130, log_of(proc)
    with untouched(ws):
        refused(xm(*args, "--shard-rows", 60), "cut into shards of 50 rows, not --shard-rows 60",
                "run with --shard-rows 50 to resume its 2 finished shard(s)", "--overwrite")
    res = ok(xm(*args, "--shard-rows", 50))
    assert "100 resumed from an earlier run" in res.output


def test_a_projection_made_for_another_encoder_names_the_encoder_to_use(ws):
    """`mine --projection DIR` without --encoder uses the encoder the projection was trained on, as
    `langid --projection` does (was: the default me5-small's embeddings met a use-m3 projection and
    were refused); an --encoder given that does not match is still refused."""
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--projection", ws / "proj", "-q", "-o", ws / "m.tsv"))
    assert json.loads((ws / "m.tsv.json").read_text())["encoder"]["name"] == "use-m3"
    with untouched(ws):
        refused(xm("mine", ws / "de.txt", ws / "en.txt", "--projection", ws / "proj", "--encoder", "me5-small",
                   "-q", "-o", ws / "m2.tsv"), "was made with encoder 'use-m3'")


def test_embed_with_a_projection_made_for_another_encoder_uses_that_encoder(ws):
    """`embed --projection DIR` without --encoder embeds with the projection's encoder, as mine,
    score and build-index do (was: refused, me5-small's embeddings meeting a use-m3 projection)."""
    ok(xm("embed", ws / "de.txt", "--lang", "de", "--projection", ws / "proj", "-q", "-o", ws / "st"))
    manifest = json.loads((ws / "st" / "manifest.json").read_text())
    assert manifest["encoder"]["name"] == "use-m3" and manifest["part"] == "meaning"


def test_a_store_made_with_another_encoder_or_prompt_names_the_option_that_resumes_it(ws):
    """(was: "it was made with encoder 'use-m3', not 'me5-small'", and a store of another prompt
    named as one of another encoder)"""
    with untouched(ws):
        refused(xm("embed", ws / "de.txt", "--lang", "de", "--shard-rows", 16, "-q", "-o", ws / "store"),
                "it was made with encoder 'use-m3' (--encoder use-m3), not 'me5-small'", "--overwrite")
    ok(xm("embed", ws / "de.txt", "--lang", "de", "--prompt", "passage: ", "-q", "-o", ws / "passage"))
    with untouched(ws):
        refused(xm("embed", ws / "de.txt", "--lang", "de", "-q", "-o", ws / "passage"),
                "it was made with the prompt 'passage: ' (--prompt 'passage: '), not 'query: '")


def test_verify_names_a_shard_copied_into_a_store_or_an_index(ws):
    """A shard the manifest does not record is never read, but says that two runs were mixed (was:
    `verify` said OK, though docs/reliability.md calls such a file refused)."""
    store_shards = sorted(ws.joinpath("store").glob("emb-*.npy"))
    shutil.copy(store_shards[0], ws / "store" / "emb-00099.npy")
    shutil.copy(ws / "index" / "shard_00000.faiss", ws / "index" / "shard_00007.faiss")
    for artefact, stray in (("store", "emb-00099.npy"), ("index", "shard_00007.faiss")):
        refused(xm("verify", ws / artefact), f"{ws / artefact / stray}: named as a shard of the",
                "not recorded in its manifest.json")
        (ws / artefact / stray).unlink()
        ok(xm("verify", ws / artefact))


def test_refusals_name_the_output_and_what_it_is(ws):
    """(were: a link to a store named "not a directory"; a mining result's summary named instead of
    the result; the lock file of an output in a folder that cannot hold it named instead of it)"""
    ok(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-q", "-o", ws / "r.tsv"))
    (ws / "link").symlink_to(ws / "store")
    (ws / "t.tsv").write_text("x\n")
    (ws / "t.tsv.json").write_text('{"kind": "mine"}')
    with untouched(ws):
        refused(xm("build-index", ws / "en.txt", "--encoder", "use-m3", "--overwrite", "-o", ws / "link"),
                f"{ws / 'link'}: exists and is a symbolic link; refusing to replace it")
        refused(xm("search", ws / "index", ws / "de.txt", "--overwrite", "-o", ws / "r.tsv"),
                f"{ws / 'r.tsv'}: is an xmine mining result (says r.tsv.json), not an xmine search result")
        # a user's file beside a JSON of theirs that names a kind is not called xmine's (was: "is an
        # xmine mine (says t.tsv.json)")
        refused(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-q", "--overwrite", "-o", ws / "t.tsv"),
                f"{ws / 't.tsv.json'}: exists and is not an xmine summary; refusing to replace it")
    refused(xm("mine", ws / "de.txt", ws / "en.txt", "--encoder", "use-m3", "-q", "-o", "/proc/xmine-out.tsv"),
            "/proc/xmine-out.tsv: cannot write in /proc (")


def test_an_output_on_a_read_only_file_system_is_named_not_its_lock(tmp_path):
    """(was: "DIR/.R.md.lock: read-only file system", a hidden file named instead of the output)"""
    folder = tmp_path / "ro"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        refused(xm("bench", "report", "--out", folder / "R.md"),
                f"{folder / 'R.md'}: cannot write in {folder} (read-only file system); choose another output")
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_refused_embed_leaves_no_lock_file_in_a_folder_marked_by_hand(ws):
    """(was: `.lock` added to the user's folder, though the run was refused)"""
    shutil.copy(ws / "store" / ".xmine-output.json", ws / "thesis" / ".xmine-output.json")
    with untouched(ws):
        refused(xm("embed", ws / "de.txt", "--lang", "de", "--encoder", "use-m3", "-q", "-o", ws / "thesis"),
                "thesis")


def test_verify_names_an_interrupted_run_by_its_summary_as_by_its_output(tmp_path):
    """A run killed (SIGKILL) after its claim leaves OUT.json saying "unfinished" and no OUT; `verify
    OUT.json` says what `verify OUT` says (was: "kind 'mining-result' is no kind of record this xmine
    writes")."""
    from xmine.artefacts.fileio import atomic_write_manifest
    from xmine.mining.pipeline import MINING_KIND

    out = tmp_path / "ka.tsv"
    # what the claim writes before a run's first output (xmine.artefacts.outputs)
    atomic_write_manifest(tmp_path / "ka.tsv.json", {"kind": MINING_KIND, "state": "unfinished", "writing": []})
    for path in (out, tmp_path / "ka.tsv.json"):
        res = CliRunner().invoke(main, ["verify", str(path)])
        assert res.exit_code == 2 and f"{out}: unfinished (its run was interrupted); run the same command again" \
            in res.output, res.output


def _killed(at: str, nth: int, *args, before: bool = False) -> None:
    with paused_xmine(at, nth, *args, before=before) as proc:
        proc.kill()
        proc.wait(timeout=60)


def test_a_run_stopped_once_or_twice_is_finished_by_the_next_whatever_it_writes(ws):
    """The next run of a killed `mine` finishes it, as an uninterrupted run would have. Was:
    - with --keep-filtered, a run killed after FILE was finished, while OUT was written, was refused
      when run again ("FILE: already exists"): FILE is now finished after OUT;
    - with --format hf, a run killed after the dataset folder was moved into place, before OUT.json
      was finished, was refused for good ("exists and is a directory");
    - a second run killed too forgot what the first had put in place, and the third refused OUT
      as no file of the run's."""
    args = ["mine", ws / "store", ws / "en.txt", "--encoder", "use-m3", "-q", "--threshold", "none", "--meta"]
    ok(xm(*args, "-o", ws / "ref.tsv", "--keep-filtered", ws / "ref-dropped.tsv"))
    out, dropped = ws / "m.tsv", ws / "dropped.tsv"
    _killed("xmine.mining.writers:write_mined", 1, *args, "-o", out, "--keep-filtered", dropped, before=True)
    assert json.loads((ws / "dropped.tsv.json").read_text())["state"] == "unfinished"
    ok(xm(*args, "-o", out, "--keep-filtered", dropped))
    assert out.read_bytes() == (ws / "ref.tsv").read_bytes()
    assert dropped.read_bytes() == (ws / "ref-dropped.tsv").read_bytes() and ok(xm("verify", dropped))

    twice = ws / "t.tsv"
    _killed("xmine.artefacts.outputs:Claim.finish", 1, *args, "-o", twice, before=True)  # t.tsv, t.tsv.meta in place
    _killed("xmine.artefacts.outputs:Claim.mark_unfinished", 1, *args, "-o", twice)  # a second run, stopped early
    ok(xm(*args, "-o", twice))
    assert twice.read_bytes() == (ws / "ref.tsv").read_bytes()
    assert (ws / "t.tsv.meta").read_bytes() == (ws / "ref.tsv.meta").read_bytes()

    hf = ["mine", ws / "store", ws / "en.txt", "--encoder", "use-m3", "-q", "--threshold", "none", "--format", "hf"]
    ok(xm(*hf, "-o", ws / "ref-hf"))
    _killed("xmine.artefacts.outputs:_swap_in", 1, *hf, "-o", ws / "h")  # the folder in place, OUT.json not finished
    assert (ws / "h").is_dir() and json.loads((ws / "h.json").read_text())["state"] == "unfinished"
    ok(xm(*hf, "-o", ws / "h"))
    same = [name for name in tree(ws / "ref-hf") if name != "state.json"]  # (its _fingerprint: random per save)
    assert [tree(ws / "h")[n] for n in same] == [tree(ws / "ref-hf")[n] for n in same] and ok(xm("verify", ws / "h"))
    shutil.rmtree(ws / "h"), (ws / "h.json").unlink()
    _killed("xmine.artefacts.outputs:_swap_in", 1, *hf, "-o", ws / "h")
    (ws / "h" / "mine.txt").write_text("a note of mine\n", encoding="utf-8")  # put into it since: no longer the run's
    refused(xm(*hf, "-o", ws / "h", "--overwrite"), f"{ws / 'h'}: exists, but the run of xmine")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_after_the_output_was_finished_says_it_is_complete(ws, sig):
    """(was: Ctrl-C as `mine` finished said "any work it had finished is kept: run the same command
    again to resume", and that run was refused: "already exists".) A stop that arrives after the
    command's outputs were finished says so and names them; a stop before says what it said."""
    args = ["mine", ws / "store", ws / "en.txt", "--encoder", "use-m3", "-q", "-o"]
    what = "interrupted" if sig == signal.SIGINT else "terminated"
    with paused_xmine("xmine.artefacts.outputs:Claim.finish", 1, *args, ws / "m.tsv") as proc:
        proc.send_signal(sig)
        proc.wait(timeout=60)
        said = log_of(proc)
    assert proc.returncode == 128 + sig, said
    assert f"xmine: {what} after its output was finished: {ws / 'm.tsv'} is complete" in said, said
    assert "run the same command again" not in said, said
    assert "OK, an xmine mining result" in ok(xm("verify", ws / "m.tsv")).output
    with paused_xmine("xmine.artefacts.outputs:Claim.finish", 1, *args, ws / "m2.tsv", before=True) as proc:
        proc.send_signal(sig)
        proc.wait(timeout=60)
        said = log_of(proc)
    assert f"xmine: {what}; any work it had finished is kept: run the same command again to resume." in said, said


def test_a_training_stopped_with_restart_says_to_resume_without_it(ws):
    """(a helper: an interrupted `train --restart` said "run the same command again to resume", and that
    command, --restart again, discarded the checkpoint and trained from scratch)"""
    args = ["train", "--method", "seed", "--pairs", f"{ws / 'pairs.de'}:{ws / 'pairs.en'}", "--encoder", "use-m3",
            "--max-epochs", 5, "-q", "-o", ws / "p"]
    with paused_xmine("xmine.disentangle.train_checkpoint:save", 1, *args, "--restart") as proc:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        said = log_of(proc)
    assert proc.returncode == 130, said
    assert "xmine: interrupted; any work it had finished is kept: run the command again without --restart to resume" \
        in said, said
    ok(xm(*args))  # the advice runs (a resumed run equals an uninterrupted one: test_disentangle)


_HELD_AT_EXIT = """
import atexit, pathlib, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # (as a terminal delivers it; see paused_xmine)
ready, go = map(pathlib.Path, sys.argv[1:3])
def hold():  # the end of the program (as Ray's shutdown takes a second), held until the test says go
    ready.write_text("exiting")
    deadline = time.time() + 60
    while not go.exists() and time.time() < deadline:
        time.sleep(0.02)
atexit.register(hold)
from xmine.cli import run
sys.argv = ["xmine", *sys.argv[3:]]
run()
"""


def test_a_ctrl_c_while_a_finished_command_exits_says_so_and_a_second_stops_it(tmp_path):
    """(a helper: Ctrl-C in the second after `mine` printed its summary line ended it without a word,
    exit 130, its output complete.) The program's end is said to be interrupted, exit status kept;
    a second Ctrl-C stops it at once."""
    for presses in (1, 2):
        ready, go = tmp_path / f"ready{presses}", tmp_path / f"go{presses}"
        proc = subprocess.Popen([sys.executable, "-c", _HELD_AT_EXIT, ready, go, "encoders"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while not ready.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        assert ready.exists(), proc.communicate()
        for _ in range(presses):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.5)
        go.touch()
        out, err = proc.communicate(timeout=60)
        assert "xmine: interrupted while exiting: the command had finished (any output it wrote is complete); " \
               "Ctrl-C again stops at once" in err, err
        assert proc.returncode == (0 if presses == 1 else -signal.SIGINT), (proc.returncode, err)
        assert "me5-small" in out and "Traceback" not in err


def test_a_file_put_at_the_output_of_a_killed_run_is_never_taken_for_its_own(ws):
    """(was: a run killed after its claim left OUT.json saying "unfinished"; a file the user then put
    at OUT was replaced by the next run, without --overwrite and without a word.) The "unfinished"
    summary vouches only for the files the run renamed into place, by their size and sha256: such a
    file is the run's own, replaced by the next run; any other file there is refused, even with
    --overwrite, and left as it is."""
    out = ws / "m.tsv"
    args = ["mine", ws / "store", ws / "en.txt", "--encoder", "use-m3", "-q", "--threshold", "none"]
    ok(xm(*args, "-o", ws / "ref.tsv"))
    with paused_xmine("xmine.artefacts.outputs:Claim.mark_unfinished", 1, *args, "-o", out) as proc:
        proc.kill()  # after the claim wrote its "unfinished" summary, before any output file
        proc.wait(timeout=60)
    assert json.loads((ws / "m.tsv.json").read_text())["state"] == "unfinished" and not out.exists()
    out.write_text("my own pairs\n", encoding="utf-8")
    summary = (ws / "m.tsv.json").read_bytes()
    for overwrite in ((), ("--overwrite",)):  # (the first removes the killed run's lock files: its own)
        refused(xm(*args, "-o", out, *overwrite), f"{out}: exists, but the run of xmine that m.tsv.json is the "
                "summary of stopped before it finished, and did not write this file; refusing to replace it")
        assert out.read_text(encoding="utf-8") == "my own pairs\n" and (ws / "m.tsv.json").read_bytes() == summary
    out.unlink()

    with paused_xmine("xmine.artefacts.outputs:Claim.finish", 1, *args, "-o", out, before=True) as proc:
        proc.kill()  # its output renamed into place, its summary not written yet
        proc.wait(timeout=60)
    assert out.read_bytes() == (ws / "ref.tsv").read_bytes()
    assert json.loads((ws / "m.tsv.json").read_text())["state"] == "unfinished"
    ok(xm(*args, "-o", out))  # its own: the next run replaces it
    assert out.read_bytes() == (ws / "ref.tsv").read_bytes() and ok(xm("verify", out))

    out.unlink(), (ws / "m.tsv.json").unlink()
    with paused_xmine("xmine.artefacts.outputs:Claim.finish", 1, *args, "-o", out, before=True) as proc:
        proc.kill()
        proc.wait(timeout=60)
    with open(out, "a", encoding="utf-8") as f:
        f.write("a line of mine\n")  # edited after the run stopped: no longer the run's own
    refused(xm(*args, "-o", out, "--overwrite"), f"{out}: exists, but the run of xmine")
    with untouched(ws):
        refused(xm(*args, "-o", out, "--overwrite"), f"{out}: exists, but the run of xmine")


@pytest.mark.parametrize("command", [
    ["embed", "{ws}/en.txt", "--lang", "en", "--encoder", "use-m3", "-q", "-o", "{ws}/out/st"],
    ["build-index", "{ws}/store", "-q", "-o", "{ws}/out/idx"],
    ["mine", "{ws}/store", "{ws}/en.txt", "--encoder", "use-m3", "-q", "-o", "{ws}/out/m.tsv"],
], ids=["embed", "build-index", "mine"])
def test_a_write_stopped_by_a_file_size_limit_is_one_line_naming_the_file(ws, command):
    """`ulimit -f` (the nearest thing to a full disk here): FAISS's RuntimeError and numpy's short
    write, which carry no errno, were tracebacks; mine's said "file too large" naming no file."""
    xmine = Path(sys.executable).with_name("xmine")
    args = " ".join(f"'{a.format(ws=ws)}'" for a in command)
    (ws / "out").mkdir()
    done = subprocess.run(["bash", "-c", f"ulimit -f 40; exec '{xmine}' {args}"], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=600)
    lines = [line for line in done.stderr.splitlines() if line.startswith("xmine: error:")]
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(lines) == 1, done.stderr
    assert f"{ws}/out/" in lines[0] and ".tmp" not in lines[0], lines[0]
    assert "file-size limit" in lines[0], lines[0]
