"""Cleaning both sides before the search (mining/presearch.py), alone and through `xmine mine`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from xmine.errors import ConfigError
from xmine.mining.presearch import PreSearchConfig, clean_sides, pair_number_variants

from flores import flores_lines


def test_clean_sides_steps_and_the_fallback_without_languages():
    src = ["Der Hund schläft.", "Seite 3 von 10", "Seite 4 von 12", "12 | 345", "Home | Contact", "Heute: 17 Grad."]
    tgt = ["The dog sleeps.", "home - contact!", "Today: 17 degrees.", "Hash 1", "Hash 2"]
    s, t, record = clean_sides(src, tgt)  # languages unknown: a shared text leaves both sides
    assert s.keep.tolist() == [True, True, False, False, False, True]
    assert s.representative.tolist() == [0, 1, 1, 3, 4, 5]  # "Seite 4 von 12" is mined as "Seite 3 von 10"
    assert t.keep.tolist() == [True, False, True, True, False]
    assert record["removed"] == {"src": {"no_letters": 1, "near_duplicates": 1, "copies": 1},
                                 "tgt": {"no_letters": 0, "near_duplicates": 1, "copies": 1}}
    assert record["copies"]["shared_texts"] == 1 and record["copies"]["dropped_from_both"] == 1
    assert "dropped from both" in record["copies"]["method"]
    # without the identical pair filter, lines without letters may still be mined
    s, _, record = clean_sides(src, tgt, identical_filter=False)
    assert s.keep[3] and "no_letters" not in record["active"]
    s, t, record = clean_sides(src, tgt, config=PreSearchConfig(enabled=False))
    assert s.keep.all() and t.keep.all() and record["active"] == []
    with pytest.raises(ConfigError, match="bogus"):
        PreSearchConfig(disabled=frozenset({"bogus"}))


def test_a_pair_mined_through_a_near_duplicate_goes_to_the_number_variants_that_agree():
    """Lines differing in a number are mined through the first; its pair then goes to the lines
    whose numbers agree (was: mined through "5" against "7", the pair the numbers filter drops,
    and the other line's translation unpaired: both true pairs lost)."""
    src = ["Der Umsatz stieg um 5 Prozent.", "Der Umsatz stieg um 7 Prozent.", "der Umsatz stieg um 5 Prozent!",
           "Der Hund schläft.", "Seite 3 von 10", "Seite 4 von 12"]
    tgt = ["Revenue rose 7 percent.", "The dog sleeps.", "Revenue rose ５ percent", "Page 3 of 10"]
    s, t, _ = clean_sides(src, tgt)
    # the punctuation variant is no number variant; the full-width 5 is one
    assert s.number_variants == {0: [1], 4: [5]} and t.number_variants == {0: [2]}
    # mined: src 0 with tgt 0 (5 against 7), 3 with 1, 4 with 3 (3 and 10 agree; 5 has no partner)
    rows = (np.array([0, 3, 4]), np.array([0, 1, 3]))
    take, src_rows, tgt_rows, moved = pair_number_variants(*rows, s.number_variants, t.number_variants, src, tgt)
    assert list(zip(src_rows.tolist(), tgt_rows.tolist())) == [(0, 2), (1, 0), (3, 1), (4, 3)]
    assert take.tolist() == [0, 0, 1, 2] and moved == 2
    # a variant on one side only: the pair goes to it
    tgt2 = ["Revenue rose 7 percent.", "The dog sleeps."]
    s, t, _ = clean_sides(src[:4], tgt2)
    take, src_rows, tgt_rows, moved = pair_number_variants(np.array([3, 0]), np.array([1, 0]), s.number_variants,
                                                           t.number_variants, src, tgt2)
    assert list(zip(src_rows.tolist(), tgt_rows.tolist())) == [(3, 1), (1, 0)] and take.tolist() == [0, 1]
    assert moved == 1
    # no variant agrees: the pair stays as mined (the numbers filter judges it)
    take, src_rows, tgt_rows, moved = pair_number_variants(np.array([0]), np.array([0]), {0: [1]}, {},
                                                           ["rose 5", "rose 6"], ["rose 7"])
    assert (src_rows.tolist(), tgt_rows.tolist(), moved) == ([0], [0], 0)


def _flores(data_dir, code, rows):
    return [" ".join(s.split()) for s in flores_lines(data_dir, code)[rows]]


@pytest.mark.slow
def test_copies_no_longer_take_their_gold_pair_through_the_cli(data_dir, tmp_path):
    """`xmine mine` with the real encoder: English gold lines copied onto the German side take
    their English line (a self pair the filters then drop) unless the sides are cleaned before the
    search (the default): the copies leave the German side only, boilerplate both sides, and the
    gold pairs are mined; OUT.json counts it all."""
    from click.testing import CliRunner

    from xmine.cli import main

    de, en = _flores(data_dir, "deu_Latn", slice(0, 30)), _flores(data_dir, "eng_Latn", slice(0, 30))
    extra_en = _flores(data_dir, "eng_Latn", slice(500, 520))
    copied = [3, 7, 11, 19]  # English gold lines also on the German side
    # English boilerplate stays on the English side only; French boilerplate fits neither side
    boiler = ["Home | News | Sport | Contact", "Mentions légales | Plan du site | Contact"]
    (tmp_path / "de.txt").write_text("\n".join(de + [en[i] for i in copied] + boiler + ["12 | 345 | 6789"]) + "\n",
                                     encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en + extra_en + boiler) + "\n", encoding="utf-8")
    args = ["mine", str(tmp_path / "de.txt"), str(tmp_path / "en.txt"), "--src-lang", "de", "--tgt-lang", "en",
            "-q", "--projection", "default"]
    gold = {(de[i], en[i]) for i in copied}

    # (without the language filter, which would also take the copies off the German side)
    r = CliRunner().invoke(main, args + ["-o", str(tmp_path / "raw.tsv"), "--no-pre-clean", "--no-lang-filter"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    raw = {tuple(line.split("\t")[1:]) for line in (tmp_path / "raw.tsv").read_text(encoding="utf-8").splitlines()}
    assert not gold & raw  # each copy took its English line
    assert json.loads((tmp_path / "raw.tsv.json").read_text())["pre_search"]["active"] == []

    r = CliRunner().invoke(main, args + ["-o", str(tmp_path / "out.tsv"), "--no-lang-filter"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    rows = [line.split("\t") for line in (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()]
    assert gold <= {(s, t) for _, s, t in rows}
    assert sum((s, t) in set(zip(de, en)) for _, s, t in rows) >= 27
    summary = json.loads((tmp_path / "out.tsv.json").read_text())
    pre = summary["pre_search"]
    assert pre["active"] == ["no_letters", "near_duplicates", "copies"]
    assert pre["removed"]["src"] == {"no_letters": 1, "near_duplicates": 0, "copies": len(copied) + len(boiler)}
    assert pre["removed"]["tgt"] == {"no_letters": 0, "near_duplicates": 0, "copies": 1}
    assert pre["copies"] | {"method": None} == {"shared_texts": len(copied) + len(boiler), "kept_on_src": 0,
                                                "kept_on_tgt": len(copied) + 1, "dropped_from_both": 1,
                                                "method": None}
    assert summary["src"]["mined_rows"] == len(de) and summary["tgt"]["mined_rows"] == len(en) + len(extra_en) + 1
    assert summary["filters"]["removed"]["identical"] == 0  # nothing left for the filter to catch
    assert summary["lang_filter"]["on"] is False and summary["src"]["other_language"] is None
    r = CliRunner().invoke(main, args + ["-o", str(tmp_path / "x.tsv"), "--no-pre-clean-step", "bogus"])
    assert r.exit_code == 2 and "bogus" in r.output

    # the defaults: the language filter runs first when both languages are known (the copies
    # leave the German side there), and is off, saying why, when one is not given
    r = CliRunner().invoke(main, args + ["-o", str(tmp_path / "auto.tsv")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "auto.tsv.json").read_text())
    assert summary["lang_filter"]["on"] and summary["lang_filter"]["source"].startswith("default")
    # the French boilerplate leaves both sides there too
    assert summary["src"]["other_language"] >= len(copied) and summary["tgt"]["other_language"] == 1
    # which lines it dropped, for an audit (was: counts alone): the copies (lines 31-34), the French boilerplate
    dropped = summary["lang_filter"]["dropped_lines"]
    assert {31, 32, 33, 34} <= set(dropped["src"]) and len(dropped["src"]) == summary["src"]["other_language"]
    assert dropped["tgt"] == [len(en) + len(extra_en) + 2]
    rows = [line.split("\t") for line in (tmp_path / "auto.tsv").read_text(encoding="utf-8").splitlines()]
    assert gold <= {(s, t) for _, s, t in rows}
    r = CliRunner().invoke(main, args[:3] + ["-q", "--projection", "default", "-o", str(tmp_path / "nolang.tsv")],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "nolang.tsv.json").read_text())
    assert summary["lang_filter"] == {"on": False, "backend": "fasttext",
                                      "source": "default, off: --src-lang and --tgt-lang not given"}
    assert summary["pre_search"]["copies"]["dropped_from_both"] == len(copied) + len(boiler)


@pytest.mark.slow
def test_one_file_of_both_languages_mined_with_itself_mines_as_its_two_halves(data_dir, tmp_path):
    """`--allow-same-input` on one file of German and English lines (what its help offers it for):
    the language filter takes each side's lines, and the pairs are those of the two halves mined as
    two files (a helper found that the flag's help promised only pairs of a line with itself)."""
    from click.testing import CliRunner

    from xmine.cli import main

    de, en = _flores(data_dir, "deu_Latn", slice(0, 100)), _flores(data_dir, "eng_Latn", slice(0, 100))
    (tmp_path / "de.txt").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    (tmp_path / "both.txt").write_text("\n".join(de + en) + "\n", encoding="utf-8")
    langs = ["--src-lang", "de", "--tgt-lang", "en", "-q"]

    def mined(src, tgt, *more):
        out = tmp_path / f"{src}-{tgt}.tsv"
        r = CliRunner().invoke(main, ["mine", str(tmp_path / src), str(tmp_path / tgt), *langs, *more, "-o", str(out)],
                               catch_exceptions=False)
        assert r.exit_code == 0, r.output
        return {tuple(line.split("\t")[1:]) for line in out.read_text(encoding="utf-8").splitlines()}

    apart = mined("de.txt", "en.txt")
    assert len(apart & set(zip(de, en))) >= 90
    assert mined("both.txt", "both.txt", "--allow-same-input") == apart


@pytest.mark.slow
def test_lines_differing_in_a_number_in_crossed_order_are_both_mined(tmp_path):
    """`xmine mine` with the real encoder: two German lines that differ in a number and their
    translations, in the other order on the English side, among the demo's 167 lines: both pairs
    (was: mined through the first German line against the first English one, the numbers filter
    dropped the pair and neither was written)."""
    from click.testing import CliRunner

    from xmine.cli import main

    demo = Path(__file__).resolve().parents[1] / "demo"
    de_lines = ["Der Umsatz stieg im dritten Quartal um 5 Prozent.", "Der Umsatz stieg im dritten Quartal um 7 Prozent."]
    en_lines = ["Revenue rose 7 percent in the third quarter.", "Revenue rose 5 percent in the third quarter."]
    for name, extra in (("de.txt", de_lines), ("en.txt", en_lines)):
        (tmp_path / name).write_text((demo / name).read_text(encoding="utf-8") + "\n".join(extra) + "\n",
                                     encoding="utf-8")
    r = CliRunner().invoke(main, ["mine", str(tmp_path / "de.txt"), str(tmp_path / "en.txt"), "--src-lang", "de",
                                  "--tgt-lang", "en", "--line-numbers", "-q", "-o", str(tmp_path / "out.tsv")],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    rows = [line.split("\t") for line in (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()]
    found = {(s, t, int(a), int(b)) for _, s, t, a, b in rows if "Quartal" in s or "quarter" in t}
    assert found == {(de_lines[0], en_lines[1], 168, 169), (de_lines[1], en_lines[0], 169, 168)}
    summary = json.loads((tmp_path / "out.tsv.json").read_text())
    assert summary["pre_search"]["removed"]["src"]["near_duplicates"] == 1
    assert summary["pre_search"]["number_variants_paired"] == 2 and summary["filters"]["removed"]["numbers"] == 0
