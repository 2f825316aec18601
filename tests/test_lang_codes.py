"""Language codes as the user writes them (xmine.langs, the LANG option type): FLORES/NLLB
`zho_Hant`, BCP-47 `zh-Hant`, ISO 639-1/3; the script is kept (simplified and traditional Chinese
are two languages in every output), the user's code is what stores and outputs record, and what
needs a canonical code (language identification, projections) still gets one."""

from __future__ import annotations

import json

import pytest

from clitools import ok, refused, xm
from flores import flores_lines
from xmine.langs import is_known_lang, lang_script, normalize_lang, same_language


@pytest.mark.parametrize("code", ["eng_Latn", "zho_Hant", "zh-Hant", "zh-Hant-TW", "de", "deu", "de-DE", "uzn_Latn"])
def test_every_form_is_a_known_code(code):
    assert is_known_lang(code)


@pytest.mark.parametrize("code", ["qqq", "de DE", "eng_Latn;rm", "", "x"])
def test_what_is_not_a_code_is_refused(code):
    assert not is_known_lang(code)


def test_every_flores200_code_is_known(data_dir):
    """Every language of FLORES-200 devtest (calibration reads it; users name their data by it),
    `ajp_Arab` too, whose ISO 639-3 code was retired in 2023."""
    codes = sorted(p.name.split(".")[0] for p in (data_dir / "parallel" / "flores200" / "devtest").glob("*.devtest"))
    assert len(codes) >= 200
    assert [c for c in codes if not is_known_lang(c)] == []


def test_a_flores_member_language_is_judged_by_the_label_of_its_macrolanguage():
    """(a helper: `--src-lang lvs_Latn` turned the language filter off, "not known to fasttext", and
    `langid --eval lvs_Latn.100` was refused, while `lv` ran at 99%) The FLORES-200 members of a
    macrolanguage that fastText labels by the macrolanguage are known to it under their own code."""
    pytest.importorskip("fasttext")
    from xmine.mining.langid import knows

    members = ("lvs_Latn", "khk_Cyrl", "ory_Orya", "plt_Latn", "ydd_Hebr", "kmr_Latn", "quy_Latn")
    assert [c for c in members if not knows("fasttext", c)] == []
    assert normalize_lang("lvs_Latn") == normalize_lang("lv") and not same_language("prs_Arab", "fa")


def test_codes_compare_as_one_language_keeping_the_script():
    assert lang_script("zho_Hant") == lang_script("zh-Hant") == "Hant" and lang_script("de-DE") is None
    assert same_language("de", "deu_Latn") and same_language("de-DE", "deu")
    assert same_language("zho_Hant", "zh-Hant") and not same_language("zho_Hans", "zho_Hant")
    assert normalize_lang("uzn_Latn") == "uzb"  # the class language identification and projections use


@pytest.mark.slow
def test_simplified_and_traditional_chinese_stay_two_languages_in_every_output(data_dir, tmp_path):
    import datasets

    for code in ("zho_Hans", "zho_Hant"):
        (tmp_path / f"{code}.txt").write_text("\n".join(flores_lines(data_dir, code, 40)) + "\n", encoding="utf-8")
    ok(xm("embed", tmp_path / "zho_Hans.txt", "--lang", "zho_Hans", "--encoder", "use-m3", "-q",
          "-o", tmp_path / "hans"))
    assert json.loads((tmp_path / "hans" / "manifest.json").read_text())["lang"] == "zho_Hans"
    common = ("--no-filters", "--threshold", "none", "--encoder", "use-m3", "-q")  # every pair: the codes are the point
    ok(xm("mine", tmp_path / "hans", tmp_path / "zho_Hant.txt", "--src-lang", "zho_Hans", "--tgt-lang", "zh-Hant",
          "--format", "hf", "-o", tmp_path / "mined", *common))
    ds = datasets.load_from_disk(str(tmp_path / "mined"))
    assert ds.features["translation"].languages == ["zho_Hans", "zh-Hant"] and len(ds) >= 35
    ok(xm("mine", tmp_path / "hans", tmp_path / "zho_Hant.txt", "--src-lang", "zho_Hans", "--tgt-lang", "zho_Hant",
          "-o", tmp_path / "m.jsonl", *common))
    row = json.loads((tmp_path / "m.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert set(row["translation"]) == {"zho_Hans", "zho_Hant"}
    # a store of one script is not the other's, whatever the code's form
    refused(xm("mine", tmp_path / "hans", tmp_path / "zho_Hant.txt", "--src-lang", "zh-Hant", "--tgt-lang",
               "zho_Hant", "-o", tmp_path / "x.tsv", *common), "'zho_Hans'", "'zh-Hant'")


def test_the_code_given_is_recorded_and_identification_still_maps_it(data_dir, tmp_path):
    (tmp_path / "uz.txt").write_text("\n".join(flores_lines(data_dir, "uzn_Latn", 5)) + "\n", encoding="utf-8")
    ok(xm("embed", tmp_path / "uz.txt", "--lang", "uzn_Latn", "--encoder", "use-m3", "-q", "-o", tmp_path / "uz"))
    assert json.loads((tmp_path / "uz" / "manifest.json").read_text())["lang"] == "uzn_Latn"
    (tmp_path / "de.txt").write_text("\n".join(flores_lines(data_dir, "deu_Latn", 30)) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(flores_lines(data_dir, "eng_Latn", 30)) + "\n", encoding="utf-8")
    # --lang-filter checks the user's codes in the identifier's own (canonical) codes
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--src-lang", "deu_Latn", "--tgt-lang", "en-GB",
          "--encoder", "use-m3", "--lang-filter", "--no-filters", "-q", "-o", tmp_path / "m.jsonl"))
    row = json.loads((tmp_path / "m.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert set(row["translation"]) == {"deu_Latn", "en-GB"}


def test_langid_refuses_standard_input_and_standard_output_as_dash(tmp_path, monkeypatch):
    """langid reads files and writes standard output without -o: `-` is refused on either side
    (was: `-o -` wrote a file named '-', which `langid -` then read as its input)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one.txt").write_text("Hallo Welt.\n", encoding="utf-8")
    refused(xm("langid", "--lid", "fasttext", "one.txt", "-o", "-"), "'-': langid writes standard output when -o")
    for given in ("-", "de=-"):
        refused(xm("langid", "--lid", "fasttext", given), "'-': langid reads files, not standard input")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.txt"]


@pytest.mark.parametrize("name, fmt", [("p.jsonl", "jsonl"), ("p.parquet", "parquet"), ("de=p.csv.gz", "csv")])
def test_langid_refuses_a_structured_file_it_would_read_as_text(tmp_path, monkeypatch, name, fmt):
    """langid reads text, one sentence a line: a file whose name says JSON Lines, Parquet or CSV is
    refused, naming it (was: JSON Lines labelled as their JSON source, exit 0; Parquet refused as
    'a Parquet file (name it .parquet, or give its format)', an option langid has not)."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / name.split("=")[-1]
    path.write_text('{"text": "Hallo Welt."}\n', encoding="utf-8")
    said = refused(xm("langid", "--lid", "fasttext", name), f"{path.name}: a {fmt} file by its name; langid reads text")
    assert "--input-format" not in said
