"""Per-language confidence thresholds of the language filters (mining/langid.py, lid_thresholds.json).

The real fastText model throughout: Afrikaans FLORES lines that it gives Dutch with a confidence
between the global threshold (0.8) and Afrikaans' own stay on an Afrikaans side by default and
leave it under `--lid-min-confidence 0.8`, in `language_mask`, in the `language` pair filter and
through `xmine mine`, whose OUT.json says which thresholds were used.
"""

from __future__ import annotations

import json

import pytest

from xmine.errors import ConfigError
from xmine.mining import filters as F
from xmine.mining import langid as L


def _table_value(code: str) -> float:
    return L.load_thresholds()["thresholds"][code]


def test_the_shipped_table_loads_and_holds_for_the_installed_model():
    table = L.load_thresholds()
    assert table["backend"] == L.DEFAULT_LID and table["default"] == L.GLOBAL_MIN_CONFIDENCE
    assert table["model"]["sha256"] == L.backend_model("fasttext")["sha256"] and L.table_applies("fasttext")
    known = L.supported_languages("fasttext")
    assert set(table["thresholds"]) <= known and len(table["thresholds"]) >= 80
    assert min(table["thresholds"].values()) >= table["recipe"]["floor"] == L.GLOBAL_MIN_CONFIDENCE
    assert "FLORES-200" in table["recipe"]["data"] and table["recipe"]["target_own_dropped"] == 0.01
    # a language's own value, the fallback, other backends, the override
    assert _table_value("afr") > L.GLOBAL_MIN_CONFIDENCE
    assert L.min_confidence_for("af", "fasttext") == L.min_confidence_for("afr_Latn", "fasttext") == _table_value("afr")
    assert L.min_confidence_for("de", "fasttext") == _table_value("deu") == 0.8
    unlisted = sorted(known - set(table["thresholds"]))[0]
    assert L.min_confidence_for(unlisted, "fasttext") == L.GLOBAL_MIN_CONFIDENCE
    assert not L.table_applies("langid")
    assert L.min_confidence_for("af", "fasttext", 0.5) == 0.5
    assert L.thresholds_record(["af", None, "en"], "fasttext") == {
        "thresholds": L.TABLE_SOURCE, "min_confidence": {"afr": _table_value("afr"), "eng": 0.8}}
    assert L.thresholds_record(["af"], "fasttext", 0.8)["thresholds"] == L.OVERRIDE_SOURCE


@pytest.mark.parametrize("damage, problem", [
    (lambda t: "{not json", "Expecting property name"),
    (lambda t: json.dumps(t | {"kind": "something"}), "not a xmine-lid-thresholds file"),
    (lambda t: json.dumps(t | {"backend": "cld3"}), "unknown backend"),
    (lambda t: json.dumps(t | {"thresholds": t["thresholds"] | {"afr": 2}}), "threshold of 'afr' is 2"),
    (lambda t: json.dumps(t | {"thresholds": t["thresholds"] | {"afr": "0.9"}}), "threshold of 'afr'"),
    (lambda t: json.dumps(t | {"thresholds": {"de": 0.8}}), "'de' is not a canonical code"),
    (lambda t: json.dumps(t | {"thresholds": {}}), "no thresholds"),
])
def test_a_damaged_table_is_one_line_naming_the_file(tmp_path, damage, problem):
    table = json.loads(L.THRESHOLDS_PATH.read_text(encoding="utf-8"))
    path = tmp_path / "lid_thresholds.json"
    path.write_text(damage(table), encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        L.load_thresholds(path)
    assert str(path) in str(e.value) and problem in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="missing.json: damaged .*: No such file"):
        L.load_thresholds(tmp_path / "missing.json")


def _between(data_dir) -> tuple[list[str], list[str]]:
    """Afrikaans FLORES lines fastText gives another language with a confidence in [0.8, t_afr),
    and ones it gives another language at or above t_afr."""
    lines = (data_dir / "parallel" / "flores200" / "devtest" / "afr_Latn.devtest").read_text(encoding="utf-8")
    lines = lines.splitlines()
    codes, conf = L.identify(lines)
    t = _table_value("afr")
    wrong = [(s, p) for s, c, p in zip(lines, codes, conf.tolist()) if c and not L.accepts("afr", c)]
    return [s for s, p in wrong if 0.8 <= p < t], [s for s, p in wrong if p >= t]


def test_a_languages_own_threshold_is_applied_and_the_override_wins(data_dir):
    between, above = _between(data_dir)
    assert len(between) >= 5 and above  # the table's reason: 0.8 would drop these own lines
    keep, codes = L.language_mask(between, "af")
    assert keep.all() and set(codes) == {"nld"}
    assert not L.language_mask(between, "af", min_confidence=0.8)[0].any()
    assert not L.language_mask(above, "af")[0].any()  # confident enough: dropped by both
    # the same sentences on a Dutch side: not theirs by the Dutch threshold (0.8) either way
    assert _table_value("nld") == 0.8
    # the `language` pair filter, an English target beside them
    english = ["The weather was fine and the meeting ended early."] * len(between)
    only = frozenset(F.RULES) - {"language"}
    keep, _ = F.apply_pair_filters(between, english, [1.1] * len(between), langs=("afr", "eng"),
                                   config=F.PairFilterConfig(disabled=only))
    assert keep.all()
    keep, reasons = F.apply_pair_filters(between, english, [1.1] * len(between), langs=("afr", "eng"),
                                         config=F.PairFilterConfig(disabled=only, lid_min_confidence=0.8))
    assert not keep.any() and {F.RULES[r] for r in reasons} == {"language"}
    with pytest.raises(ConfigError, match="lid_min_confidence"):
        F.PairFilterConfig(lid_min_confidence=1.5)


@pytest.mark.slow
def test_out_json_records_the_thresholds_used(data_dir, tmp_path):
    """`xmine mine --lang-filter` on an Afrikaans side: by default the table's thresholds (the
    uncertain Afrikaans lines stay), with --lid-min-confidence 0.8 the one value (they leave)."""
    from click.testing import CliRunner

    from xmine.cli import main

    between, _ = _between(data_dir)
    flores = data_dir / "parallel" / "flores200" / "devtest"
    af = flores.joinpath("afr_Latn.devtest").read_text(encoding="utf-8").splitlines()[:20]
    en = flores.joinpath("eng_Latn.devtest").read_text(encoding="utf-8").splitlines()[:20]
    (tmp_path / "af.txt").write_text("\n".join(af + between) + "\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    base = ["mine", str(tmp_path / "af.txt"), str(tmp_path / "en.txt"), "--src-lang", "af", "--tgt-lang", "en",
            "-q", "--lang-filter"]
    summaries = {}
    for name, extra in (("table", []), ("override", ["--lid-min-confidence", "0.8"])):
        r = CliRunner().invoke(main, base + extra + ["-o", str(tmp_path / f"{name}.tsv")], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        summaries[name] = json.loads((tmp_path / f"{name}.tsv.json").read_text())
    table, override = summaries["table"], summaries["override"]
    assert table["lang_filter"]["thresholds"] == "per-language table"
    assert table["lang_filter"]["min_confidence"] == {"afr": _table_value("afr"), "eng": 0.8}
    assert table["filters"]["lid_thresholds"]["thresholds"] == "per-language table"
    assert override["lang_filter"]["thresholds"] == "--lid-min-confidence"
    assert override["lang_filter"]["min_confidence"] == {"afr": 0.8, "eng": 0.8}
    assert override["filters"]["lid_min_confidence"] == 0.8
    assert override["src"]["other_language"] - table["src"]["other_language"] == len(between)
    r = CliRunner().invoke(main, base + ["--lid-min-confidence", "1.5", "-o", str(tmp_path / "bad.tsv")])
    assert r.exit_code == 2 and "--lid-min-confidence" in r.output and not list(tmp_path.glob("bad.tsv*"))
    # score's summary records them as mine's does (was: its --help said so, its OUT.json held none)
    (tmp_path / "af20.txt").write_text("\n".join(af) + "\n", encoding="utf-8")
    for name, extra in (("table", []), ("override", ["--lid-min-confidence", "0.8"])):
        r = CliRunner().invoke(main, ["score", f"{tmp_path / 'af20.txt'}:{tmp_path / 'en.txt'}", "--src-lang", "af",
                                      "--tgt-lang", "en", "-q", *extra, "-o", str(tmp_path / f"score-{name}.tsv")],
                               catch_exceptions=False)
        assert r.exit_code == 0, r.output
        scored = json.loads((tmp_path / f"score-{name}.tsv.json").read_text())
        assert scored["filters"]["lid_thresholds"] == summaries[name]["filters"]["lid_thresholds"], name


def test_tosk_albanian_and_egyptian_arabic_sides_keep_their_own_lines(data_dir):
    """fastText's `als` label is Alemannic (read as gsw), its Albanian label `sq`; Egyptian lines
    mostly get `ara`: the label map and the Albanian and Arabic groups keep such sides whole."""
    from flores import flores_lines

    assert "als" in L.supported_languages("fasttext") and "gsw" in L.supported_languages("fasttext")
    for code, file in (("als", "als_Latn"), ("arz", "arz_Arab")):
        lines = flores_lines(data_dir, file, 100)
        keep, codes = L.language_mask(lines, code, min_confidence=0.8)
        assert keep.mean() >= 0.97, (code, sorted(set(codes)))
        assert not L.language_mask(flores_lines(data_dir, "eng_Latn", 100), code, min_confidence=0.8)[0].all()
