"""The Python API (mining/api.py): the examples of docs/api.md run as they are, with the real
encoder; the API gives the command's result; `import xmine` stays cheap."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clitools import ok, xm

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_examples_of_docs_api_run(data_dir):
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "api.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 5
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/api.md", "exec"), namespace)  # noqa: S102  (the documented examples)


@pytest.mark.slow
def test_api_mine_gives_the_command_result(data_dir, tmp_path):
    import xmine
    from tests.flores import flores_lines

    de, en = flores_lines(data_dir, "deu_Latn", 40), flores_lines(data_dir, "eng_Latn", 40)[::-1]
    (tmp_path / "de.txt").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "-q",
          "-o", tmp_path / "m.tsv"))
    expected = [line.split("\t") for line in (tmp_path / "m.tsv").read_text(encoding="utf-8").splitlines()]
    table = xmine.mine(de, en, src_lang="de", tgt_lang="en")
    rows = table.to_pylist()
    assert [(f"{r['score']:.6f}", r["translation"]["de"], r["translation"]["en"]) for r in rows] == \
        [tuple(e) for e in expected]
    assert all(de[r["src_index"]] == r["translation"]["de"] and en[r["tgt_index"]] == r["translation"]["en"]
               for r in rows)
    # From the files, the same pairs, named by file and line.
    from_files = xmine.mine(tmp_path / "de.txt", tmp_path / "en.txt", src_lang="de", tgt_lang="en").to_pylist()
    assert [r["translation"] for r in from_files] == [r["translation"] for r in rows]
    assert all(r["src_record"] == de.index(r["translation"]["de"]) + 1 for r in from_files)


def test_import_xmine_loads_nothing_heavy():
    code = ("import sys, xmine; heavy = [m for m in ('numpy', 'torch', 'pyarrow', 'faiss', 'click', 'datasets') "
            "if m in sys.modules]; assert not heavy, heavy; assert callable(xmine.mine)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_api_takes_any_iterable_of_sentences_and_says_what_is_wrong_with_one(data_dir):
    """(was: a generator emptied by a type check and then mined as an empty file, "file is empty",
    naming a temporary path; and, in a fresh process, pyarrow.compute unloaded for a list's index)"""
    import xmine
    from tests.flores import flores_lines
    from xmine.errors import ConfigError, InputError

    de, en = flores_lines(data_dir, "deu_Latn", 20), flores_lines(data_dir, "eng_Latn", 20)
    listed = xmine.mine(de, en, src_lang="de", tgt_lang="en", encoder="use-m3").to_pylist()
    generated = xmine.mine((s for s in de), iter(en), src_lang="de", tgt_lang="en", encoder="use-m3").to_pylist()
    assert listed and generated == listed
    with pytest.raises(InputError, match=r"^src \(the list given\): no sentence: an empty sequence$"):
        xmine.mine([], en, encoder="use-m3")
    with pytest.raises(ConfigError, match="tgt: expected a path or a sequence of strings; item 1 is a int"):
        xmine.mine(de, ["a", 2], encoder="use-m3")
    # (was: named the temporary file the list was written to)
    with pytest.raises(ConfigError, match=r"^src_lang='zz': not a known language code"):
        xmine.mine(de, en, src_lang="zz", encoder="use-m3")
    code = ("import xmine; t = xmine.mine(['Hallo Welt.', 'Guten Morgen.'], ['Hello world.', 'Good morning.'], "
            "encoder='use-m3', threshold=None); assert 'src_index' in t.column_names, t.column_names")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, capture_output=True,
                   env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})


def test_api_warnings_name_the_list_and_its_items_as_the_result_does(caplog):
    """(was: "/tmp/xmine-api-.../src.txt: 1 line(s) longer than 2000 characters ... (lines 4)", for
    the item the result calls src_index 3)"""
    import xmine

    de = ["Der Hund schläft.", "", "Das Museum ist montags geschlossen.", "Wir baden im Meer. " * 120]
    en = ["The dog is sleeping.", "The museum is closed on Mondays.", "We swim in the sea. " * 120]
    with caplog.at_level("WARNING", logger="xmine"):
        rows = xmine.mine(de, en, encoder="use-m3", threshold=None, show_progress=False).to_pylist()
    assert (3, 2) in {(r["src_index"], r["tgt_index"]) for r in rows}
    said = [r.getMessage() for r in caplog.records]
    assert "src (the list given): 1 empty item(s) skipped (item numbers are kept)" in said, said
    assert "src (the list given): 1 item(s) longer than 2000 characters are cut to that length for encoding " \
        "(items 3)" in said, said
    assert not any("xmine-api" in message for message in said), said
    # and the warnings of the mining step, in Python's terms (a helper: the temporary file and
    # --min-length; the same list on both sides: --no-pre-clean-step copies)
    from xmine.mining.config import FilterConfig

    caplog.clear()
    with caplog.at_level("WARNING", logger="xmine"):
        xmine.mine(de, en, encoder="use-m3", filters=FilterConfig(min_length=5000), show_progress=False)
        xmine.mine(en, en, encoder="use-m3", show_progress=False)
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "warning: src (the list given): none of its 3 distinct sentences is within " \
        "FilterConfig(min_length=5000) (characters)" in said, said
    assert "PreSearchConfig(disabled=frozenset({'copies'})) keeps them" in said, said
    assert "xmine-api" not in said and " --" not in said, said


def test_api_refuses_record_options_its_input_has_no_use_for(tmp_path):
    """As the command refuses `--text-field` on a text file (was: read and dropped in Python, where
    `InputFormat.given` stayed empty)."""
    import xmine
    from xmine.errors import InputError
    from xmine.io.reader_base import InputFormat
    from xmine.mining.config import SideInput

    (tmp_path / "de.txt").write_text("Hallo Welt.\nGuten Morgen.\n", encoding="utf-8")
    assert InputFormat(text_field="body", id_field="id").given == {"--text-field", "--id-field"}
    assert InputFormat().given == frozenset()
    # (said in Python's terms: was "--text-field ... or give --input-format", options Python has not)
    with pytest.raises(InputError, match=r"InputFormat\(text_field=\) does not apply to a text input .* or give "
                                         r"InputFormat\(format=\)$"):
        xmine.mine(SideInput(path=tmp_path / "de.txt", lang="de", input_format=InputFormat(text_field="body")),
                   ["Hello world."], tgt_lang="en", encoder="use-m3")


def test_api_embed_in_a_projection_uses_the_encoder_it_was_made_for(tmp_path):
    """(was: the default me5-small's embeddings met a use-m3 projection and were refused)"""
    import numpy as np

    import xmine
    from xmine.disentangle.projection import load_projection
    from xmine.encoders import load_encoder

    lines = (REPO / "demo" / "de.txt").read_text(encoding="utf-8").splitlines()[:30]
    en = (REPO / "demo" / "en.txt").read_text(encoding="utf-8").splitlines()[:30]
    (tmp_path / "p.de").write_text("".join(t + "\n" for t in lines), encoding="utf-8")
    (tmp_path / "p.en").write_text("".join(t + "\n" for t in en), encoding="utf-8")
    ok(xm("train", "--method", "center", "--pairs", f"{tmp_path / 'p.de'}:{tmp_path / 'p.en'}", "--encoder", "use-m3",
          "-q", "-o", tmp_path / "proj"))
    got = xmine.embed(lines[:3], lang="de", projection=tmp_path / "proj")
    want = load_projection(tmp_path / "proj").transform(load_encoder("use-m3").encode(lines[:3]), "meaning", lang="de")
    assert got.shape == (3, 512) and np.allclose(got, want, atol=1e-6)


def test_api_names_its_own_argument_where_a_prompt_does_not_fit():
    """A projection trained with one prompt refuses embeddings made with another, and the message
    names what fixes it in Python too (was: only the command line's `--prompt`)."""
    import pytest

    import xmine
    from xmine.encoders.projection import shipped_dir
    from xmine.errors import EncoderMismatchError

    with pytest.raises(EncoderMismatchError, match=r"prompt='query: ' in Python"):
        xmine.embed(["Hallo Welt"], lang="de", prompt="passage: ", projection=shipped_dir("me5-small"))


def test_api_embed_refuses_one_string_for_a_list_of_sentences():
    """`xmine.embed("Hallo")` is one string, not sentences (was: each character embedded, shape (5, 384))."""
    import pytest

    import xmine
    from xmine.errors import ConfigError

    with pytest.raises(ConfigError, match=r"not a sequence of sentences; pass \[text\]"):
        xmine.embed("Hallo", lang="de")
    from pathlib import Path  # a file (was: "expected a path or a sequence of strings, not PosixPath")
    with pytest.raises(ConfigError, match=r"texts: a path \(de.txt\); .* `xmine embed FILE -o STORE`"):
        xmine.embed(Path("de.txt"), lang="de")
    # an empty sentence (was: the vector of "query: " alone, at cosine 0.90 to "Hallo Welt.")
    with pytest.raises(ConfigError, match="texts: item 1 is empty: it has no meaning to embed"):
        xmine.embed(["Hallo Welt.", "  "], lang="de", encoder="use-m3")
    with pytest.raises(ConfigError, match="texts: item 1 is empty"):  # (a zero-width space: as a file's line)
        xmine.embed(["Hallo Welt.", "\u200b"], lang="de", encoder="use-m3")
    # `mine` reads a string as a file: a sentence given for a list says so (was: "no such file" alone)
    from xmine.errors import InputError

    with pytest.raises(InputError, match=r"Der Hund schläft\.: no such file or directory \(a string names a file; "
                                         r"give src's sentences as a list: \['Der Hund schläft\.'\]\)"):
        xmine.mine("Der Hund schläft.", ["The dog sleeps."], src_lang="de", tgt_lang="en")
    with pytest.raises(InputError, match=r"Hallo: no such file or directory \(a string names a file; give src's "
                                         r"sentences as a list: \['Hallo'\]\)"):  # (one word: was no hint)
        xmine.mine("Hallo", ["Hello."], src_lang="de", tgt_lang="en")
    with pytest.raises(InputError, match=r"no/such/de\.txt: no such file or directory$"):  # (a path: none)
        xmine.mine("no/such/de.txt", ["Hello."], src_lang="de", tgt_lang="en")
    with pytest.raises(ConfigError, match=r"^src: a set, whose order changes .*; pass a list \(sorted\(src\)\)$"):
        xmine.mine({"Hallo.", "Tschüss."}, ["Hello."], src_lang="de", tgt_lang="en")


def test_api_embed_reads_a_sentence_as_mine_does(tmp_path, caplog):
    """(a helper: after mine's corpora were read without the whitespace around a sentence,
    `xmine.embed([" X\u00a0"])` still embedded it, cosine 0.989-0.997 to mine's vector of X) The
    vectors `embed` returns are those of the store `xmine embed` writes of the same lines."""
    import numpy as np

    import xmine
    from clitools import ok, xm
    from xmine.store import EmbeddingStore

    lines = ["  Die Katze schläft auf dem Sofa. ", "Er kommt\tmorgen.\u00a0", "Das Wetter ist schön."]
    (tmp_path / "de.txt").write_text("".join(t + "\n" for t in lines), encoding="utf-8")
    ok(xm("embed", tmp_path / "de.txt", "--lang", "de", "-q", "-o", tmp_path / "s"))
    stored = np.asarray(EmbeddingStore.open(tmp_path / "s").rows()[:], dtype=np.float32)
    got = xmine.embed(lines, lang="de")
    assert np.abs(got - stored).max() < 2e-3  # (the store keeps float16)
    # an item longer than a corpus's line is cut where the line is, and said (a helper: embedded whole,
    # cosine 0.52 to the store's vector, without a word)
    long = " ".join(["Hund"] * 450) + " " + " ".join(["Katze Maus Vogel Baum"] * 200)
    (tmp_path / "long.txt").write_text(long + "\nDer Hund schläft.\n", encoding="utf-8")
    ok(xm("embed", tmp_path / "long.txt", "--lang", "de", "--encoder", "use-m3", "-q", "-o", tmp_path / "l"))
    stored = np.asarray(EmbeddingStore.open(tmp_path / "l").rows()[:], dtype=np.float32)
    with caplog.at_level("WARNING"):
        got = xmine.embed([long, "Der Hund schläft."], encoder="use-m3")
    assert np.abs(got - stored).max() < 2e-3
    assert "texts: 1 item(s) longer than 2000 characters are cut to that length for encoding" in caplog.text


def test_api_embed_warns_where_a_prompt_leaves_the_shipped_projection_out():
    """The default space is the shipped projection's; a prompt it was not trained with gives raw
    embeddings, and Python now says so (was: without a word; the command line only logged it)."""
    import warnings

    import numpy as np
    import pytest

    import xmine

    with pytest.warns(UserWarning, match=r"shipped projection was trained on .*pass projection='none'"):
        got = xmine.embed(["Hallo Welt"], lang="de", prompt="passage: ")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # asked for by name: no warning
        raw = xmine.embed(["Hallo Welt"], lang="de", prompt="passage: ", projection="none")
        xmine.embed(["Hallo Welt"], lang="de")  # the default prompt: the shipped projection, no warning
    assert np.allclose(got, raw, atol=1e-6)
    # the command's other encoding options, by their names (was: TypeError, unexpected keyword)
    named = xmine.embed(["Hallo Welt"], lang="de", prompt_name="passage", projection="none", runtime="torch",
                        device="cpu", precision="fp32")
    assert float(named[0] @ raw[0]) > 0.999
    with pytest.raises(xmine.errors.ConfigError, match=r"^runtime must be a string or None \(got 3\)$"):
        xmine.embed(["Hallo Welt"], runtime=3)


def test_api_refuses_values_of_the_wrong_type_in_one_line():
    """What the command line parses, Python callers may give as any object: a string for a number
    (was: TypeError "'<' not supported between instances of 'str' and 'int'") or a language code no
    language has (was: accepted by `embed`)."""
    import numpy as np
    import pytest

    import xmine
    from xmine.errors import ConfigError
    from xmine.mining.approximate import ApproximateConfig
    from xmine.mining.config import SearchConfig
    from xmine.mining.api import summary
    from xmine.mining.filters import PairFilterConfig
    from xmine.mining.select import MiningConfig

    with pytest.raises(ConfigError, match=r"^k must be an integer \(got '4'\)$"):
        xmine.mine(["Hallo"], ["Hello"], k="4", encoder="use-m3")
    with pytest.raises(ConfigError, match=r"^k must be an integer \(got True\)$"):
        xmine.score(["Hallo"], ["Hello"], k=True, encoder="use-m3")
    with pytest.raises(ConfigError, match=r"^max_length_ratio must be a number \(got '3'\)$"):
        MiningConfig(max_length_ratio="3")
    with pytest.raises(ConfigError, match=r"^block_rows must be an integer \(got 2.5\)$"):
        SearchConfig(block_rows=2.5)
    with pytest.raises(ConfigError, match=r"^ray must be a string \(got True\)$"):  # (was: an AttributeError)
        SearchConfig(ray=True)
    from xmine.exec.cluster import connect
    with pytest.raises(ConfigError, match="ray must be 'auto' or a Ray cluster's address"):
        connect(5)
    with pytest.raises(ConfigError, match=r"^nprobe must be an integer \(got '8'\)$"):
        ApproximateConfig(nprobe="8")
    with pytest.raises(ConfigError, match=r"^score_max must be a number \(got '1.2'\)$"):
        xmine.score(["Hallo"], ["Hello"], filters=PairFilterConfig(score_max="1.2"), encoder="use-m3")
    with pytest.raises(ConfigError, match=r"^score_max must be a finite number \(got nan\)$"):
        PairFilterConfig(score_max=float("nan"))
    with pytest.raises(ConfigError, match=r"^min_script_share must be a number \(got 'x'\)$"):
        PairFilterConfig(min_script_share="x")
    assert SearchConfig(k=np.int64(4), block_rows=None).k == 4  # numpy integers are integers
    # ... and become Python's: k=np.int64(3) passed the check, then failed in json.dumps of the
    # search's checkpoint key after the embedding ("Object of type int64 is not JSON serializable")
    table = xmine.mine(["Hallo Welt.", "Es regnet."], ["Hello world.", "It rains."], encoder="use-m3", k=np.int64(3),
                       threshold=np.float32(1.5), search=None)
    assert type(summary(table)["k_used"]) is int
    with pytest.raises(ConfigError, match=r"^lang='zzz': not a known language code$"):
        xmine.embed(["Hallo"], lang="zzz", encoder="use-m3")


def test_encoding_writes_nothing_to_the_users_home(tmp_path):
    """Importing OpenVINO wrote ~/intel/openvino_ga_cid and ~/intel/stats on every run (its tools'
    usage telemetry, sent unless the user opted out): xmine runs it with the library's stub. In a
    subprocess whose HOME is empty, outside CI (the telemetry switches itself off where CI=true)."""
    import os

    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TF_BUILD", "JENKINS_URL")}
    real_home = Path.home()
    env.setdefault("XMINE_HOME", str(real_home / ".cache" / "xmine"))
    env.setdefault("HF_HOME", str(real_home / ".cache" / "huggingface"))
    env["HOME"] = str(home)
    code = ("import xmine; v = xmine.embed(['Hallo Welt'], lang='de', precision='fp32'); "
            "from xmine.encoders.runtime import require_openvino; require_openvino(); print(v.shape)")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert sorted(p.name for p in home.iterdir()) == [], sorted(str(p) for p in home.rglob("*"))


def test_api_checks_what_python_callers_pass_before_anything_runs(tmp_path):
    """From a user test of the API: a string for a flag was taken for its truth (`approximate="no"`
    turned the approximate search on), `score` took any language code, and the rest failed deep
    inside with bare TypeErrors (from the tokenizer, pathlib, `len` of a generator)."""
    import pytest

    import xmine
    from xmine.errors import ConfigError, InputError
    from xmine.mining.api import summary
    from xmine.mining.config import EncodingConfig

    de, en = ["Der Hund schläft.", "Es regnet."], ["The dog sleeps.", "It rains."]
    refusals = [
        (lambda: xmine.mine(de, en, approximate="no"), r"^approximate must be True or False \(got 'no'\)$"),
        (lambda: xmine.mine(de, en, lang_filter="x"), r"^lang_filter must be True or False \(got 'x'\)$"),
        (lambda: xmine.mine(de, en, filters="yes"), r"^filters must be True or False, None or a FilterConfig"),
        (lambda: xmine.score(de, en, kept_only="yes"), r"^kept_only must be True or False \(got 'yes'\)$"),
        (lambda: xmine.score(de, en, src_lang="xx"), r"^src_lang='xx': not a known language code$"),
        # (was: "src (the list given): 'xx' is not a known language code", not naming the argument)
        (lambda: xmine.mine(de, en, src_lang="xx", tgt_lang="en"), r"^src_lang='xx': not a known language code$"),
        # (was: an EncoderError, which `except ConfigError` does not catch)
        (lambda: xmine.embed(de, precision=3), r"^precision must be a string or None \(got 3\)$"),
        (lambda: xmine.score(de, en[:1]), r"^2 source and 1 target sentences: pairs need as many of each$"),
        (lambda: xmine.score(de), r"^score: a list of sources needs its targets \(tgt=\)"),
        (lambda: xmine.mine(de + [5], en), r"^src: expected a path or a sequence of strings; item 2 is a int$"),
        (lambda: xmine.mine(5, en), r"^src: expected a path or a sequence of strings, not int$"),
        (lambda: xmine.mine(de, en, search={"k": 3}), r"^search: expected an xmine.mining.config.SearchConfig"),
        (lambda: EncodingConfig(encoder=3), r"^encoder must be a string \(got 3\)$"),
        (lambda: xmine.mine(de, en, projection=5), r"^projection must be a string or path \(got 5\)$"),
        (lambda: xmine.embed([1, 2]), r"^texts: item 0 is a int, not a string$"),
        # no text (a helper: the tokenizer's TypeError; a NUL embedded; a UnicodeEncodeError writing a list)
        (lambda: xmine.embed(["a\ud800b"]), r"^texts: item 0 holds a lone surrogate \(\\ud800\)"),
        (lambda: xmine.embed(de, projection=""), r"^projection=: an empty value"),  # (was: the working directory)
        (lambda: xmine.embed(["ok", "a\x00b"]), r"^texts: item 1 holds a NUL character"),
        (lambda: xmine.mine(de, en[:1] + ["x\udc00"]), r"^tgt: item 1 holds a lone surrogate"),
        (lambda: xmine.score(de, ["a\x00", "b"]), r"^tgt: item 0 holds a NUL character"),
        (lambda: xmine.embed(de, prompt=5), r"^prompt must be a string or None \(got 5\)$"),
        (lambda: xmine.embed(de, batch_size=0), r"^batch_size must be an integer >= 1 \(got 0\)$"),
        (lambda: summary([1]), r"^summary: not a table xmine.mine or xmine.score returned"),
    ]
    for call, message in refusals:
        with pytest.raises(ConfigError, match=message):
            call()
    # a list with no sentence is named as the list, not as the temporary file written from it
    with pytest.raises(InputError, match=r"^src \(the list given\): no sentence in the list \(2 item\(s\)"):
        xmine.mine(["", "  "], en, encoder="use-m3")
    # a generator is read once, in score as in mine
    table = xmine.score((s for s in de), (s for s in en), src_lang="de", tgt_lang="en", encoder="use-m3")
    assert table.num_rows == 2 and summary(table)["pairs"] == 2
    (tmp_path / "en.txt").write_text("".join(s + "\n" for s in en), encoding="utf-8")  # a list beside a file
    table = xmine.score(de, tmp_path / "en.txt", src_lang="de", tgt_lang="en", encoder="use-m3")
    assert table.column("tgt").to_pylist() == en


def test_api_score_takes_the_corpora_its_note_advises(data_dir):
    """Three pairs are too few for neighbourhoods of k=4: the note advises corpora of each language,
    which `xmine.score` now takes as `xmine score --src-corpus/--tgt-corpus` does (was: no such keyword)."""
    import xmine
    from tests.flores import flores_lines
    from xmine.mining.api import summary

    de, en = flores_lines(data_dir, "deu_Latn", 3), flores_lines(data_dir, "eng_Latn", 3)
    alone = summary(xmine.score(de, en, src_lang="de", tgt_lang="en", encoder="use-m3"))
    assert "--src-corpus and --tgt-corpus" in alone["threshold"]["few_neighbours"]
    table = xmine.score(de, en, src_lang="de", tgt_lang="en", encoder="use-m3",
                        src_corpus=flores_lines(data_dir, "deu_Latn", 200, start=300),
                        tgt_corpus=flores_lines(data_dir, "eng_Latn", 200, start=300))
    assert "few_neighbours" not in summary(table)["threshold"] and table.column("keep").to_pylist() == [True] * 3


def test_api_score_reads_a_bitext_of_any_fields_as_the_command_does(data_dir, tmp_path):
    """(was: no reading options, so a bitext whose fields are not the defaults could not be scored)"""
    import json

    import xmine
    from tests.flores import flores_lines
    from xmine.errors import ConfigError, InputError
    from xmine.mining.bitext import BitextFormat

    de, en = flores_lines(data_dir, "deu_Latn", 12), flores_lines(data_dir, "eng_Latn", 12)
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"de": a, "en": b, "n": i}) + "\n"
                                              for i, (a, b) in enumerate(zip(de, en))), encoding="utf-8")
    fields = BitextFormat(src_field="de", tgt_field="en")
    table = xmine.score(tmp_path / "b.jsonl", src_lang="de", tgt_lang="en", encoder="use-m3", bitext_format=fields)
    lists = xmine.score(de, en, src_lang="de", tgt_lang="en", encoder="use-m3")
    assert table.column("margin").to_pylist() == lists.column("margin").to_pylist()
    with pytest.raises(InputError, match=r"b\.jsonl:1: no field 'text' \(fields: de, en, n\); choose one with "
                                         r"BitextFormat\(src_field=\)"):
        xmine.score(tmp_path / "b.jsonl", src_lang="de", tgt_lang="en", encoder="use-m3",
                    bitext_format=BitextFormat(src_field="text", tgt_field="en"))
    with pytest.raises(ConfigError, match=r"^bitext_format: reads a bitext file or folder given as src alone"):
        xmine.score(de, en, bitext_format=fields)
    with pytest.raises(ConfigError, match=r"^bitext_format: expected an xmine.mining.bitext.BitextFormat, not dict"):
        xmine.score(tmp_path / "b.jsonl", bitext_format={"src_field": "de"})


def test_api_takes_any_os_pathlike_and_refuses_fields_a_list_has_not(tmp_path):
    """(was: an os.PathLike other than pathlib's refused as "not a sequence of strings"; keep_fields="id"
    taken as the fields "i" and "d"; keep_fields with a list named --keep-field and the temporary file)"""
    import os

    import xmine
    from xmine.errors import ConfigError
    from xmine.mining.api import summary

    class UserPath(os.PathLike):  # e.g. a cloud library's local path object
        def __init__(self, path):
            self.path = str(path)

        def __fspath__(self):
            return self.path

    de, en = ["Der Hund schläft.", "Es regnet."], ["The dog sleeps.", "It rains."]
    for name, lines in (("de.txt", de), ("en.txt", en)):
        (tmp_path / name).write_text("".join(s + "\n" for s in lines), encoding="utf-8")
    table = xmine.score(UserPath(tmp_path / "de.txt"), UserPath(tmp_path / "en.txt"), src_lang="de",
                        tgt_lang="en", encoder="use-m3")
    assert table.column("src").to_pylist() == de and summary(table)["pairs"] == 2
    mined = xmine.mine(UserPath(tmp_path / "de.txt"), en, src_lang="de", tgt_lang="en", encoder="use-m3",
                       threshold=None)
    assert set(mined.column("src_file").to_pylist()) == {str(tmp_path / "de.txt")}
    with pytest.raises(ConfigError, match=r"^keep_fields must be a list of field names, not the string 'id'"):
        xmine.mine(tmp_path / "de.txt", en, keep_fields="id", encoder="use-m3")
    with pytest.raises(ConfigError, match=r"^keep_fields: src is a list of sentences, which has no fields"):
        xmine.mine(de, en, keep_fields=["id"], encoder="use-m3")


def test_api_errors_name_the_keywords_a_python_caller_passes(caplog):
    """(were: "give --threshold or --operating-point, not both", "-k 300: at most 256", "--threshold
    0.5 is below ...: add --margin distance" to a caller who passed keywords; FilterConfig(pre_clean=
    False) and PreSearchConfig(disabled="copies") accepted, then an AttributeError or "unknown steps
    c, e, i, o, p, s"; list-of-lists embeddings an AttributeError; a warning about a list naming its
    temporary file)"""
    import numpy as np
    import pytest

    import xmine
    from xmine.errors import ConfigError
    from xmine.mining.api_terms import python_terms
    from xmine.mining.config import FilterConfig
    from xmine.mining.filters import PairFilterConfig
    from xmine.mining.presearch import PreSearchConfig
    from xmine.mining.select import mine_embeddings

    with pytest.raises(ConfigError, match=r"^give threshold= or operating_point=, not both$"):
        xmine.mine(["Hallo."], ["Hello."], threshold=1.1, operating_point="precision")
    with pytest.raises(ConfigError, match=r"^k=300: at most 256"):
        xmine.score(["Hallo."], ["Hello."], k=300, encoder="use-m3")
    with pytest.raises(ConfigError) as e:
        xmine.mine(["Hallo."], ["Hello."], threshold=0.5, encoder="use-m3")
    assert "threshold=0.5" in str(e.value) and "margin='distance'" in str(e.value) and "--" not in str(e.value)
    # what is not an option of the API is left as it is
    assert python_terms("see xmine verify --help; -k 4") == "see xmine verify --help; k=4"
    assert python_terms("use --precision fp32 or --threshold none") == "use precision='fp32' or threshold=None"
    # (a helper: "device='cuda':7", "tgt_lang= en", "threshold==0.5", a command line to type rewritten,
    # and the switches of a rule left as options)
    for said, meant in (("--device cuda:7", "device='cuda:7'"), ("than --tgt-lang en", "than tgt_lang='en'"),
                        ("--src-lang and --tgt-lang not given", "src_lang= and tgt_lang= not given"),
                        ("--projection /x/y", "projection='/x/y'"), ("--threshold=0.5", "threshold=0.5"),
                        ("--encoder=use-m3", "encoder='use-m3'"),
                        ("within --min-length 1,000 (characters)", "within FilterConfig(min_length=1000) (characters)"),
                        ("at -k 8 (xmine calibrate -k 8, then --calibration)",
                         "at k=8 (xmine calibrate -k 8, then calibration=)"),
                        ("--no-pre-clean-step copies keeps them, and --no-filter identical a sentence",
                         "PreSearchConfig(disabled=frozenset({'copies'})) keeps them, and "
                         "PairFilterConfig(disabled=frozenset({'identical'})) a sentence")):
        assert python_terms(said) == meant, said
    # the search's options (a helper: "use --index-type flat or hnsw" reached xmine.score's caller)
    assert python_terms("use --index-type flat or hnsw, a smaller --nlist") == (
        "use SearchConfig(index_type='flat') or hnsw, a smaller SearchConfig(nlist=)")
    for bad, message in ((dict(pre_clean=False), "pre_clean must be a PreSearchConfig (got False;"),
                         (dict(pairs=True), "pairs must be a PairFilterConfig (got True;")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            FilterConfig(**bad)
    for cls, word in ((PreSearchConfig, "copies"), (PairFilterConfig, "numbers")):
        with pytest.raises(ConfigError, match=f"not the string '{word}'; pass {{'{word}'}}"):
            cls(disabled=word)
    with pytest.raises(ConfigError, match="x must be a 2-D numpy array of embeddings"):
        mine_embeddings([[1.0, 0.0]], np.eye(2, dtype=np.float32))
    with caplog.at_level("WARNING", logger="xmine"):
        xmine.score(["Hallo Welt."], ["Hello world."], encoder="use-m3", threshold=None)
    said = [r.getMessage() for r in caplog.records]
    # in the caller's terms (was: "no --src-lang or --tgt-lang given", options a Python caller has not)
    assert any(m.startswith("the lists given: no src_lang= or tgt_lang= given") for m in said), said
    assert not any("xmine-api" in m or "--" in m for m in said), said
    caplog.clear()
    with caplog.at_level("WARNING", logger="xmine"):  # outside an API call, a message is as it was logged
        logging.getLogger("xmine.mining.score").warning("no --src-lang given")
    assert [r.getMessage() for r in caplog.records] == ["no --src-lang given"]
    de = ["Der Hund schläft im Garten.", "Das Museum ist montags geschlossen.", "Wir baden gern im Meer.",
          "Morgen regnet es den ganzen Tag.", "Die Kinder spielen auf der Straße.", "Ich trinke keinen Kaffee mehr."]
    caplog.clear()
    with caplog.at_level("WARNING", logger="xmine"):
        xmine.mine(de, de, src_lang="de", tgt_lang="en", encoder="use-m3", threshold=None)
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("tgt (the list given): ") and "of its sentences fail the language filter for tgt_lang=" in m
               for m in said), said
    assert not any("xmine-api" in m for m in said), said


def test_api_says_its_result_and_refusals_in_terms_of_what_the_caller_passed(tmp_path):
    """(were: a pandas DataFrame read as its column names and mined; keep_fields=None a TypeError;
    the summary naming the deleted temporary directory and the sha256 of a file in it; a list and a
    file of different lengths named by the list's temporary file, or in lines and items at once;
    allow_same_input unreachable though the refusal advised it; the warning of `embed` pointing at
    the API's own wrapper)"""
    import warnings

    import pandas as pd

    import xmine
    from xmine.errors import ConfigError, InputError
    from xmine.mining.api import summary

    de, en = ["Der Hund schläft.", "Es regnet.", "Ich mag Tee."], ["The dog sleeps.", "It rains."]
    (tmp_path / "de.txt").write_text("".join(s + "\n" for s in de), encoding="utf-8")
    (tmp_path / "en.txt").write_text("".join(s + "\n" for s in en), encoding="utf-8")
    for call in (lambda: xmine.mine(pd.DataFrame({"text": de}), en, encoder="use-m3"),
                 lambda: xmine.score(pd.DataFrame({"text": de[:2]}), en, encoder="use-m3")):
        with pytest.raises(ConfigError, match=r"^src: a table \(DataFrame\), not a sequence of strings; pass the "
                                              r"column of its sentences, e\.g\. src=df\['text'\]"):
            call()
    table = xmine.mine(pd.Series(de), en, encoder="use-m3", keep_fields=None, threshold=None)
    info = summary(table)
    assert "xmine-api" not in str(info) and "output_files" not in info, info
    assert info["src"]["path"] == "src (the list given)" and info["output"] == "(the returned table)"
    assert [i["path"] for i in info["provenance"]["parameters"]["inputs"]] == ["src (the list given)",
                                                                               "tgt (the list given)"]
    with pytest.raises(InputError, match=r"^tgt \(the list given\): ends after 2 items, but .*de\.txt "
                                         r"goes on$"):
        xmine.score(tmp_path / "de.txt", en, encoder="use-m3")
    with pytest.raises(InputError, match=r"en\.txt:3: ends at line 2, but src \(the list given\) goes on$"):
        xmine.score(de, tmp_path / "en.txt", encoder="use-m3")
    with pytest.raises(ConfigError, match=r"pass allow_same_input=True if that is what you want$"):
        xmine.mine(tmp_path / "de.txt", tmp_path / "de.txt", encoder="use-m3")
    same = xmine.mine(tmp_path / "de.txt", tmp_path / "de.txt", encoder="use-m3", allow_same_input=True,
                      pre_clean=False, filters=False, threshold=None)
    assert len(same) == 3 and same.column("src_record").to_pylist() == same.column("tgt_record").to_pylist()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        xmine.embed(["Hallo Welt"], lang="de", prompt="passage: ")
    assert [w.filename for w in caught] == [__file__], [(w.filename, str(w.message)) for w in caught]
    # a value no encoder has: a ConfigError, as EncodingConfig's (was: an EncoderError; precision=None refused)
    for bad in (dict(precision="bogus"), dict(runtime="bogus")):
        with pytest.raises(ConfigError, match=rf"^{next(iter(bad))} must be one of .* \(got 'bogus'\)$"):
            xmine.embed(["Hallo Welt"], encoder="use-m3", **bad)
    assert xmine.embed(["Hallo Welt"], encoder="use-m3", precision=None).shape == (1, 512)


def test_reading_configs_check_their_fields_and_take_a_column_number(tmp_path):
    """(a helper: BitextFormat(src_field=1), the documented 1-based column, was an AttributeError,
    BitextFormat(format='x') a KeyError inside score, InputFormat(text_field=5) an AttributeError,
    embed(encoder=5) and SideInput(keep_fields=5) TypeErrors, and "--text-column" and " / " left
    as options and a path in what a Python caller reads.)"""
    import xmine
    from xmine.errors import ConfigError
    from xmine.io.reader_base import InputFormat
    from xmine.mining.api_terms import python_terms
    from xmine.mining.bitext import BitextFormat
    from xmine.mining.config import SideInput

    (tmp_path / "pairs.tsv").write_text("de\ten\nDer Hund schläft.\tThe dog sleeps.\nEs regnet.\tIt rains.\n",
                                        encoding="utf-8")
    table = xmine.score(tmp_path / "pairs.tsv", bitext_format=BitextFormat(src_field=1, tgt_field=2, header=True),
                        encoder="use-m3", threshold=None)
    assert table.column(table.column_names[0]).to_pylist() == ["Der Hund schläft.", "Es regnet."], table.column_names
    assert InputFormat(format="tsv", text_field=2).text_field == "2"
    for make, message in ((lambda: BitextFormat(format="x"), "format must be auto or one of tsv, csv"),
                          (lambda: BitextFormat(header="yes"), "header must be True or False (got 'yes')"),
                          (lambda: InputFormat(header="yes"), "header must be True or False (got 'yes')"),
                          (lambda: InputFormat(text_field=["text"]), "text_field must be a string (got ['text'])"),
                          (lambda: SideInput(path="de.txt", keep_fields=5), "keep_fields must be a list of field "
                                                                              "names, not 5"),
                          (lambda: xmine.embed(["a"], encoder=5), "encoder must be a string or None (got 5)"),
                          (lambda: xmine.embed(["a"], projection=5), "projection must be a string or None (got 5)")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            make()
    assert python_terms("choose one with --text-field or --text-column") == (
        "choose one with InputFormat(text_field=) or InputFormat(text_field=)")
    assert python_terms("give --src-field / --tgt-field") == "give BitextFormat(src_field=) / BitextFormat(tgt_field=)"


def test_the_training_and_encoder_apis_refuse_wrong_arguments_with_one_typed_error(tmp_path, monkeypatch, caplog):
    """(a helper: from Python, `discover_pairs("./pairs")` walked "." and "/" as the folders of its
    characters, `langs="deu,eng"` read as the languages ",", "d", ...; `lr="1"`, `config=None`,
    `encoder="me5-small"` were tracebacks, `batch_size=2.5` one after every sentence was embedded;
    `encode("Hallo Welt")` embedded each character; an export's wrong `part` failed after its encoder
    was built; `load_projection(None)` a TypeError)"""
    from xmine.disentangle import TrainConfig, discover_pairs, export_sentence_transformer, load_projection, train
    from xmine.encoders import load_encoder
    from xmine.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    for call, said in (
            (lambda: discover_pairs("./pairs"), "pair specs must be a list, not the single str './pairs': pass ['./pairs']"),
            (lambda: discover_pairs(tmp_path), "pass ["),
            (lambda: discover_pairs(None), "pair specs must be a list of directories"),
            (lambda: discover_pairs([str(tmp_path)], langs="deu"), "langs must be a list"),
            (lambda: TrainConfig(langs="deu,eng").check(), "langs must be a list, not the single str 'deu,eng': pass "
                                                           "['deu', 'eng']"),
            (lambda: TrainConfig(lr="1").check(), "lr must be a number (got '1')"),
            (lambda: TrainConfig(batch_size=2.5).check(), "batch_size must be an integer (got 2.5)"),
            (lambda: train(["a:b"], tmp_path / "p", encoder="use-m3", config=None), "config must be a TrainConfig"),
            (lambda: load_encoder("use-m3").encode("Hallo Welt"), "sentences must be a list of strings, not one str"),
            (lambda: load_encoder("use-m3").encode(["Hallo", None]), "sentences must be strings: item 1 is None"),
            (lambda: export_sentence_transformer(REPO / "xmine" / "projections" / "me5-small", "me5-small",
                                                 tmp_path / "st", part="foo"), "part must be one of meaning, language"),
            (lambda: load_projection(None), "a projection is named by its directory (got None)")):
        with pytest.raises(ConfigError) as e:
            call()
        assert said in str(e.value), str(e.value)
    assert not (tmp_path / "st").exists() and not (tmp_path / "p").exists()
    # an encoder given by its name, as --encoder takes it, is loaded
    demo = [line.split("\t") for line in (REPO / "demo" / "gold.tsv").read_text().splitlines()[1:]]
    de, en = ((REPO / "demo" / f"{lang}.txt").read_text(encoding="utf-8").splitlines() for lang in ("de", "en"))
    (tmp_path / "p.de").write_text("".join(de[int(a) - 1] + "\n" for a, _ in demo), encoding="utf-8")
    (tmp_path / "p.en").write_text("".join(en[int(b) - 1] + "\n" for _, b in demo), encoding="utf-8")
    trained = train([f"{tmp_path / 'p.de'}:{tmp_path / 'p.en'}"], tmp_path / "p", encoder="use-m3",
                    config=TrainConfig(method="center"), show_progress=False)
    assert trained.config["encoder"]["name"] == "use-m3"


def test_a_list_sides_warning_names_it_once(caplog):
    """(a helper: "warning: tgt tgt (the list given): declared tgt_lang='deu', ...")"""
    import xmine

    with caplog.at_level("WARNING", logger="xmine"):
        xmine.mine(["Der Hund schläft.", "Ich trinke Kaffee."], ["The dog sleeps.", "I drink tea."], src_lang="de",
                   tgt_lang="deu", threshold=None)
    said = [r.getMessage() for r in caplog.records if "declared tgt_lang" in r.getMessage()]
    assert said and said[0].startswith("warning: tgt (the list given): declared tgt_lang='deu'"), said
