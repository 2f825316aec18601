"""Input formats (compressed text, JSON Lines, Parquet, Hugging Face datasets) and output formats
(TSV, .tsv.gz, Moses, JSON Lines, Parquet, a Hugging Face dataset folder), through the CLI with
real files and the real default encoder: 16 German sentences of the demo against their English
translations in another order, so every mined pair can be checked against the gold alignment."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import shutil
import lzma
import random
import re
from pathlib import Path

import numpy as np
import pytest

from clitools import files_under, ok, refused, untouched, warned, xm
from xmine.errors import ConfigError, InputError
from xmine.mining.writers import output_format

REPO = Path(__file__).resolve().parent.parent
N = 16


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """de[i] translates en[perm[i]]: the gold pairs of demo/gold.tsv, the English side shuffled."""
    d = tmp_path_factory.mktemp("io")
    gold = [line.split("\t") for line in (REPO / "demo" / "gold.tsv").read_text().splitlines()[1:]][:N]
    de_all = (REPO / "demo" / "de.txt").read_text(encoding="utf-8").splitlines()
    en_all = (REPO / "demo" / "en.txt").read_text(encoding="utf-8").splitlines()
    de = [de_all[int(a) - 1] for a, _ in gold]
    perm = list(range(N))
    random.Random(0).shuffle(perm)
    en = [""] * N
    for i, j in enumerate(perm):
        en[j] = en_all[int(gold[i][1]) - 1]
    (d / "de.txt").write_text("".join(s + "\n" for s in de), encoding="utf-8")
    (d / "en.txt").write_text("".join(s + "\n" for s in en), encoding="utf-8")
    return {"dir": d, "de": de, "en": en, "gold": {de[i]: en[perm[i]] for i in range(N)}}


@pytest.fixture(scope="module")
def plain_tsv(corpus, tmp_path_factory) -> str:
    """The TSV `mine` writes for the plain text sides (de, en). Several tests compare another input
    or output form against it: mined once here, as each of them would mine it (each `mine` encodes
    both sides twice: the stores, then the language check's sample)."""
    d, out = corpus["dir"], tmp_path_factory.mktemp("plain") / "plain.tsv"
    ok(xm("mine", d / "de.txt", d / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "-q", "-o", out))
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def stores(corpus, tmp_path_factory) -> tuple[Path, Path]:
    """Embedding stores of the plain text sides (de, en), each encoded once. The tests of an output
    format mine these: what they check is the writer, and a store side carries its language, so no
    --src-lang/--tgt-lang (and no language check encoding a sample of each side again) is needed."""
    d, out = corpus["dir"], tmp_path_factory.mktemp("stores")
    for lang in ("de", "en"):
        ok(xm("embed", d / f"{lang}.txt", "--lang", lang, "-q", "-o", out / lang))
    return out / "de", out / "en"


def _jsonl(path: Path, texts: list[str], prefix: str) -> Path:
    """Nested text and an id; a blank line after the third record (record numbers are file lines)."""
    lines = [json.dumps({"id": f"{prefix}{i}", "meta": {"text": t, "len": len(t)}}, ensure_ascii=False)
             for i, t in enumerate(texts)]
    lines.insert(3, "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _parquet(path: Path, texts: list[str]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"sentence": texts, "n": list(range(len(texts)))})
    pq.write_table(table, path, row_group_size=5)  # several row groups, read batch by batch
    return path


def _precision(pairs: list[tuple[str, str]], gold: dict[str, str]) -> float:
    return sum(gold.get(s) == t for s, t in pairs) / max(len(pairs), 1)


# ------------------------------------------------------------------------------------------ inputs


def test_compressed_text_gives_the_same_store(corpus, tmp_path):
    plain = corpus["dir"] / "de.txt"
    raw = plain.read_bytes()
    import zstandard

    made = {"gz": gzip.compress(raw), "xz": lzma.compress(raw), "bz2": bz2.compress(raw),
            "zst": zstandard.ZstdCompressor().compress(raw)}
    ok(xm("embed", plain, "--lang", "de", "-q", "-o", tmp_path / "plain"))
    want = (tmp_path / "plain" / "sentences.txt").read_bytes()
    want_emb = np.load(tmp_path / "plain" / "emb-00000.npy")
    for ext, data in made.items():
        src = tmp_path / f"de.txt.{ext}"
        src.write_bytes(data)
        ok(xm("embed", src, "--lang", "de", "-q", "-o", tmp_path / ext))
        assert (tmp_path / ext / "sentences.txt").read_bytes() == want, ext
        assert np.array_equal(np.load(tmp_path / ext / "emb-00000.npy"), want_emb), ext
        assert json.loads((tmp_path / ext / "manifest.json").read_text())["input_stats"]["compression"] == \
            {"gz": "gzip", "xz": "xz", "bz2": "bzip2", "zst": "zstd"}[ext]


def test_jsonl_nested_field_with_ids_into_jsonl_and_meta(corpus, tmp_path):
    de = _jsonl(tmp_path / "de.jsonl", corpus["de"], "de-")
    en = tmp_path / "en.jsonl.gz"  # compressed JSON Lines
    en.write_bytes(gzip.compress(_jsonl(tmp_path / "en-plain.jsonl", corpus["en"], "en-").read_bytes()))
    out = tmp_path / "mined.jsonl"
    ok(xm("mine", de, en, "--src-lang", "deu_Latn", "--tgt-lang", "en", "--text-field", "meta.text",
          "--id-field", "id", "--meta", "-q", "-o", out))
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= N - 2
    assert {tuple(r["translation"]) for r in rows} == {("deu_Latn", "en")}  # the codes as the user gave them
    assert _precision([(r["translation"]["deu_Latn"], r["translation"]["en"]) for r in rows], corpus["gold"]) == 1.0
    scores = [r["score"] for r in rows]
    assert scores == sorted(scores, reverse=True)
    for r in rows:  # provenance: the record's own id and its line in the file (a blank line after 3)
        i = corpus["de"].index(r["translation"]["deu_Latn"])
        assert r["src_id"] == f"de-{i}" and r["src_record"] == i + 1 + (i >= 3)
        assert r["src_file"] == str(de) and r["tgt_file"] == str(en)
        j = corpus["en"].index(r["translation"]["en"])
        assert r["tgt_id"] == f"en-{j}" and r["tgt_record"] == j + 1 + (j >= 3)
    # OUT.meta in stopes' bimeta layout: score, src meta, tgt meta; a record's meta is its id here
    meta = [line.split("\t") for line in (tmp_path / "mined.jsonl.meta").read_text(encoding="utf-8").splitlines()]
    assert meta == [[f"{r['score']:.6f}", r["src_id"], r["tgt_id"]] for r in rows]
    # TMX carries them as props (was: every format but TMX carried the ids)
    ok(xm("mine", de, en, "--src-lang", "deu_Latn", "--tgt-lang", "en", "--text-field", "meta.text",
          "--id-field", "id", "-q", "-o", tmp_path / "mined.tmx"))
    import xml.etree.ElementTree as ET

    units = ET.parse(tmp_path / "mined.tmx").getroot().findall("body/tu")
    assert [[(p.get("type"), p.text) for p in tu.findall("prop")][:3] for tu in units] == [
        [("x-score", f"{r['score']:.6f}"), ("x-src_id", r["src_id"]), ("x-tgt_id", r["tgt_id"])] for r in rows]


def test_records_sharing_an_id_are_warned_of_and_counted(corpus, tmp_path, caplog):
    """Two records of one id cannot be told apart in the pairs that name them by id: said with the
    first such id and two of its lines, and counted in the store's manifest."""
    de = _jsonl(tmp_path / "de.jsonl", corpus["de"][:8], "de-")  # lines 1-3, a blank line, 5-9
    text = de.read_text(encoding="utf-8").replace('"de-6"', '"de-1"').replace('"de-7"', '"de-2"')
    de.write_text(text.replace('"de-4"', '"de-1"'), encoding="utf-8")
    ok(xm("embed", de, "--lang", "de", "--text-field", "meta.text", "--id-field", "id", "-q", "-o", tmp_path / "s"))
    assert warned(caplog, f"{de}: 5 records share their id with another record (id field 'id': 'de-1' at {de}:2 "
                          f"and {de}:6); the ids in mined pairs will not tell them apart")
    stats = json.loads((tmp_path / "s" / "manifest.json").read_text())["input_stats"]
    assert stats["records_sharing_an_id"] == 5 and stats["shared_id"] == {"id": "de-1", "lines": [2, 6]}
    caplog.clear()
    ok(xm("embed", tmp_path / "de.jsonl", "--lang", "de", "--text-field", "meta.text", "-q", "-o", tmp_path / "t"))
    assert "records_sharing_an_id" not in json.loads((tmp_path / "t" / "manifest.json").read_text())["input_stats"]
    assert not [r for r in caplog.records if "share their id" in r.getMessage()]


def test_parquet_input_into_parquet_output(corpus, tmp_path):
    import pyarrow.parquet as pq

    de, en = _parquet(tmp_path / "de.parquet", corpus["de"]), _parquet(tmp_path / "en.parquet", corpus["en"])
    out = tmp_path / "mined.parquet"
    ok(xm("mine", de, en, "--src-lang", "de", "--tgt-lang", "eng", "--text-column", "sentence", "-q", "-o", out))
    table = pq.read_table(out)
    assert table.column_names[:7] == ["translation", "score", "direction", "src_file", "src_record", "tgt_file",
                                      "tgt_record"]
    rows = table.to_pylist()
    assert len(rows) >= N - 2
    assert _precision([(r["translation"]["de"], r["translation"]["eng"]) for r in rows], corpus["gold"]) == 1.0
    for r in rows:  # the record is the 1-based row of the table
        assert corpus["de"][r["src_record"] - 1] == r["translation"]["de"]
        assert corpus["en"][r["tgt_record"] - 1] == r["translation"]["eng"]


def test_hf_folder_into_hf_dataset_with_card(corpus, tmp_path):
    import datasets

    for lang in ("de", "en"):
        dd = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": corpus[lang]}),
                                   "test": datasets.Dataset.from_dict({"text": corpus[lang][:2]})})
        dd.save_to_disk(str(tmp_path / f"{lang}_ds"))
    out = tmp_path / "mined"
    args = ["mine", tmp_path / "de_ds", tmp_path / "en_ds", "--src-lang", "de", "--tgt-lang", "en", "--split",
            "train", "--format", "hf", "-q", "-o", out]
    ok(xm(*args))
    ds = datasets.load_from_disk(str(out))
    assert len(ds) >= N - 2
    assert _precision([(r["translation"]["de"], r["translation"]["en"]) for r in ds], corpus["gold"]) == 1.0
    card = (out / "README.md").read_text(encoding="utf-8")
    summary = json.loads((tmp_path / "mined.json").read_text())
    assert "me5-small" in card and str(summary["threshold"]["value"]) in card and "- translation" in card
    for inp in summary["provenance"]["parameters"]["inputs"]:  # the inputs' hashes
        assert inp["sha256"] in card and inp["format"] == "hf"
    for tag, role in (("source", "src"), ("target", "tgt")):  # and what was read of them (was: not said)
        side = summary[role]
        assert (f"; {side['sentences']:,} sentences, {side['unique']:,} distinct, {side['mined_rows']:,} searched |"
                in next(line for line in card.splitlines() if line.startswith(f"| {tag} input |")))
    assert ds.features["translation"] == datasets.Translation(languages=["de", "en"])
    assert str(tmp_path) not in card and str(REPO) not in card  # no local paths in a card one publishes
    assert "SHIPPED.json" in card  # where the threshold came from
    removed = summary["filters"]["removed"]
    assert f"removed: {', '.join(f'{rule} {n}' for rule, n in removed.items())}" in card
    assert "| language filter | on" in card and "pre-search cleaning" in card
    ok(xm("verify", out))
    before = (out / "data-00000-of-00001.arrow").read_bytes()
    refused(xm(*args), "already exists")
    ok(xm(*args, "--overwrite"))
    assert (out / "data-00000-of-00001.arrow").read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries left
    (out / "README.md").write_text("edited", encoding="utf-8")  # someone's edit is never replaced
    refused(xm(*args, "--overwrite"), "changed since xmine wrote it")
    # verify names the file inside the folder (was: the folder alone)
    (out / "extra.txt").write_text("x", encoding="utf-8")
    refused(xm("verify", out), f"{out}: size or sha256 differs from mined.json (README.md (changed), extra.txt (not "
                               "recorded)): changed or damaged")


def test_no_pair_kept_is_an_empty_dataset_folder_that_loads(corpus, tmp_path):
    """(was: a traceback from datasets, "BatchSize must be greater than 0", an unfinished OUT.json,
    and the --keep-filtered file written as finished)"""
    import datasets

    out = tmp_path / "none"
    ok(xm("mine", corpus["dir"] / "de.txt", corpus["dir"] / "en.txt", "--src-lang", "de", "--tgt-lang", "en",
          "--threshold", "0.99", "--margin", "distance", "--format", "hf", "-q", "-o", out,
          "--keep-filtered", tmp_path / "dropped.tsv"))
    ds = datasets.load_from_disk(str(out))
    assert len(ds) == 0 and ds.features["translation"] == datasets.Translation(languages=["de", "en"])
    assert "0 sentence pairs" in (out / "README.md").read_text(encoding="utf-8")
    ok(xm("verify", out))
    ok(xm("verify", tmp_path / "dropped.tsv"))

def test_hf_data_files_streamed_and_index_search(corpus, tmp_path):
    de = _jsonl(tmp_path / "de.jsonl", corpus["de"], "de-")
    ok(xm("embed", de, "--lang", "de", "--text-field", "meta.text", "-q", "-o", tmp_path / "by-jsonl"))
    ok(xm("embed", de, "--lang", "de", "--input-format", "hf", "--text-field", "meta.text", "-q",
          "-o", tmp_path / "by-hf"))
    a, b = tmp_path / "by-jsonl", tmp_path / "by-hf"
    assert (a / "sentences.txt").read_bytes() == (b / "sentences.txt").read_bytes()
    assert np.array_equal(np.load(a / "emb-00000.npy"), np.load(b / "emb-00000.npy"))
    # A folder of data files (two Parquet files), streamed by datasets: the rows in file order.
    (tmp_path / "parts").mkdir()
    _parquet(tmp_path / "parts" / "part-0.parquet", corpus["de"][:7])
    _parquet(tmp_path / "parts" / "part-1.parquet", corpus["de"][7:])
    ok(xm("embed", tmp_path / "parts", "--lang", "de", "--input-format", "hf", "--text-field", "sentence", "-q",
          "-o", tmp_path / "by-folder"))
    assert (tmp_path / "by-folder" / "sentences.txt").read_bytes() == (a / "sentences.txt").read_bytes()
    # Rows of the dataset (blank lines are no rows) against lines of the file.
    assert np.load(b / "line_numbers.npy").tolist() == list(range(1, N + 1))
    assert np.load(a / "line_numbers.npy").tolist() == [i + 1 + (i >= 3) for i in range(N)]
    # build-index reads Parquet, search reads JSON Lines queries.
    ok(xm("build-index", _parquet(tmp_path / "en.parquet", corpus["en"]), "--text-column", "sentence",
          "--lang", "en", "-o", tmp_path / "idx"))
    res = ok(xm("search", tmp_path / "idx", de, "--text-field", "meta.text", "-k", 1, "-o", tmp_path / "hits.tsv"))
    hits = [line.split("\t") for line in (tmp_path / "hits.tsv").read_text(encoding="utf-8").splitlines()]
    assert len(hits) == N, res.output
    correct = 0
    for query_line, _, _, _, hit in hits:  # query lines are file lines: a blank line after the third
        q = int(query_line)
        correct += corpus["gold"][corpus["de"][q - 1 - (q > 4)]] == hit
    assert correct >= N - 1
    # An index keeps no ids: --id-field was read and dropped without a word, then offered by --help and
    # refused; now neither command has it.
    refused(xm("search", tmp_path / "idx", de, "--text-field", "meta.text", "--id-field", "id", "-k", 1),
            "No such option '--id-field'")
    refused(xm("build-index", de, "--text-field", "meta.text", "--id-field", "id", "--lang", "de",
               "-o", tmp_path / "idx-ids"), "No such option '--id-field'")
    assert not (tmp_path / "idx-ids").exists()


# ----------------------------------------------------------------------------------------- outputs


def test_tsv_default_gz_and_moses(corpus, plain_tsv, stores, tmp_path):
    d = corpus["dir"]
    tsv = plain_tsv
    lines = tsv.splitlines()
    assert len(lines) >= N - 2 and all(re.fullmatch(r"\d+\.\d{6}\t[^\t]+\t[^\t]+", line) for line in lines)
    assert _precision([tuple(line.split("\t")[1:]) for line in lines], corpus["gold"]) == 1.0
    ok(xm("mine", *stores, "-q", "-o", tmp_path / "b.tsv.gz"))
    assert gzip.decompress((tmp_path / "b.tsv.gz").read_bytes()).decode("utf-8") == tsv
    # JSON Lines and TMX named .gz are compressed, by name or by --format (was: x.jsonl.gz held
    # gzipped TSV, and with --format jsonl plain JSON under the .gz name); Parquet is refused one
    ok(xm("mine", *stores, "-q", "-o", tmp_path / "b.jsonl"))
    ok(xm("mine", *stores, "-q", "-o", tmp_path / "b.jsonl.gz"))
    ok(xm("mine", *stores, "-q", "--format", "jsonl", "-o", tmp_path / "c.gz"))
    for name in ("b.jsonl.gz", "c.gz"):
        assert gzip.decompress((tmp_path / name).read_bytes()) == (tmp_path / "b.jsonl").read_bytes()
    assert json.loads((tmp_path / "b.jsonl.gz.json").read_text())["format"] == "jsonl"
    refused(xm("mine", *stores, "-q", "-o", tmp_path / "b.parquet.gz"), "a parquet output is not gzip-compressed")
    # a --format against what the name says (was: JSON Lines written into c.parquet without a word)
    refused(xm("mine", *stores, "-q", "--format", "jsonl", "-o", tmp_path / "c.parquet"),
            "c.parquet: its name says parquet, but --format jsonl was given")
    refused(xm("score", f"{corpus['dir'] / 'de.txt'}:{corpus['dir'] / 'en.txt'}", "-q", "--format", "csv", "-o",
               tmp_path / "s.jsonl"), "s.jsonl: its name says jsonl, but --format csv was given")
    assert not (tmp_path / "c.parquet").exists() and not (tmp_path / "s.jsonl").exists()
    ok(xm("mine", d / "de.txt", d / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "-q", "--format", "moses",
          "-o", tmp_path / "c"))
    assert not (tmp_path / "c").exists()
    # stores name their languages: the same files (was: OUT.src and OUT.tgt, while jsonl keyed them de, en)
    ok(xm("mine", *stores, "-q", "--format", "moses", "-o", tmp_path / "s"))
    assert sorted(p.name for p in tmp_path.glob("s.*")) == ["s.de", "s.en", "s.json"]
    assert (tmp_path / "s.de").read_text(encoding="utf-8").splitlines() == [line.split("\t")[1] for line in lines]
    # One file per language, named as OPUS names them (ISO 639-1).
    assert (tmp_path / "c.de").read_text(encoding="utf-8").splitlines() == [line.split("\t")[1] for line in lines]
    assert (tmp_path / "c.en").read_text(encoding="utf-8").splitlines() == [line.split("\t")[2] for line in lines]
    assert not (tmp_path / "c.src").exists()
    summary = json.loads((tmp_path / "c.json").read_text())
    assert summary["format"] == "moses" and {"c.de", "c.en"} <= set(summary["output_files"])
    refused(xm("mine", d / "de.txt", d / "en.txt", "-q", "--format", "moses", "-o", tmp_path / "c"), "already exists")
    # either file of the pair verifies the pair (was: "not an xmine artefact" but for .src/.tgt)
    assert "c.en: OK, an xmine mining result (2 files match" in ok(xm("verify", tmp_path / "c.en")).output
    with open(tmp_path / "c.de", "a", encoding="utf-8") as f:
        f.write("mine\n")
    refused(xm("verify", tmp_path / "c.en"), "c.de")


def test_overwrite_across_formats_replaces_only_the_old_result(corpus, tmp_path):
    """--overwrite may change the format: the earlier result's own files go (a TSV file, a Moses
    pair, a dataset folder), a file beside them that is not part of it stays, and a run that fails
    leaves the earlier result whole."""
    import datasets

    d = corpus["dir"]
    args = ["mine", d / "de.txt", d / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "-q", "-o", tmp_path / "r"]
    notes = tmp_path / "r.notes"
    notes.write_text("mine\n")
    ok(xm(*args))
    assert (tmp_path / "r").is_file()
    ok(xm(*args, "--format", "moses", "--overwrite"))
    assert not (tmp_path / "r").exists() and (tmp_path / "r.de").is_file() and (tmp_path / "r.en").is_file()
    ok(xm("verify", tmp_path / "r"))
    ok(xm(*args, "--format", "hf", "--overwrite"))
    assert not (tmp_path / "r.de").exists() and not (tmp_path / "r.en").exists()
    assert len(datasets.load_from_disk(str(tmp_path / "r"))) >= N - 2
    ok(xm("verify", tmp_path / "r"))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    bad = tmp_path / "bad.txt"
    bad.write_bytes((d / "en.txt").read_bytes() + b"\xff\xfe broken\n")
    refused(xm("mine", d / "de.txt", bad, "--format", "jsonl", "--overwrite", "-q", "-o", tmp_path / "r"),
            "bad.txt", "UTF-8")
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p != bad and "r.work" not in str(p)}
    assert after == before
    ok(xm("verify", tmp_path / "r"))
    ok(xm(*args, "--format", "tsv", "--overwrite"))  # (without --format, an existing folder means hf)
    assert (tmp_path / "r").is_file() and notes.read_text() == "mine\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") and not p.name.endswith(".lock")]


def test_tmx_is_read_back_by_a_tmx_reader_to_the_same_pairs(corpus, plain_tsv, stores, tmp_path):
    """translate-toolkit's TMX reader (the `dev` extra) parses xmine's TMX into the pairs of the TSV."""
    tmx = pytest.importorskip("translate.storage.tmx")
    d = corpus["dir"]
    ok(xm("mine", *stores, "-q", "-o", tmp_path / "m.tmx"))  # by the extension; the stores name the languages
    expected = [tuple(line.split("\t")) for line in plain_tsv.splitlines()]
    store = tmx.tmxfile((tmp_path / "m.tmx").read_bytes(), sourcelanguage="de", targetlanguage="en")
    units = [u for u in store.units if not u.isheader()]
    assert [(u.source, u.target) for u in units] == [(s, t) for _, s, t in expected]
    raw = (tmp_path / "m.tmx").read_text(encoding="utf-8")
    assert raw.count('xml:lang="de"') == raw.count('xml:lang="en"') == len(expected)
    assert [f'<prop type="x-score">{sc}</prop>' in raw for sc, _, _ in expected] == [True] * len(expected)
    refused(xm("mine", d / "de.txt", d / "en.txt", "-q", "-o", tmp_path / "n.tmx"), "tmx", "--src-lang")


def test_tmx_language_tags_keep_the_region_and_a_script_that_tells_apart():
    """(was: pt-BR and pt-PT both written as "pt", zho_Hant and zho_Hans both as "zh")"""
    from xmine.langs import bcp47_tag
    from xmine.mining.writers import moses_suffixes

    tags = {code: bcp47_tag(code) for code in ("de", "deu", "deu_Latn", "de-DE", "pt-BR", "pt_PT", "en-us", "es-419",
                                              "zho_Hant", "cmn_Hans", "zh-Hant-TW", "sr-Latn", "srp_Cyrl", "ace_Arab")}
    assert tags == {"de": "de", "deu": "de", "deu_Latn": "de", "de-DE": "de-DE", "pt-BR": "pt-BR", "pt_PT": "pt-PT",
                    "en-us": "en-US", "es-419": "es-419", "zho_Hant": "zh-Hant", "cmn_Hans": "zh-Hans",
                    "zh-Hant-TW": "zh-Hant-TW", "sr-Latn": "sr-Latn", "srp_Cyrl": "sr", "ace_Arab": "ace-Arab"}
    # Moses file names stay by language alone, as Moses corpora are named
    assert moses_suffixes("de-DE", "en-US") == (".de", ".en") and moses_suffixes("pt-BR", "pt-PT") == (".src", ".tgt")


def test_per_side_input_options_read_each_side_its_own_way(corpus, plain_tsv, tmp_path):
    """A JSONL side (text at meta.text) mined against a Parquet side (column `sentence`): each
    side's --*-text-field; the same pairs as the plain text files."""
    de = _jsonl(tmp_path / "de.jsonl", corpus["de"], "de-")
    en = _parquet(tmp_path / "en.parquet", corpus["en"])
    ok(xm("mine", de, en, "--src-lang", "de", "--tgt-lang", "en", "-q", "-o", tmp_path / "a.tsv",
          "--src-text-field", "meta.text", "--tgt-text-column", "sentence"))
    assert (tmp_path / "a.tsv").read_text(encoding="utf-8") == plain_tsv
    # The shared option is the default of both sides: the Parquet side has no column meta.text.
    refused(xm("mine", de, en, "-q", "-o", tmp_path / "c.tsv", "--text-field", "meta.text"),
            "en.parquet", "no column 'meta'")
    # a CSV side's column named by the side's own option, as given (was: --text-column, --id-field)
    (tmp_path / "de.csv").write_text("id,text\n1,Ein Satz.\n", encoding="utf-8")
    for given, said in ((["--src-text-column", "body"], "--src-text-column 'body': no such column"),
                        (["--src-text-field", "body"], "--src-text-column 'body': no such column"),
                        (["--src-id-field", "ref"], "--src-id-field 'ref': no such column")):
        refused(xm("mine", tmp_path / "de.csv", en, "--tgt-text-column", "sentence", *given, "-q",
                   "-o", tmp_path / "d.tsv"), f"de.csv:1: {said}")


def test_csv_input_reads_the_header_and_honours_quotes(corpus, tmp_path):
    """A CSV side: header line, a column chosen by name, quoted fields (commas, quotes): mined as
    the plain text file is, each pair naming its record's id and line."""
    import csv

    d = corpus["dir"]
    de = list(corpus["de"])
    with open(tmp_path / "de.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "text"])
        for i, t in enumerate(de):
            w.writerow([i, t])
    assert '"' in (tmp_path / "de.csv").read_text(encoding="utf-8")  # some sentences needed quoting
    ok(xm("mine", tmp_path / "de.csv", d / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "-q",
          "--src-text-column", "text", "--src-id-field", "id", "-o", tmp_path / "a.jsonl"))
    rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()]
    assert _precision([(r["translation"]["de"], r["translation"]["en"]) for r in rows], corpus["gold"]) == 1.0
    for r in rows:  # the id column, and the line each record starts on (the header is line 1)
        assert de[int(r["src_id"])] == r["translation"]["de"] and r["src_record"] == int(r["src_id"]) + 2
    refused(xm("mine", tmp_path / "de.csv", d / "en.txt", "-q", "--src-text-column", "satz", "-o", tmp_path / "b"),
            "de.csv", "'satz'", "columns: id, text")


def test_a_record_cut_by_an_unquoted_comma_or_a_tab_is_refused_not_read_in_part(tmp_path):
    """(was: `Hallo, Welt` in a one-column CSV stored as "Hallo", the rest dropped without a word;
    a bitext refused the same, naming a tab for a CSV)"""
    from xmine.io.reader_base import InputFormat
    from xmine.io.readers import open_corpus

    (tmp_path / "c.csv").write_text('text\nGuten Tag\nHallo, Welt\n"Hallo, Welt"\n', encoding="utf-8")
    with untouched(tmp_path):
        refused(xm("embed", tmp_path / "c.csv", "--lang", "de", "--encoder", "use-m3", "--text-column", "text", "-q",
                   "-o", tmp_path / "st"),
                f"{tmp_path / 'c.csv'}:3: 2 column(s), but line 1 has 1: every line needs the same columns "
                '(a comma inside an unquoted field? quote it: "Hallo, Welt")')
    (tmp_path / "c.tsv").write_text("Guten Tag\t1\nHallo\tWelt\t2\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"c\.tsv:2: 3 column\(s\), but line 1 has 2: .*\(a tab inside a sentence\?\)"):
        list(open_corpus(tmp_path / "c.tsv", InputFormat(format="tsv", text_field="1")).records())
    (tmp_path / "pairs.csv").write_text("de,en\nGuten Tag,Good day\nHallo, Welt,Hello world\n", encoding="utf-8")
    refused(xm("score", tmp_path / "pairs.csv", "--src-field", "de", "--tgt-field", "en", "-o", tmp_path / "s.tsv"),
            "pairs.csv:3: 3 column(s), but line 1 has 2", "a comma inside an unquoted field?")


def test_keep_field_carries_document_metadata_to_every_output(corpus, tmp_path):
    """--keep-field url --keep-field meta.domain: each pair names the URL and domain of the record
    each of its sentences came from, in jsonl, tsv, tmx and OUT.meta."""
    tmx = pytest.importorskip("translate.storage.tmx")
    for lang in ("de", "en"):
        records = [{"text": t, "url": f"https://{lang}.example/{i}", "meta": {"domain": f"{lang}.example"}}
                   for i, t in enumerate(corpus[lang])]
        (tmp_path / f"{lang}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                                                encoding="utf-8")
    args = ["mine", tmp_path / "de.jsonl", tmp_path / "en.jsonl", "--src-lang", "de", "--tgt-lang", "en", "-q",
            "--keep-field", "url", "--keep-field", "meta.domain"]
    ok(xm(*args, "-o", tmp_path / "m.jsonl"))
    rows = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows
    for r in rows:
        assert r["src_url"] == f"https://de.example/{corpus['de'].index(r['translation']['de'])}"
        assert r["tgt_url"] == f"https://en.example/{corpus['en'].index(r['translation']['en'])}"
        assert (r["src_meta_domain"], r["tgt_meta_domain"]) == ("de.example", "en.example")
    ok(xm(*args, "-o", tmp_path / "m.tsv", "--meta"))
    tsv = [line.split("\t") for line in (tmp_path / "m.tsv").read_text(encoding="utf-8").splitlines()]
    assert [t[3:] for t in tsv] == [[r["src_url"], "de.example", r["tgt_url"], "en.example"] for r in rows]
    # OUT.meta in stopes' bimeta layout: score, then each side's kept fields (several: a JSON object)
    meta = [line.split("\t") for line in (tmp_path / "m.tsv.meta").read_text(encoding="utf-8").splitlines()]
    assert [(m[0], json.loads(m[1]), json.loads(m[2])) for m in meta] == [
        (t[0], {"url": t[3], "meta_domain": t[4]}, {"url": t[5], "meta_domain": t[6]}) for t in tsv]
    ok(xm(*args[:-2], "-o", tmp_path / "u.tsv", "--meta"))  # one field: its value, as a stopes meta line
    assert (tmp_path / "u.tsv.meta").read_text(encoding="utf-8").splitlines() == [
        f"{t[0]}\t{t[3]}\t{t[5]}" for t in tsv]
    # a field a record lacks, or holds as null, is null in the object (was: "", as an empty value)
    for lang in ("de", "en"):
        (tmp_path / f"{lang}2.jsonl").write_text("".join(json.dumps(
            {"text": t, "url": f"u{i}", **({"meta": {"domain": None}} if i % 3 == 1 else {} if i % 3 == 2 else
                                           {"meta": {"domain": ""}})}, ensure_ascii=False) + "\n"
            for i, t in enumerate(corpus[lang])), encoding="utf-8")
    ok(xm("mine", tmp_path / "de2.jsonl", tmp_path / "en2.jsonl", *args[3:], "-o", tmp_path / "n.tsv", "--meta"))
    meta = [line.split("\t") for line in (tmp_path / "n.tsv.meta").read_text(encoding="utf-8").splitlines()]
    assert meta and all(json.loads(cell)["meta_domain"] == ("" if int(json.loads(cell)["url"][1:]) % 3 == 0 else None)
                        for m in meta for cell in m[1:])
    ok(xm(*args, "-o", tmp_path / "m.tmx"))
    units = [u for u in tmx.tmxfile((tmp_path / "m.tmx").read_bytes()).units if not u.isheader()]
    raw = (tmp_path / "m.tmx").read_text(encoding="utf-8")
    assert len(units) == len(rows) and all(f'<prop type="x-src_url">{r["src_url"]}</prop>' in raw for r in rows)
    d = corpus["dir"]
    refused(xm("mine", d / "de.txt", tmp_path / "en.jsonl", "-q", "--keep-field", "url", "-o", tmp_path / "x"),
            "--keep-field", "de.txt", "plain text")
    refused(xm("mine", tmp_path / "de.jsonl", tmp_path / "en.jsonl", "-q", "--keep-field", "ulr", "-o",
               tmp_path / "y"), "de.jsonl:1", "'ulr': no such field in any record (fields of the first: text, url, meta)")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y.json").exists()
    # a sparse field that the first record lacks is kept, null where missing (a helper: was refused, "no
    # such field in the first record", so whether a run started depended on the records' order)
    for lang in ("de", "en"):
        (tmp_path / f"{lang}3.jsonl").write_text("".join(json.dumps(
            {"text": t, **({"src": f"s{i}"} if i > 0 else {})}, ensure_ascii=False) + "\n"
            for i, t in enumerate(corpus[lang])), encoding="utf-8")
    ok(xm("mine", tmp_path / "de3.jsonl", tmp_path / "en3.jsonl", *args[3:8], "--keep-field", "src", "-o",
          tmp_path / "s.jsonl"))
    kept = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text(encoding="utf-8").splitlines()]
    assert kept and all(r["src_src"] == (None if r["translation"]["de"] == corpus["de"][0] else
                                         f"s{corpus['de'].index(r['translation']['de'])}") for r in kept)


def test_a_kept_field_may_not_take_a_column_of_xmines_own_nor_share_one(corpus, tmp_path):
    """(a helper: `--keep-field id` to parquet was a traceback after the search, leaving an unfinished
    OUT; to jsonl `--keep-field file` replaced xmine's own src_file without a word; `meta.url` and
    `meta_url` were one column, one value lost.) Refused before anything is encoded; standard input
    with --keep-field reads its fields from the copy (was: "-: no such file or directory")."""
    from click.testing import CliRunner

    from xmine.cli import main

    for lang in ("de", "en"):
        records = [{"text": t, "id": f"{lang}{i}", "file": "F", "record": "R", "meta": {"url": f"u{i}"},
                    "meta_url": f"v{i}", "even": i % 2 == 0} for i, t in enumerate(corpus[lang])]
        (tmp_path / f"{lang}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                                                encoding="utf-8")
    args = ["mine", tmp_path / "de.jsonl", tmp_path / "en.jsonl", "--src-lang", "de", "--tgt-lang", "en", "-q"]
    for field, fmt, own in (("id", "parquet", "the record's --id-field value"), ("file", "jsonl", "the input's name"),
                            ("record", "hf", "the record number")):
        out = tmp_path / f"{field}.{fmt}"
        res = refused(xm(*args, "--keep-field", field, "--format", fmt, "-o", out),
                      f"--keep-field {field!r}: its column src_{field} is xmine's own ({own})")
        assert ("--id-field id" in res) == (field == "id")
        assert not out.exists() and not Path(f"{out}.json").exists()  # (was: an unfinished OUT.json and OUT.work)
    refused(xm(*args, "--keep-field", "meta.url", "--keep-field", "meta_url", "-o", tmp_path / "two.jsonl"),
            "--keep-field 'meta.url' and 'meta_url': both would be the column src_meta_url")
    # a kept column whose name the CSV header holds twice (was: the last of them, the text the first)
    (tmp_path / "de3.csv").write_text("id,text,text\n" + "".join(f"{i},{t.replace(',', ' ')},x{i}\n" for i, t in
                                                                enumerate(corpus["de"])), encoding="utf-8")
    refused(xm("mine", tmp_path / "de3.csv", tmp_path / "en.jsonl", "--src-text-column", "2", "--keep-field", "text",
               "--src-lang", "de", "--tgt-lang", "en", "-q", "-o", tmp_path / "three.jsonl"),
            "de3.csv:1: --keep-field 'text': the header has 2 columns of that name (columns 2, 3)")
    refused(xm(*args, "--keep-field", "meta.url", "--format", "moses", "-o", tmp_path / "bi"),  # (was: dropped)
            "--keep-field: the moses format holds the sentences alone; add --meta")
    for fmt in ("moses", "tmx"):  # (was: ignored without a word, and not recorded)
        refused(xm(*args, "--line-numbers", "--format", fmt, "-o", tmp_path / f"ln-{fmt}"),
                f"--line-numbers: the {fmt} format holds the sentences alone; --meta writes")
    ok(xm(*args, "--id-field", "id", "--keep-field", "meta.url", "--keep-field", "even", "-o", tmp_path / "ok.jsonl"))
    rows = [json.loads(line) for line in (tmp_path / "ok.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows and all(r["src_meta_url"] == "u" + r["src_id"][2:] for r in rows)
    assert {r["src_even"] for r in rows} == {"true", "false"}  # a bool as JSON spells it (was "True")
    assert all((r["src_even"] == "true") == (int(r["src_id"][2:]) % 2 == 0) for r in rows)
    summary = json.loads((tmp_path / "ok.jsonl.json").read_text(encoding="utf-8"))  # (was: neither recorded)
    assert (summary["src"]["kind"], summary["src"]["format"]) == ("text", "jsonl")
    assert summary["src"]["encoded_with"]["device"] == "cpu" == summary["tgt"]["encoded_with"]["device"]
    assert summary["provenance"]["parameters"]["keep_fields"] == {"src": ["meta.url", "even"],
                                                                  "tgt": ["meta.url", "even"]}
    # The kept values' file of a run killed while it wrote goes with the next run, --keep-work too
    # (a helper: one folder more in OUT.work/ after each kill)
    ok(xm(*args, "--keep-field", "meta.url", "--keep-work", "-o", tmp_path / "kept.jsonl"))
    left = tmp_path / "kept.jsonl.work" / "fields-left"
    left.mkdir()
    (left / "kept-fields-x.jsonl").write_text('["u1"]\n', encoding="utf-8")
    ok(xm(*args, "--keep-field", "meta.url", "--keep-work", "--overwrite", "-o", tmp_path / "kept.jsonl"))
    assert (tmp_path / "kept.jsonl.work").is_dir() and not list((tmp_path / "kept.jsonl.work").glob("fields-*"))
    left.mkdir()  # by a next run that keeps no field, too (a helper: left with --keep-work)
    ok(xm(*args, "--keep-work", "--overwrite", "-o", tmp_path / "kept.jsonl"))
    assert (tmp_path / "kept.jsonl.work").is_dir() and not list((tmp_path / "kept.jsonl.work").glob("fields-*"))
    res = CliRunner().invoke(main, [str(a) for a in (*args[:2], "-", *args[3:], "--tgt-input-format", "jsonl",
                                                     "--id-field", "id", "--keep-field", "meta.url",
                                                     "--keep-field", "even", "-o", tmp_path / "stdin.jsonl")],
                             input=(tmp_path / "en.jsonl").read_bytes())
    ok(res)
    piped = [json.loads(line) for line in (tmp_path / "stdin.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [{k: v for k, v in r.items() if k != "tgt_file"} for r in piped] == \
        [{k: v for k, v in r.items() if k != "tgt_file"} for r in rows]
    assert {r["tgt_file"] for r in piped} == {"-"} and all(r["tgt_meta_url"] == "u" + r["tgt_id"][2:] for r in piped)


def test_reading_options_with_no_corpus_to_read_are_refused(corpus, stores, tmp_path):
    """(a helper: `search IDX STORE --split-sentences --lang de` ran as if not given) A reading option
    where every input is a store or an index, or a side's own for a stored side, is refused in one
    line; a shared one that the other side (a corpus) reads is not."""
    de, en = stores
    ok(xm("build-index", en, "-o", tmp_path / "idx", "-q"))
    for args, option in ((("search", tmp_path / "idx", de, "--split-sentences", "--lang", "de"), "--split-sentences"),
                         (("search", tmp_path / "idx", de, "--text-field", "t"), "--text-field"),
                         (("build-index", en, "-o", tmp_path / "i2", "--input-format", "jsonl"), "--input-format"),
                         (("mine", de, en, "--header", "-o", tmp_path / "m.tsv"), "--header")):
        refused(xm(*args, "-q"), f"{option}: every input is an xmine store or index, read as stored")
    refused(xm("mine", corpus["dir"] / "de.txt", en, "--src-lang", "de", "--tgt-split", "x", "-q",
               "-o", tmp_path / "m.tsv"), "--tgt-split: that side is an xmine store or index")
    assert not any((tmp_path / name).exists() for name in ("i2", "m.tsv", "m.tsv.json"))
    (tmp_path / "de.jsonl").write_text("".join(json.dumps({"t": t}, ensure_ascii=False) + "\n" for t in corpus["de"]),
                                       encoding="utf-8")
    ok(xm("mine", tmp_path / "de.jsonl", en, "--src-lang", "de", "--text-field", "t", "-q", "-o", tmp_path / "ok.tsv"))
    # a side's own --input-format is named as given (was: "--input-format" for --src-input-format, and a
    # --tgt-input-format for a stored side ignored without a word)
    refused(xm("mine", de, en, "--src-input-format", "text", "-q", "-o", tmp_path / "m.tsv"),
            "--src-input-format: every input is an xmine store or index")
    refused(xm("mine", corpus["dir"] / "de.txt", en, "--src-lang", "de", "--tgt-input-format", "jsonl", "-q",
               "-o", tmp_path / "m.tsv"), "--tgt-input-format: that side is an xmine store or index")
    assert not (tmp_path / "m.tsv").exists()


def test_an_empty_name_or_path_is_refused_naming_its_option(stores, tmp_path):
    """(a fuzz of every option: `mine --encoder ''` mined as if it were not given, `--projection ''` was
    the working directory, `--src-text-column ''` was blamed on --text-field, `--keep-field ''` on the
    input file, `verify ''` a traceback from Path('.'))"""
    de, en = stores
    out = tmp_path / "m.tsv"
    for option, value, named in (("--encoder", "", "'--encoder'"), ("--projection", "", "'--projection'"),
                                 ("--src-text-column", "", "'--src-text-field' / '--src-text-column'"),
                                 ("--keep-field", "", "'--keep-field'"), ("--ray", "", "'--ray'"),
                                 ("--tgt-split", "", "'--tgt-split'")):
        refused(xm("mine", de, en, option, value, "-q", "-o", out), f"Invalid value for {named}: {value!r} is empty")
    refused(xm("export-st", "", tmp_path / "st"), "Invalid value for 'PROJ': '' is empty")
    # a blank name may name something: a JSON key " " (a helper: refused as empty)
    blank = tmp_path / "blank.jsonl"
    blank.write_text('{" ": "Ein Satz."}\n', encoding="utf-8")
    ok(xm("embed", blank, "--lang", "de", "--text-field", " ", "--encoder", "use-m3", "-q", "-o", tmp_path / "b"))
    shutil.rmtree(tmp_path / "b")
    blank.unlink()
    # the other commands' (a second fuzz: bench's `--out ''` took its default, a result file of the
    # repository; --write-pairs '' wrote into the working directory; langid's and train's were the
    # working directory; embed's and score's fields and encoders --check ran as if not given)
    for args, named in ((("bench", "sts", "--out", ""), "'--out'"),
                        (("bench", "massive-templates", "--write-pairs", "", "--out", tmp_path / "r.json"),
                         "'--write-pairs'"),
                        (("bench", "mining", "--sets-dir", "", "--out", tmp_path / "r.json"), "'--sets-dir'"),
                        (("langid", "--projection", "", "-o", tmp_path / "l", de), "'--projection'"),
                        (("langid", "--projection", "default", "-o", tmp_path / "l", ""), "'FILES...'"),
                        (("train", "--pairs", "", "-o", tmp_path / "t"), "'--pairs'"),
                        (("train", "--pairs", de, "-o", ""), "'-o' / '--out' / '--output'"),
                        (("embed", de, "--lang", "de", "--encoder-name", "", "-o", tmp_path / "e"), "'--encoder-name'"),
                        (("embed", de, "--lang", "de", "--embeddings-column", "", "-o", tmp_path / "e"),
                         "'--embeddings-column'"),
                        (("score", de, "--tgt-field", "", "-o", tmp_path / "s"), "'--tgt-field' / '--tgt-column'"),
                        (("encoders", "--check", ""), "'--check'"), (("search", de, de, "-o", ""), "'-o' / '--out'")):
        refused(xm(*args), f"Invalid value for {named}: '' is ")
    refused(xm("verify", ""), "'': an empty path names no artefact")
    refused(xm("verify", ".", de), ".: not an xmine artefact (no manifest.json)")
    assert not list(tmp_path.iterdir())


# -------------------------------------------------------------------------------------- bad inputs


def _bad_parquet_null(path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["Ein Satz.", None, "Noch einer."]}), path)


BAD = {
    "missing field": ("de.jsonl", lambda p: p.write_text('{"text": "Ein Satz."}\n{"body": "Zwei."}\n'),
                      [], ["de.jsonl:2", "no field 'text'"]),
    "not a string": ("de.jsonl", lambda p: p.write_text('{"text": "Ein Satz."}\n{"text": ["Zwei."]}\n'),
                     [], ["de.jsonl:2", "field 'text' is a list (['Zwei.']), not a string"]),
    # no text: a NUL character or a lone surrogate by a JSON escape (was: stored; a tokenizer's TypeError)
    "an escaped NUL": ("de.jsonl", lambda p: p.write_text('{"text": "Ein Satz."}\n{"text": "Zwei\\u0000."}\n'),
                       [], ["de.jsonl:2", "field 'text' holds a NUL character (U+0000)"]),
    "a lone surrogate": ("de.jsonl", lambda p: p.write_text('{"text": "Ein Satz."}\n{"text": "Zwei \\ud800."}\n'),
                         [], ["de.jsonl:2", "field 'text' holds a lone surrogate (\\ud800)"]),
    "a lone surrogate in an id": ("de.jsonl", lambda p: p.write_text('{"text": "Ein Satz.", "id": "\\udc00"}\n'),
                                  ["--id-field", "id"], ["de.jsonl:1", "id field 'id' holds a lone surrogate"]),
    "a NUL in parquet": ("de.parquet", lambda p: __import__("pyarrow.parquet").parquet.write_table(
        __import__("pyarrow").table({"text": ["Ein Satz.", "Zwei\x00."]}), p), [], ["row 2", "holds a NUL character"]),
    # (csv's own words were advice to Python programmers)
    "a CR in an unquoted csv field": ("de.csv", lambda p: p.write_bytes(b"text\nEin Satz.\nZwei\rDrei.\n"), [],
                                      ["de.csv:3", "a line break (\\r) inside an unquoted field: quote the field"]),
    # (a helper: named the record being read when an 8 KB block was decoded: line 1 of a small file)
    "invalid utf-8 in csv": ("de.csv", lambda p: p.write_bytes(
        b"id,text\n" + b"".join(b"d%d,Satz %d.\n" % (i, i) for i in range(30)) + b"d30,Kaputt \xff Satz.\n"),
        [], ["de.csv:32", "invalid UTF-8 at byte 11 of the line"]),
    "invalid json": ("de.jsonl", lambda p: p.write_text('{"text": "Ein Satz."}\n{"text": "Zwei.\n'),
                     [], ["de.jsonl:2", "invalid JSON"]),
    # (a helper: a .json file holding a JSON array said only "Expecting value")
    "a json array": ("de.json", lambda p: p.write_text('[{"text": "Ein Satz."},\n {"text": "Zwei."}]\n'),
                     [], ["de.json:1", "invalid JSON", "opens a JSON array: write one record a line"]),
    "nested field missing": ("de.jsonl", lambda p: p.write_text('{"meta": {"text": "Ein Satz."}}\n{"meta": {}}\n'),
                             ["--text-field", "meta.text"], ["de.jsonl:2", "'meta.text'"]),
    "id field missing": ("de.jsonl", lambda p: p.write_text('{"text": "Ein Satz.", "id": 1}\n{"text": "Zwei."}\n'),
                         ["--id-field", "id"], ["de.jsonl:2", "id field 'id' is missing"]),
    # (was: stored as "True", and as "a b" with the tab replaced, without a word)
    "id a boolean": ("de.jsonl", lambda p: p.write_text('{"text": "Ein Satz.", "id": 1}\n{"text": "Zwei.", "id": true}\n'),
                     ["--id-field", "id"], ["de.jsonl:2", "id field 'id' is a boolean"]),
    "id with a tab": ("de.jsonl", lambda p: p.write_text('{"text": "Ein Satz.", "id": "a\\tb"}\n'),
                      ["--id-field", "id"], ["de.jsonl:1", "id field 'id' holds a tab or line break ('a\\tb')"]),
    "id with a line break in csv": ("de.csv", lambda p: p.write_text('text,id\nEin Satz.,1\nZwei.,"x\ny"\n'),
                                    ["--text-column", "text", "--id-field", "id"],
                                    ["de.csv:3", "holds a tab or line break ('x\\ny')"]),
    # (was: --split read every row of a dataset that has no splits)
    "split of a single dataset": ("de_hf", lambda p: __import__("datasets").Dataset.from_dict(
        {"text": ["Ein Satz.", "Zwei."]}).save_to_disk(str(p)), ["--split", "test"],
        ["de_hf", "a single Dataset, without splits: --split test"]),
    "broken parquet": ("de.parquet", lambda p: p.write_bytes(b"PAR1 this is not parquet PAR1"),
                       [], ["de.parquet", "not a readable Parquet file"]),
    "null in parquet": ("de.parquet", _bad_parquet_null, [], ["de.parquet", "row 2", "null, not a string"]),
    "unknown column": ("de.parquet", _bad_parquet_null, ["--text-column", "body"], ["de.parquet", "no column 'body'"]),
    "format mismatch": ("de.jsonl", lambda p: p.write_text('{"text": "Ein Satz."}\n'),
                        ["--input-format", "parquet"], ["de.jsonl", "not a readable Parquet file"]),
    # a name twice: was read as the last value (JSON, Parquet) or the first column (CSV), without a word
    "a field named twice in json": ("de.jsonl", lambda p: p.write_text(
        '{"text": "Ein Satz."}\n{"text": "Zwei.", "meta": {"a": 1}, "text": "Drei."}\n'),
        [], ["de.jsonl:2", "an object names the field 'text' twice"]),
    "a nested field named twice in json": ("de.jsonl", lambda p: p.write_text(
        '{"text": "Ein Satz.", "meta": {"url": "a", "url": "b"}}\n'), [], ["de.jsonl:1", "the field 'url' twice"]),
    "a column named twice in csv": ("de.csv", lambda p: p.write_text('\ntext,id,text\nEin Satz.,1,Zwei.\n'),
                                    ["--text-column", "text"],
                                    ["de.csv:2", "--text-column 'text': the header has 2 columns of that name "
                                                 "(columns 1, 3)"]),
    "a column named twice in parquet": ("de.parquet", lambda p: __import__("pyarrow.parquet").parquet.write_table(
        __import__("pyarrow").table([["Ein Satz."], ["Zwei."]], names=["text", "text"]), p),
        [], ["de.parquet", "two columns are named 'text'"]),
    "not a dataset folder": ("de_dir", lambda p: (p.mkdir(), (p / "x.txt").write_text("Satz.\n")),
                             [], ["de_dir", "Hugging Face"]),
}


def test_a_csv_record_is_numbered_by_its_line_whatever_carriage_returns_it_holds(tmp_path):
    """A lone CR inside a quoted field is part of the field, not a line (was: every later record
    numbered one line too far, as no editor and no other reader counts it); a CRLF file's records
    and a file of lone-CR line ends are numbered by their lines too."""
    import numpy as np

    for name, data, lines in (
            ("cr.csv", b'id,text\nx1,Ein Satz.\nx2,"Der zweite\rSatz."\nx3,Der dritte.\nx4,Der vierte.\n', [2, 3, 4, 5]),
            ("crlf.csv", b'id,text\r\nx1,"Ein\r\nSatz."\r\nx2,Zwei.\r\n', [2, 4]),
            ("cronly.csv", b'id,text\rx1,"Ein, Satz."\rx2,Zwei.\r', [2, 3]),
            # (a helper: a quoted line feed in a file of CR line ends made it one line, refused)
            ("cr-lf-quoted.csv", b'id,text\rx1,"Ein\nSatz."\rx2,Zwei.\rx3,"Drei ""x"""\r', [2, 3, 4])):
        (tmp_path / name).write_bytes(data)
        ok(xm("embed", tmp_path / name, "--lang", "de", "--encoder", "use-m3", "--id-field", "id", "-q",
              "-o", tmp_path / f"{name}.store"))
        assert np.load(tmp_path / f"{name}.store" / "line_numbers.npy").tolist() == lines, name


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_one_line_exit_2_nothing_written(corpus, tmp_path, case):
    name, make, options, fragments = BAD[case]
    bad = tmp_path / name
    make(bad)
    en = tmp_path / "en.txt"
    en.write_text((corpus["dir"] / "en.txt").read_text(encoding="utf-8"), encoding="utf-8")
    before = files_under(tmp_path)
    refused(xm("mine", bad, en, *options, "-q", "-o", tmp_path / "out.jsonl"), *fragments)
    refused(xm("embed", bad, "--lang", "de", *options, "-q", "-o", tmp_path / "store"), *fragments)
    assert files_under(tmp_path) == before


def test_pairs_from_an_index_name_the_corpus_their_records_are_in(corpus, tmp_path):
    # The index's line numbers count lines of the text it was built from: that file, not the
    # index directory, is each pair's src_file.
    ok(xm("build-index", corpus["dir"] / "de.txt", "--lang", "de", "-q", "-o", tmp_path / "idx"))
    out = tmp_path / "mined.jsonl"
    ok(xm("mine", tmp_path / "idx", corpus["dir"] / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "-q",
          "-o", out))
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= N - 2
    for r in rows:
        assert r["src_file"] == str((corpus["dir"] / "de.txt").resolve())
        assert corpus["de"][r["src_record"] - 1] == r["translation"]["de"]


def test_standard_input_is_a_corpus_for_mine_and_embed(corpus, plain_tsv, tmp_path):
    """`-` reads a side from standard input: the same pairs as from the file; embed stores it."""
    from click.testing import CliRunner

    from xmine.cli import main

    d = corpus["dir"]
    args = ["mine", str(d / "de.txt"), "-", "--src-lang", "de", "--tgt-lang", "en", "-q", "-o", str(tmp_path / "b.tsv")]
    ok(CliRunner().invoke(main, args, input=(d / "en.txt").read_bytes()))
    assert (tmp_path / "b.tsv").read_text(encoding="utf-8") == plain_tsv
    jsonl = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in corpus["de"])
    ok(CliRunner().invoke(main, ["embed", "-", "--lang", "de", "--input-format", "jsonl", "-q",
                                 "-o", str(tmp_path / "store")], input=jsonl.encode()))
    from xmine.store import EmbeddingStore

    store = EmbeddingStore.open(tmp_path / "store")
    assert len(store) == N and [store.text_column()[i] for i in range(N)] == corpus["de"]
    # the input recorded is standard input, with the hash of what came (was: the removed temporary copy)
    assert store.manifest.input["path"] == "-"
    assert store.manifest.input["sha256"] == hashlib.sha256(jsonl.encode()).hexdigest()
    mined = json.loads((tmp_path / "b.tsv.json").read_text(encoding="utf-8"))
    assert "xmine-input-" not in json.dumps(mined) and "/stdin" not in json.dumps(mined)
    # JSON Lines on standard input with no format named: refused, not mined as its JSON source (was:
    # exit 0, pairs of `{"text": ...}` lines); named as text, it is read as text
    for args in (["mine", str(d / "de.txt"), "-", "--src-lang", "de", "--tgt-lang", "en", "-q", "-o",
                  str(tmp_path / "j.tsv")], ["embed", "-", "--lang", "de", "-q", "-o", str(tmp_path / "j")]):
        refused(CliRunner().invoke(main, args, input=("\n" + jsonl).encode()),
                "-:2: looks like JSON Lines", "pass --input-format jsonl")
    assert not list(tmp_path.glob("j*"))
    ok(CliRunner().invoke(main, ["embed", "-", "--lang", "de", "--input-format", "text", "-q", "-o",
                                 str(tmp_path / "as-text")], input=jsonl.encode()))
    assert EmbeddingStore.open(tmp_path / "as-text").text_column()[0] == jsonl.splitlines()[0]
    # a bad record of standard input is named as `-`, its line (was: the temporary copy's path)
    bad = (jsonl + '{"text": \n').encode()
    for args in (["mine", str(d / "de.txt"), "-", "--src-lang", "de", "--tgt-lang", "en", "--tgt-input-format", "jsonl",
                  "-q", "-o", str(tmp_path / "bad.tsv")],
                 ["embed", "-", "--lang", "de", "--input-format", "jsonl", "-q", "-o", str(tmp_path / "bad")]):
        refused(CliRunner().invoke(main, args, input=bad), f"-:{N + 1}: invalid JSON")
    for same in ([], ["--allow-same-input"]):  # (was, with the flag: "-: standard input is empty")
        refused(CliRunner().invoke(main, ["mine", "-", "-", "-q", "-o", str(tmp_path / "c.tsv"), *same],
                                   input=b"x\n"), "SRC and TGT are both '-': standard input can be one side only")


def test_fields_of_a_file_read_as_text_are_refused_with_the_option_that_reads_records(tmp_path):
    """(a helper: `mine de.csv en.tsv --keep-field url --header` was refused as plain text without
    saying that --tgt-input-format tsv reads it as records)"""
    (tmp_path / "de.jsonl").write_text('{"text": "Hallo Welt.", "url": "http://b"}\n', encoding="utf-8")
    (tmp_path / "en.tsv").write_text("text\turl\nHello world.\thttp://a\n", encoding="utf-8")
    refused(xm("mine", tmp_path / "de.jsonl", tmp_path / "en.tsv", "--keep-field", "url", "-o", tmp_path / "m.tsv"),
            f"{tmp_path / 'en.tsv'} is read as plain text", "--tgt-input-format")
    assert not (tmp_path / "m.tsv").exists()
    # ... which, with the TSV side's own header flag, reads it (was: --header only, for both sides,
    # which the JSON Lines side refuses)
    ok(xm("mine", tmp_path / "de.jsonl", tmp_path / "en.tsv", "--keep-field", "url", "--tgt-input-format", "tsv",
          "--tgt-header", "--encoder", "use-m3", "--threshold", "none", "-q", "-o", tmp_path / "m.tsv"))
    assert (tmp_path / "m.tsv").read_text(encoding="utf-8").split("\t")[1:] == [
        "Hallo Welt.", "Hello world.", "http://b", "http://a\n"]


def test_a_dataset_card_says_none_for_no_threshold():
    """(was: "| margin, threshold | ratio, None (every pair kept ...) |", Python's None in a published card)"""
    from xmine.mining.dataset_card import dataset_card

    summary = {"threshold": {"margin": "ratio", "value": None, "source": "every pair kept (--threshold none)"}}
    card = dataset_card(summary, keys=("de", "en"), pairs=3, columns=["translation", "score"])
    assert "| margin, threshold | ratio, none (every pair kept (--threshold none)) |" in card


def test_mine_refuses_an_output_name_of_a_format_it_does_not_write(tmp_path):
    """(was: TSV written under out.csv, out.json or out.tsv.xz without a word)"""
    for name in ("out.csv", "out.json", "out.tsv.xz", "out.jsonl.zst"):
        with pytest.raises(ConfigError, match="not what its name says"):
            output_format(tmp_path / name, None)
    # .ndjson is JSON Lines, as the readers take it (a helper: refused as an output name)
    assert [output_format(tmp_path / n, None) for n in ("a.tsv", "a.txt", "a", "a.jsonl.gz", "a.tmx", "a.ndjson")] == \
        ["tsv", "tsv", "tsv", "jsonl", "tmx", "jsonl"]
    # score and search too, one list of such names (a helper: search wrote TSV as hits.parquet,
    # hits.json and hits.csv; score as out.json)
    from xmine.index.cli import _search_format
    from xmine.mining.score_output import resolve_score_format

    for name in ("out.json", "out.tmx", "out.arrow"):
        with pytest.raises(ConfigError, match="score writes .* not what its name says"):
            resolve_score_format(tmp_path / name, None)
    assert [resolve_score_format(tmp_path / n, None) for n in ("a.txt", "a", "a.csv.gz", "a.pq", "a.ndjson.gz")] == \
        ["tsv", "tsv", "csv", "parquet", "jsonl"]
    for name in ("h.parquet", "h.json", "h.csv", "h.tmx"):
        with pytest.raises(ConfigError, match="search writes tsv and jsonl, not what its name says"):
            _search_format(tmp_path / name, None)
    assert [_search_format(tmp_path / n, f) for n, f in (("h.txt", None), ("h", None), ("h.out", "jsonl"),
                                                        ("h.ndjson", None))] == ["tsv", "tsv", "jsonl", "jsonl"]
    assert _search_format(None, None) == "tsv"
    # .zstd too; an existing dataset folder, whatever its name, is a dataset (a regression pass)
    for refuse in (lambda p: output_format(p, None), lambda p: resolve_score_format(p, None),
                   lambda p: _search_format(p, None)):
        for name in ("out.tsv.zstd", "out.zstd"):
            with pytest.raises(ConfigError):
                refuse(tmp_path / name)
    (tmp_path / "ds.arrow").mkdir()
    assert output_format(tmp_path / "ds.arrow", None) == resolve_score_format(tmp_path / "ds.arrow", None) == "hf"
    assert output_format(tmp_path / "out.gz", None) == resolve_score_format(tmp_path / "out.gz", None) == "tsv"


def test_an_inputs_record_count_is_its_records_not_its_last_line(tmp_path):
    """(a helper: a CSV of 800 records and a header was recorded as 801 records, and a quoted line
    break counted one more) `records` counts records; the progress still counts file lines (the
    last record's number)."""
    from xmine.io.readers import open_corpus
    from xmine.io.reader_base import InputFormat

    (tmp_path / "a.csv").write_text('id,text\n1,"Hallo\nWelt"\n2,Guten Tag\n3,Tschüss\n', encoding="utf-8")
    (tmp_path / "b.tsv").write_text("id\ttext\n1\tHallo\n2\tTag\n", encoding="utf-8")
    csv = open_corpus(tmp_path / "a.csv")
    tsv = open_corpus(tmp_path / "b.tsv", InputFormat(format="tsv", header=True))
    assert (csv.identity()["records"], csv.count) == (3, 5)
    assert (tsv.identity()["records"], tsv.count) == (2, 3)
    # a blank line of JSON Lines is no record (was: counted as one; the same records as CSV gave 3)
    (tmp_path / "c.jsonl").write_text('\n{"text": "Hallo"}\n\n{"text": "Tag"}\n{"text": "  "}\n\n', encoding="utf-8")
    jsonl = open_corpus(tmp_path / "c.jsonl")
    assert (jsonl.identity()["records"], jsonl.count) == (3, 6)


def test_whitespace_around_a_sentence_is_not_part_of_it(corpus, tmp_path):
    """(a helper: `mine` embedded "X " unlike "X", by 0.008 of cosine, while `score` and the
    duplicate check read "X": score did not reproduce mine's margins on FLORES French, whose lines
    end in a no-break space) Text and JSON Lines sides store and embed each sentence without it."""
    from xmine.store import EmbeddingStore

    lines = corpus["de"][:12]
    padded = [f"  {t} " if i % 3 == 0 else f"{t}\u00a0" if i % 3 == 1 else t for i, t in enumerate(lines)]
    (tmp_path / "plain.txt").write_text("".join(t + "\n" for t in lines), encoding="utf-8")
    (tmp_path / "padded.txt").write_text("".join(t + "\n" for t in padded), encoding="utf-8")
    (tmp_path / "padded.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in padded), encoding="utf-8")
    for name in ("plain.txt", "padded.txt", "padded.jsonl"):
        ok(xm("embed", tmp_path / name, "--lang", "de", "-q", "-o", tmp_path / f"s-{name}"))
    stores = [EmbeddingStore.open(tmp_path / f"s-{name}") for name in ("plain.txt", "padded.txt", "padded.jsonl")]
    for store in stores:
        assert [store.text_column()[i] for i in range(len(lines))] == lines
    plain = np.asarray(stores[0].rows()[:], dtype=np.float32)
    for store in stores[1:]:
        assert np.array_equal(np.asarray(store.rows()[:], dtype=np.float32), plain)


@pytest.mark.parametrize("line, kind", [("null", "null"), ("42", "number"), ('"Hallo"', "string"), ("[1, 2]", "list"),
                                        ("true", "boolean")])
def test_a_jsonl_line_that_is_no_object_is_refused_and_named_in_json_terms(tmp_path, line, kind):
    """(were: a line `null` skipped as an empty line; "is a JSON NoneType", "is a JSON int")"""
    src = tmp_path / "d.jsonl"
    src.write_text('{"text": "Hallo Welt."}\n\n' + line + "\n", encoding="utf-8")
    refused(xm("embed", src, "--lang", "de", "--encoder", "use-m3", "-q", "-o", tmp_path / "s"),
            f"{src}:3: is a JSON {kind}, expected an object with a 'text' field")
    assert not (tmp_path / "s").exists()


def test_tmx_text_with_characters_xml_forbids_and_a_carriage_return_reads_back():
    """(were: a control character dropped, gluing "Hund" and "schläft"; a raw carriage return in a prop
    read back as a line feed)"""
    import io
    import xml.etree.ElementTree as ET

    from xmine.mining.writers import write_tmx

    out = io.StringIO()
    write_tmx(out, [("Der Hund\x01schläft & <bellt>.", "The dog\ufffesleeps.", {"url": "u\r63"})], langs=("de", "en"))
    tu = ET.fromstring(out.getvalue()).find("body/tu")
    assert [s.text for s in tu.iter("seg")] == ["Der Hund schläft & <bellt>.", "The dog sleeps."]
    assert tu.find("prop").text == "u\r63"


def test_a_tmx_output_says_how_many_pairs_lost_a_character_xml_forbids(tmp_path, caplog):
    """(a helper: written as spaces without a word, where every other format keeps them)"""
    (tmp_path / "de.txt").write_text("Der Hund\x01schläft.\nDie Katze spielt.\nEs regnet heute.\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("The dog sleeps.\nThe cat plays.\nIt rains today.\n", encoding="utf-8")
    out = tmp_path / "m.tmx"
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "--encoder",
          "use-m3", "--threshold", "none", "--no-filters", "--no-pre-clean", "-q", "-o", out))
    note = json.loads((tmp_path / "m.tmx.json").read_text(encoding="utf-8"))["tmx_note"]
    assert note == ("1 pair(s) hold characters XML 1.0 forbids (C0 controls, U+FFFE, U+FFFF), written in the TMX "
                    "as spaces; every other format keeps them")
    assert warned(caplog, f"{out}: {note}")
    ok(xm("mine", tmp_path / "en.txt", tmp_path / "en.txt", "--src-lang", "en", "--tgt-lang", "en", "--encoder",
          "use-m3", "--allow-same-input", "-q", "-o", tmp_path / "clean.tmx"))
    assert "tmx_note" not in json.loads((tmp_path / "clean.tmx.json").read_text(encoding="utf-8"))


def test_a_dataset_card_names_its_languages_as_bcp_47_tags():
    """(was: `- zho_Hant`, `- eng_Latn`: no language code the Hub reads; TMX wrote zh-Hant and en)"""
    from xmine.mining.dataset_card import dataset_card

    card = dataset_card({"provenance": {"parameters": {}}}, keys=("zho_Hant", "eng_Latn"), pairs=3, columns=())
    assert "language:\n- zh-Hant\n- en\n" in card, card


def test_a_tsv_field_loses_every_line_break_a_sentence_loses():
    """(was: only tab, LF and CR: a kept field's U+2028 or \\x0b split the row for readers that split
    at every line break, as Python's str.splitlines does)"""
    from xmine.mining.writers import tsv_field

    value = "u\t1\n2\r3\x0b4\x0c5\x1c6\x856\u20287\u20298"
    assert tsv_field(value) == "u 1 2 3 4 5 6 6 7 8" and len(tsv_field(value).splitlines()) == 1


def test_kept_fields_are_read_into_a_file_not_held_in_memory(tmp_path):
    """--keep-field of every mined pair held each value in memory (a URL each: about ten times the
    pairs' own arrays); the values are now written to a file as the corpus is read and read back a
    pair at a time. 2,000 records of 20 KB values (40 MB): the peak of reading and going through
    them stays under 4 MB, and every value, a missing one and a repeated record come back."""
    import tracemalloc

    from xmine.io.record_fields import record_fields

    n, size = 2000, 20_000
    with open(tmp_path / "c.jsonl", "w", encoding="utf-8") as f:
        for i in range(1, n + 1):
            record = {"text": f"sentence {i}", "url": f"{i}:" + "u" * size, "meta": {"tab": f"a\tb\n{i}"}}
            if i == 7:
                del record["url"]
            f.write(json.dumps(record) + "\n")
    records = np.concatenate([np.arange(n, 0, -1), [5, 5]])  # (output order, best first: any record order)
    tracemalloc.start()
    try:
        url, tab = record_fields(tmp_path / "c.jsonl", None, ["url", "meta"], records, tmp_path)
        lengths = [len(url[i] or "") for i in range(len(records))]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak / 2**20:.1f} MB"
    assert len(url) == len(tab) == n + 2 and url.dtype == object
    assert url[0] == f"{n}:" + "u" * size and url[n - 1] == "1:" + "u" * size and url[n] == url[n + 1] == "5:" + "u" * size
    assert url[n - 7] is None and lengths[n - 7] == 0  # (record 7 has no url)
    assert json.loads(tab[n - 3]) == {"tab": "a\tb\n3"}  # (an object, as JSON; its tab and line break kept)


def test_a_bitext_of_blank_lines_a_null_translation_and_a_dataset_of_no_rows_are_said_as_such(tmp_path):
    """(a helper: a TSV bitext of blank lines alone was "0 column(s), but the source is column 1";
    `"translation": null` was "no field 'translation.de' (fields: translation)"; a dataset saved with
    no rows was "cannot open as a Hugging Face dataset (list index out of range)")"""
    import datasets

    (tmp_path / "blank.tsv").write_text("\n\n\n", encoding="utf-8")
    with untouched(tmp_path):
        refused(xm("score", tmp_path / "blank.tsv", "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3",
                   "-o", tmp_path / "b.tsv"), "blank.tsv: no pair has a source text (3 pair(s), every source empty)")
    rows = [{"translation": {"de": "Guten Morgen", "en": "Good morning"}}, {"translation": None},
            {"translation": {"de": "Danke", "en": "Thanks"}}]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ok(xm("score", tmp_path / "p.jsonl", "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-q",
          "-o", tmp_path / "s.jsonl"))
    scored = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["translation"], r["rule"]) for r in scored][1] == (None, "empty") and len(scored) == 3
    # none kept: the file has the columns a kept row would have (a helper: src and tgt, not translation)
    import pyarrow.parquet as pq

    ok(xm("score", tmp_path / "p.jsonl", "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-q",
          "--kept-only", "--threshold", "50", "-o", tmp_path / "none.parquet"))
    ok(xm("score", tmp_path / "p.jsonl", "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-q",
          "-o", tmp_path / "all.parquet"))
    assert pq.read_table(tmp_path / "none.parquet").num_rows == 0
    assert pq.read_schema(tmp_path / "none.parquet").names == pq.read_schema(tmp_path / "all.parquet").names
    assert "translation" in pq.read_schema(tmp_path / "none.parquet").names
    datasets.Dataset.from_dict({"text": []}, features=datasets.Features({"text": datasets.Value("string")})) \
        .save_to_disk(str(tmp_path / "hf0"))
    with untouched(tmp_path):
        refused(xm("embed", tmp_path / "hf0", "--lang", "de", "--encoder", "use-m3", "-o", tmp_path / "st"),
                "hf0: no text in the hf input (0 record(s): a dataset saved with no rows)")


def test_a_kept_field_is_looked_for_in_the_first_thousand_records(tmp_path):
    """A field that none of the first FIELD_SAMPLE records holds is a typo, refused before the run; one
    that a record among them holds is kept (null where missing), whatever the records' order."""
    from xmine.io.record_fields import FIELD_SAMPLE, check_fields_readable

    for at, accepted in ((FIELD_SAMPLE, True), (FIELD_SAMPLE + 1, False)):
        path = tmp_path / f"at{at}.jsonl"
        path.write_text("".join(json.dumps({"text": f"Satz {i}.", **({"url": "u"} if i == at else {})}) + "\n"
                                for i in range(1, FIELD_SAMPLE + 3)), encoding="utf-8")
        if accepted:
            check_fields_readable(path, None, ["url"], option="--keep-field")
            continue
        with pytest.raises(InputError) as e:
            check_fields_readable(path, None, ["url"], option="--keep-field")
        assert str(e.value) == (f"{path}:1: --keep-field 'url': no such field in any of the first 1,000 records "
                                "(fields of the first: text)")
