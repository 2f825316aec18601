"""The configs of a mining run (mining/config.py): each refuses a bad value or combination in one
line before anything is read, the command line reports a conflict as a usage error, the Python
API refuses a keyword given beside the config that holds it, and the command and the API mine
the same pairs from the same settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clitools import ok, refused, warned, xm
from xmine.encoders.base import EncoderConfig
from xmine.errors import ConfigError
from xmine.mining.config import (EncodingConfig, FilterConfig, MineConfig, OptionConflict, OutputConfig, SearchConfig,
                                 SelectionConfig, SideInput)
from xmine.mining.filters import PairFilterConfig


def _run(side_a: Path, side_b: Path, **configs) -> MineConfig:
    return MineConfig(src=SideInput(path=side_a, lang="de"), tgt=SideInput(path=side_b, lang="en"),
                      output=OutputConfig(path=side_a.with_suffix(".out")), **configs)


BAD = [
    (lambda: SelectionConfig(threshold=1.1, operating_point="precision"), OptionConflict,
     "give --threshold or --operating-point, not both"),
    (lambda: SelectionConfig(threshold=None, operating_point="balanced"), OptionConflict, "not both"),
    (lambda: SelectionConfig(threshold=float("nan")), ConfigError, "threshold must be a finite number"),
    (lambda: SelectionConfig(threshold="1.05"), ConfigError, "threshold must be a finite number"),
    (lambda: SelectionConfig(margin="cosine"), ConfigError, "margin must be one of ratio, distance, absolute"),
    # a threshold no pair of the margin reaches: a ratio value (was: exit 0, 0 pairs)
    (lambda: SelectionConfig(margin="distance", threshold=1.02), OptionConflict,
     "--threshold 1.02 is above what the distance margin gives a pair"),
    (lambda: SelectionConfig(margin="absolute", threshold=1.01), OptionConflict,
     "--threshold 1.01 is above what the absolute margin gives a pair"),
    (lambda: SelectionConfig(retrieval="both"), ConfigError, "retrieval must be one of"),
    (lambda: SelectionConfig(operating_point="recall"), ConfigError, "operating_point must be one of"),
    (lambda: SearchConfig(k=0), ConfigError, "k must be >= 1 (got 0)"),
    # (was: `-k 20000` ran for minutes in 4 GB on 2,000 x 10,000 sentences)
    (lambda: SearchConfig(k=257), ConfigError, "-k 257: at most 256"),
    (lambda: SearchConfig(workers=0), ConfigError, "workers (--workers) must be 1 to 1,024 (got 0)"),
    (lambda: SearchConfig(workers=2**40), ConfigError, "workers (--workers) must be 1 to 1,024"),
    (lambda: SearchConfig(product="tpu"), ConfigError, "product must be one of auto, fp32, bf16, cuda"),
    (lambda: SearchConfig(approximate=True, index_type="hnsw"), ConfigError, "index type must be one of"),
    (lambda: SearchConfig(approximate=True, nprobe=0), ConfigError, "nprobe must be >= 1"),
    # the settings of the search not run (was: read and dropped without a word)
    (lambda: SearchConfig(nlist=8, refine=False), ConfigError,
     "--nlist, --no-refine: settings of the approximate search, which runs with --approximate"),
    (lambda: SearchConfig(approximate=True, workers=2, product="fp32"), ConfigError,
     "--product, --workers: settings of the exact search, which --approximate replaces"),
    (lambda: FilterConfig(min_length=5, max_length=3), ConfigError,
     "max_length (--max-length) 3 is below min_length (--min-length) 5: no sentence could be kept"),
    (lambda: FilterConfig(max_length_ratio=0.5), ConfigError, "max_length_ratio must be >= 1"),
    (lambda: FilterConfig(max_length_ratio=float("inf")), ConfigError, "max_length_ratio must be a finite number"),
    (lambda: OutputConfig(path="m.out", format="xlsx"), ConfigError, "m.out: format must be one of"),
    (lambda: EncodingConfig(precision="fp8"), ConfigError, "precision must be one of"),
    # (was: taken until a model was loaded, then an EncoderError)
    (lambda: EncodingConfig(runtime="bogus"), ConfigError, "runtime must be one of auto, torch, openvino (got 'bogus')"),
    (lambda: EncoderConfig(runtime="tensorrt"), ConfigError, "runtime must be one of auto, torch, openvino"),
    (lambda: EncodingConfig(device=3), ConfigError, "device must be a string (got 3)"),
    (lambda: SideInput(path="de.txt", lang="klingon"), ConfigError, "de.txt: 'klingon' is not a known language"),
    (lambda: SideInput(path="de.txt", keep_fields="url"), ConfigError, "keep_fields must be a list of field names"),
    (lambda: SideInput(path="de.txt", keep_fields=("url", "")), ConfigError, "non-empty field names"),
    (lambda: SideInput(path=5), ConfigError, "path must be a string or path (got 5)"),  # (was: a TypeError)
    (lambda: SideInput(path="de.txt", input_format="jsonl"), ConfigError, "InputFormat(format='jsonl')"),
]


@pytest.mark.parametrize("make, kind, message", BAD, ids=[m for _, _, m in BAD])
def test_a_config_refuses_a_bad_value_or_combination_in_one_line(make, kind, message):
    with pytest.raises(kind) as caught:
        make()
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_language_filter_needs_both_languages_and_known_ones(tmp_path):
    a, b = tmp_path / "de.txt", tmp_path / "en.txt"
    with pytest.raises(OptionConflict, match=r"^--lang-filter needs the language of each side: give --tgt-lang$"):
        MineConfig(src=SideInput(path=a, lang="de"), tgt=SideInput(path=b), output=OutputConfig(path=tmp_path / "o"),
                   filters=FilterConfig(lang_filter=True))
    with pytest.raises(ConfigError, match="language identification 'fasttext' does not know language 'tlh'"):
        MineConfig(src=SideInput(path=a, lang="de"), tgt=SideInput(path=b, lang="tlh"),
                   output=OutputConfig(path=tmp_path / "o"), filters=FilterConfig(lang_filter=True))
    # Off, or left to its default, it needs neither.
    assert _run(a, b, filters=FilterConfig(lang_filter=False)).filters.lang_filter is False


def test_the_command_reports_a_conflict_as_a_usage_error_before_reading_anything(tmp_path):
    a, b = tmp_path / "de.txt", tmp_path / "en.txt"
    a.write_text("Hallo.\n", encoding="utf-8")
    b.write_text("Hello.\n", encoding="utf-8")
    out = tmp_path / "m.tsv"
    res = xm("mine", a, b, "-o", out, "--threshold", "none", "--operating-point", "precision")
    assert refused(res, "give --threshold or --operating-point, not both").startswith("xmine: error: mine: ")
    refused(xm("mine", a, b, "-o", out, "--lang-filter", "--src-lang", "de"), "give --tgt-lang")
    refused(xm("mine", a, b, "-o", out, "--min-length", "5", "--max-length", "3"), "--max-length) 3 is below min_length")
    # a filter's limit for a filter switched off, a ratio cap for another margin (was: read and dropped)
    refused(xm("mine", a, b, "-o", out, "--margin", "absolute", "--score-max", "1.3"),
            "--score-max 1.3 is on the scale of --margin absolute, whose scores are at most 1: it would drop nothing")
    refused(xm("mine", a, b, "-o", out, "--no-filters", "--score-max", "1.3"),
            "--no-filters switches every pair filter off: --score-max would do nothing")
    refused(xm("mine", a, b, "-o", out, "--no-filters", "--no-filter", "urls"), "--no-filter would do nothing")
    refused(xm("mine", a, b, "-o", out, "--no-filter", "length_ratio", "--filter-length-ratio", "3"),
            "--no-filter length_ratio switches off the filter whose limit --filter-length-ratio gives")
    refused(xm("score", f"{a}:{b}", "-o", out, "--margin", "distance", "--score-max", "1.1"),
            "xmine: error: score: --score-max 1.1 is on the scale of --margin distance, whose scores are at most 1")
    # k=1 with a margin: a pair's one neighbour is its partner, no margin passes (was: "mined 0 pairs",
    # exit 0); with plain cosines it is a search like any other; k above the bound is refused
    refused(xm("mine", a, b, "-o", out, "-k", "1"), "-k 1 with the ratio margin: a pair's one neighbour is the pair")
    refused(xm("score", f"{a}:{b}", "-o", out, "-k", "1", "--margin", "distance"), "-k 1 with the distance margin")
    refused(xm("mine", a, b, "-o", out, "-k", "20000"), "20000 is not in the range 1<=x<=256")
    # a fuzz of every option: NaN passed click's FloatRange, then was refused in the config's words;
    # a huge --workers was blamed on the block sizes alone
    refused(xm("mine", a, b, "-o", out, "--lid-min-confidence", "nan"),
            "Invalid value for '--lid-min-confidence': 'nan' is not a finite number")
    refused(xm("mine", a, b, "-o", out, "--workers", str(10**20)),
            "Invalid value for '--workers': 100000000000000000000 is not in the range 1<=x<=1024")
    MineConfig(src=SideInput(path=a), tgt=SideInput(path=b), output=OutputConfig(path=out),
               search=SearchConfig(k=1), selection=SelectionConfig(margin="absolute", threshold=0.9))
    assert not out.exists() and not Path(f"{out}.work").exists()


#: The options several commands take, each defined once (mining/cli_options.py), the config's default
SHARED_OPTIONS = {"k": SearchConfig().k, "approximate": SearchConfig().approximate,
                  "margin": SelectionConfig().margin, "retrieval": SelectionConfig().retrieval}


def test_a_language_identification_package_not_installed_is_refused_before_any_work(tmp_path, monkeypatch):
    """(was: both sides embedded, then "needs the package langid", leaving an unfinished OUT.json)"""
    import xmine.mining.langid as langid

    monkeypatch.setitem(langid._MODULES, "langid", "xmine_no_such_module")  # whether or not langid is installed
    a, b = tmp_path / "de.txt", tmp_path / "en.txt"
    a.write_text("Hallo.\n", encoding="utf-8")
    b.write_text("Hello.\n", encoding="utf-8")
    # (mine: --lid serves its language filter too, with the language pair filter off; score has none)
    for command in (["mine", a, b, "--no-filter", "language"], ["score", f"{a}:{b}"]):
        refused(xm(*command, "--lid", "langid", "-o", tmp_path / "o.tsv"),
                "language identification 'langid' needs the package langid: pip install langid (or both of them: "
                "pip install 'xmine[lid]')")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["de.txt", "en.txt"]
    from xmine.mining.langid import LID_EXTRA

    # the extra the message names holds the packages it names
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    lid = pyproject.split("\nlid = [", 1)[1].split("]", 1)[0]
    assert sorted(p.split(">")[0].strip('"') for p in lid.split(", ")) == sorted(LID_EXTRA)


def test_an_option_several_commands_take_has_one_definition_and_the_configs_default():
    from xmine.cli import main

    commands = {"mine": main.commands["mine"], "score": main.commands["score"],
                "calibrate": main.commands["calibrate"], "bench bucc": main.commands["bench"].commands["bucc"]}
    for name, default in SHARED_OPTIONS.items():
        found = {}  # each command's definition of the option: everything but its help
        for command, cmd in commands.items():
            for p in cmd.params:
                if p.name == name:
                    found[command] = {k: v for k, v in p.to_info_dict().items() if k != "help"}
        assert len(found) >= 2, (name, found)
        first = next(iter(found.values()))
        assert all(d == first for d in found.values()), (name, found)
        assert first["default"] == default, (name, first)


def test_quiet_and_the_languages_of_the_sides_have_one_definition():
    # -q/--quiet (xmine.options) wherever a command takes it; --src-lang/--tgt-lang (mining/cli_options.py)
    # in mine and score, and under the same names in calibrate (bench bucc's are options of their own).
    from xmine.cli import main

    def definition(command, name):
        return next({k: v for k, v in p.to_info_dict().items() if k != "help"} for p in command.params if p.name == name)

    quiet = [definition(cmd, "quiet") for cmd in main.commands.values() if any(p.name == "quiet" for p in cmd.params)]
    assert len(quiet) >= 5 and all(d == quiet[0] for d in quiet) and quiet[0]["opts"] == ["-q", "--quiet"], quiet
    for name in ("src_lang", "tgt_lang"):
        mine, score, calibrate = (definition(main.commands[c], name) for c in ("mine", "score", "calibrate"))
        assert mine == score and mine["type"]["param_type"] == "LangCode", (mine, score)
        assert calibrate["opts"] == mine["opts"] and calibrate["required"], calibrate

def test_the_api_refuses_a_keyword_beside_the_config_that_holds_it(tmp_path):
    import xmine

    with pytest.raises(ConfigError, match=r"give k inside search=SearchConfig\(\.\.\.\) or as keywords, not both"):
        xmine.mine(["Hallo."], ["Hello."], k=3, search=SearchConfig(k=3))
    with pytest.raises(ConfigError, match="give margin, threshold inside selection=SelectionConfig"):  # None too
        xmine.mine(["Hallo."], ["Hello."], margin="distance", threshold=None, selection=SelectionConfig())
    with pytest.raises(ConfigError, match="give lang_filter inside filters=FilterConfig"):
        xmine.mine(["Hallo."], ["Hello."], lang_filter=False, filters=FilterConfig())
    with pytest.raises(ConfigError, match="src side's language and fields inside its SideInput"):
        xmine.mine(SideInput(path=tmp_path / "de.txt"), ["Hello."], src_lang="de")
    with pytest.raises(ConfigError, match="give k inside search="):
        xmine.score(["Hallo."], ["Hello."], k=2, search=SearchConfig())


@pytest.mark.slow
def test_the_command_and_the_api_mine_the_same_pairs_from_the_same_settings(data_dir, tmp_path):
    """Non-default settings of every config, given as options to `xmine mine` and as configs to
    `xmine.mine`: the same rows, threshold record and filter counts."""
    import pyarrow.parquet as pq

    import xmine
    from tests.flores import flores_lines
    from xmine.mining.api import summary
    from xmine.mining.presearch import PreSearchConfig

    de, en = flores_lines(data_dir, "deu_Latn", 60), flores_lines(data_dir, "eng_Latn", 60)
    (tmp_path / "de.txt").write_text("\n".join(de + [en[3]]) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en[::-1] + ["12 345", de[7]]) + "\n", encoding="utf-8")
    src, tgt = tmp_path / "de.txt", tmp_path / "en.txt"
    out = tmp_path / "m.parquet"
    ok(xm("mine", src, tgt, "-o", out, "-q", "--src-lang", "de", "--tgt-lang", "en", "-k", "3", "--margin",
          "distance", "--retrieval", "intersect", "--threshold", "0.01", "--min-length", "20", "--no-filter",
          "numbers", "--no-pre-clean-step", "copies", "--block-rows", "7", "--block-cols", "11", "--projection",
          "none"))
    table = xmine.mine(
        SideInput(path=src, lang="de"), SideInput(path=tgt, lang="en"),
        search=SearchConfig(k=3, block_rows=7, block_cols=11),
        selection=SelectionConfig(margin="distance", retrieval="intersect", threshold=0.01),
        filters=FilterConfig(min_length=20, pairs=PairFilterConfig(disabled=frozenset({"numbers"})),
                             pre_clean=PreSearchConfig(disabled=frozenset({"copies"}))),
        encoding=EncodingConfig(projection="none"))
    command = pq.read_table(out)
    assert len(table) > 0 and table.to_pylist() == command.to_pylist()
    by_api, by_command = summary(table), json.loads(Path(f"{out}.json").read_text(encoding="utf-8"))
    for key in ("threshold", "filters", "lang_filter", "pre_search", "k_used", "search", "projection_choice"):
        assert by_api[key] == by_command[key], key
    assert by_api["threshold"]["value"] == 0.01 and by_api["filters"]["disabled"] == ["numbers"]
    # The plain keywords build the same configs.
    filters = FilterConfig(min_length=20, pairs=PairFilterConfig(disabled=frozenset({"numbers"})),
                           pre_clean=PreSearchConfig(disabled=frozenset({"copies"})))
    short = xmine.mine(SideInput(path=src, lang="de"), SideInput(path=tgt, lang="en"), k=3, margin="distance",
                       retrieval="intersect", threshold=0.01, projection="none", filters=filters)
    assert [(r["score"], r["translation"]) for r in short.to_pylist()] == \
        [(r["score"], r["translation"]) for r in table.to_pylist()]
    # threshold=None keeps every pair (it is not the calibrated default).
    every = xmine.mine(SideInput(path=src, lang="de"), SideInput(path=tgt, lang="en"), threshold=None, k=3,
                       projection="none")
    assert summary(every)["threshold"]["source"] == "every pair kept (--threshold none), scored with the ratio margin"


def test_the_summary_line_says_how_many_sentences_were_searched(tmp_path, caplog):
    """(was: "from 60 x 60 unique sentences" with length bounds that left far fewer to search)"""
    lines = [f"{'word ' * (i % 12 + 1)}{i}." for i in range(60)]
    (tmp_path / "a.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")
    res = ok(xm("mine", tmp_path / "a.txt", tmp_path / "b.txt", "--encoder", "use-m3", "--min-length", "30",
                "--threshold", "none", "--no-pre-clean", "-o", tmp_path / "m.tsv", "-q"))
    summary = json.loads((tmp_path / "m.tsv.json").read_text(encoding="utf-8"))
    n = summary["src"]["mined_rows"]
    assert n < 60 and f"from 60 x 60 unique sentences ({n} x {n} searched; exact;" in res.output
    # bounds that leave a side nothing are said (was: "mined 0 pairs" and nothing more)
    ok(xm("mine", tmp_path / "a.txt", tmp_path / "b.txt", "--encoder", "use-m3", "--max-length", "3",
          "-o", tmp_path / "none.tsv", "-q"))
    for name in ("a.txt", "b.txt"):
        assert warned(caplog, f"warning: {tmp_path / name}: none of its 60 distinct sentences is within --max-length 3 "
                              "(characters): nothing of it is searched")


def test_a_language_the_encoder_was_not_trained_on_is_said(data_dir, tmp_path, caplog):
    """(was: use-m3 on Swedish kept 12% of FLORES' translations without a word)"""
    from tests.flores import flores_lines

    for lang, code in (("sv", "swe_Latn"), ("de", "deu_Latn"), ("en", "eng_Latn")):
        (tmp_path / f"{lang}.txt").write_text("\n".join(flores_lines(data_dir, code, 30)) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="xmine"):
        ok(xm("mine", tmp_path / "sv.txt", tmp_path / "en.txt", "--src-lang", "sv", "--tgt-lang", "en", "--encoder",
              "use-m3", "-q", "-o", tmp_path / "a.tsv"))
    said = json.loads((tmp_path / "a.tsv.json").read_text(encoding="utf-8"))["encoder_languages"]
    assert said["untrained"] == ["sv"] and said["note"].startswith("use-m3 was not trained on sv")
    assert any(r.getMessage() == said["note"] for r in caplog.records)
    ok(xm("mine", tmp_path / "de.txt", tmp_path / "en.txt", "--src-lang", "de", "--tgt-lang", "en", "--encoder",
          "use-m3", "-q", "-o", tmp_path / "b.tsv"))
    assert "encoder_languages" not in json.loads((tmp_path / "b.tsv.json").read_text(encoding="utf-8"))


def test_a_decimal_is_a_number_where_a_config_takes_one():
    """(a helper: `threshold=Decimal("1.02")` was refused as "must be a number", a Fraction taken)"""
    import decimal

    assert SelectionConfig(threshold=decimal.Decimal("1.02")).threshold == 1.02
    assert type(SelectionConfig(threshold=decimal.Decimal("1.02")).threshold) is float  # (JSON records take it)
    with pytest.raises(ConfigError, match="threshold must be a"):
        SelectionConfig(threshold=decimal.Decimal("NaN"))
