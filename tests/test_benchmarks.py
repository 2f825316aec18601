"""Benchmarks: metrics on hand-checked cases, loaders on the real files, CLI end to end."""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import pearsonr, spearmanr

from xmine.benchmarks import common, geometry, qe, sts, tatoeba
from xmine.errors import ConfigError, InputError
from clitools import refused, tree, xm

# ------------------------------------------------------------------------------------ metrics


def test_retrieval_accuracy_perfect_shifted_reversed():
    n = 5
    assert common.retrieval_accuracy(np.eye(n)) == 100.0
    assert common.retrieval_accuracy(np.roll(np.eye(n), 1, axis=1)) == 0.0
    # reversed order: only the middle row of an odd n maps to itself
    assert common.retrieval_accuracy(np.fliplr(np.eye(n))) == pytest.approx(20.0)


def test_tatoeba_scores_on_unit_vectors_both_directions():
    x = np.eye(4, dtype=np.float32)
    s = tatoeba.retrieval_scores(x, x, margin=True)
    assert s == {"fwd": 100.0, "bwd": 100.0, "fwd_margin": 100.0, "bwd_margin": 100.0}
    shifted = tatoeba.retrieval_scores(x, np.roll(x, 1, axis=0), margin=False)
    assert shifted == {"fwd": 0.0, "bwd": 0.0}


def test_margin_beats_cosine_on_a_hub():
    # y3 is a hub: cosine 0.8 to every query; the true pairs are the diagonal (0.75, and 0.9 for x3).
    sims = np.full((4, 4), 0.1, dtype=np.float32)
    np.fill_diagonal(sims, 0.75)
    sims[:, 3] = 0.8
    sims[3, 3] = 0.9
    assert common.retrieval_accuracy(sims) == 25.0  # cosine: x0..x2 all pick the hub
    m = common.margin_matrix(sims, k=4)
    # hand-computed: x0 -> y0: 0.75 / ((0.4375 + 0.2625) / 2) ; x0 -> y3: 0.8 / ((0.4375 + 0.825) / 2)
    assert m[0, 0] == pytest.approx(0.75 / 0.35, rel=1e-5)
    assert m[0, 3] == pytest.approx(0.8 / 0.63125, rel=1e-5)
    assert common.retrieval_accuracy(m) == 100.0


def test_correlations_against_hand_values_and_scipy():
    assert common.correlations([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx({"pearson": 100.0, "spearman": 100.0})
    assert common.correlations([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx({"pearson": -100.0, "spearman": -100.0})
    # pred (1,2,3) vs gold (1,3,2): r = 0.5 by hand, rho = 0.5
    assert common.correlations([1, 2, 3], [1, 3, 2]) == pytest.approx({"pearson": 50.0, "spearman": 50.0})
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=50), rng.normal(size=50)
    c = common.correlations(a, b)
    assert c["pearson"] == pytest.approx(100 * pearsonr(a, b)[0])
    assert c["spearman"] == pytest.approx(100 * spearmanr(a, b)[0])


def test_alignment_and_uniformity_on_hand_vectors():
    e = np.eye(3)
    assert geometry.alignment(e, e) == pytest.approx(0.0)
    assert geometry.alignment(e, -e) == pytest.approx(4.0)  # antipodal: ||x - (-x)||^2 = 4
    assert geometry.alignment(e, np.roll(e, 1, axis=0)) == pytest.approx(2.0)  # orthogonal
    assert geometry.uniformity(e) == pytest.approx(-4.0)  # every pair at squared distance 2
    assert geometry.uniformity(np.array([[1.0, 0.0], [-1.0, 0.0]])) == pytest.approx(-8.0)
    # not normalised on input: scaled rows give the same values
    assert geometry.uniformity(5 * e) == pytest.approx(-4.0)
    # one identical pair (d=0) and two at d^2=2: log((1 + 2 e^-4) / 3)
    z = np.array([[1.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0]])
    assert geometry.uniformity(z) == pytest.approx(math.log((1 + 2 * math.exp(-4)) / 3))


def test_format_table_and_result_names():
    text = common.format_table(["variant", "acc"], [["raw", 91.234], ["p:meaning", float("nan")]])
    assert "91.2" in text and "n/a" in text and text.splitlines()[0].startswith("variant")
    assert common.safe_name("/models/my-labse/") == "my-labse"
    assert common.default_out("tatoeba", "me5-small", quick=True).name == "tatoeba-me5-small-quick.json"


# ------------------------------------------------------------------------------------ loaders


def test_projection_labels_add_parent_folders_only_where_names_collide(tmp_path):
    labels = common.projection_labels(
        [tmp_path / "mixed/seed", tmp_path / "qe6/seed", tmp_path / "qe6/oracle", tmp_path / "mixed/seed", tmp_path / "raw"]
    )
    assert labels == ["mixed/seed", "qe6/seed", "oracle", "mixed/seed#2", "raw#2"]


def test_sts_loader_on_real_files_column_order_and_track6(data_dir):
    folder = sts.locate(data_dir)
    arabic = lambda s: any("\u0600" <= ch <= "\u06ff" for ch in s)  # noqa: E731
    for name in sts.TRACKS:
        s = sts.load_track(folder, name)
        assert len(s.sent1) == len(s.sent2) == len(s.gold) == 250, name
        assert all(0.0 <= g <= 5.0 for g in s.gold)
    t2 = sts.load_track(folder, "track2")
    assert t2.track.columns == ("en", "ar")
    assert not any(arabic(x) for x in t2.sent1) and all(arabic(x) for x in t2.sent2)
    t6 = sts.load_track(folder, "track6")  # input has 500 lines; the gold scores the first 250
    assert t6.sent1[0] == "A silhouette of two dogs running by a lake." and t6.gold[0] == pytest.approx(1.4)
    assert t6.track.columns == ("en", "tr")
    assert sts.TRACKS["track4a"].columns == ("es", "en") and sts.TRACKS["track4b"].columns == ("en", "es")


def test_sts_loader_errors_name_file_and_line(tmp_path):
    (tmp_path / "STS2017.eval.v1.1").mkdir()
    (tmp_path / "STS2017.gs").mkdir()
    (tmp_path / "STS2017.eval.v1.1" / "STS.input.track5.en-en.txt").write_text("a\tb\nonly one field\n")
    (tmp_path / "STS2017.gs" / "STS.gs.track5.en-en.txt").write_text("1.0\n2.0\n")
    with pytest.raises(InputError) as e:
        sts.load_track(tmp_path, "track5")
    assert e.value.line == 2 and "STS.input.track5.en-en.txt" in str(e.value)
    with pytest.raises(ConfigError):
        sts.load_track(tmp_path, "track9")
    # (were: accepted, every correlation n/a or computed on scores out of the scale; an empty sentence
    # scored; bad UTF-8 said as a byte offset in the file)
    inputs = tmp_path / "STS2017.eval.v1.1" / "STS.input.track5.en-en.txt"
    gold = tmp_path / "STS2017.gs" / "STS.gs.track5.en-en.txt"
    inputs.write_text("a\tb\nc\td\n")
    for scores, fragment in (("1.0\nnan\n", "gold score 'nan' is not a number from 0 to 5"),
                             ("7.5\n1\n", "gold score '7.5' is not a number from 0 to 5")):
        gold.write_text(scores)
        with pytest.raises(InputError, match=fragment) as e:
            sts.load_track(tmp_path, "track5")
        assert e.value.path == gold
    gold.write_text("1\n2\n")
    inputs.write_text("a\tb\nc\t \n")
    with pytest.raises(InputError, match="empty sentence") as e:
        sts.load_track(tmp_path, "track5")
    assert e.value.line == 2
    inputs.write_bytes(b"a\tb\nc\t\xc3(\n")
    with pytest.raises(InputError, match="invalid UTF-8 at byte 2 of the line") as e:
        sts.load_track(tmp_path, "track5")
    assert e.value.line == 2


def test_qe_loader_on_real_files(data_dir):
    folder = qe.locate(data_dir)
    for pair in qe.PAIRS:
        s = qe.load_qe(qe.qe_file(folder, pair), pair)
        assert len(s.sources) == len(s.translations) == len(s.z_mean) == 1000, pair
    ende = qe.load_qe(qe.qe_file(folder, "en-de"), "en-de")
    assert ende.sources[0].startswith("The Sultan appoints judges")
    assert ende.z_mean[0] == pytest.approx(0.34937092778329654)
    # QUOTE_NONE: quotes inside a sentence are kept as they are (row index 19)
    assert ende.sources[19] == 'On Day 35, HouseGuests competed in the "A Lotta Pinata" Power of Veto competition.'


def test_qe_loader_rejects_bad_rows(tmp_path):
    p = tmp_path / "test20.ende.df.short.tsv"
    p.write_text("index\toriginal\ttranslation\tz_mean\n0\ta\tb\t0.5\n1\ta\tb\tnot-a-number\n")
    with pytest.raises(InputError) as e:
        qe.load_qe(p, "en-de")
    assert e.value.line == 3 and "z_mean" in str(e.value)
    # (were: a traceback for bad UTF-8; NaN or inf z_mean and empty sentences accepted)
    for row, fragment in ((b"1\ta\tb\tnan", "z_mean 'nan' is not a finite number"),
                          (b"1\ta\tb\tinf", "z_mean 'inf' is not a finite number"),
                          (b"1\t \tb\t0.1", "empty original sentence"),
                          (b"1\ta\t\xc3(\t0.1", "invalid UTF-8 at byte 4 of the line")):
        p.write_bytes(b"index\toriginal\ttranslation\tz_mean\n0\ta\tb\t0.5\n" + row + b"\n")
        with pytest.raises(InputError, match=re.escape(fragment)) as e:
            qe.load_qe(p, "en-de")
        assert e.value.line == 3, str(e.value)


def test_tatoeba_loader_real_files(data_dir):
    folder = tatoeba.locate(data_dir)
    langs = tatoeba.available_languages(folder)
    assert len(langs) == 112 and set(tatoeba.XTREME36) <= set(langs)
    src, eng = tatoeba.load_pairs(folder, "deu")
    assert len(src) == len(eng) == 1000
    with pytest.raises(ConfigError):
        tatoeba.evaluate_tatoeba(lambda s: None, data_dir, ["xxx"])


# ------------------------------------------------------------------------------------ end to end


def _cli():
    from xmine.cli import main

    return main


@pytest.mark.slow
def test_cli_bench_tatoeba_quick_with_default_encoder_and_report(tmp_path, data_dir):
    out = tmp_path / "tatoeba.json"
    res = CliRunner().invoke(
        _cli(),
        ["bench", "tatoeba", "--quick", "--langs", "deu,fra", "--max-pairs", "40", "--margin",
         "--data-dir", str(data_dir), "--out", str(out)],
    )
    assert res.exit_code == 0, res.output
    assert "raw" in res.output and "avg XTREME (2)" in res.output
    r = json.loads(out.read_text())
    assert r["task"] == "tatoeba" and r["encoder"]["name"] == "me5-small"
    assert r["provenance"]["parameters"]["langs"] == ["deu", "fra"] and "git_commit" in r["provenance"]
    assert len(r["data"]) == 4 and all(len(f["sha256"]) == 64 for f in r["data"])
    raw = r["details"]["raw"]
    assert raw["per_lang"]["deu"]["pairs"] == 40
    assert raw["average"]["avg"] >= 85.0 and raw["average"]["avg_margin"] >= 85.0  # me5-small: ~95+
    # the report renders it
    from xmine.benchmarks import report

    md = report.write_report(tmp_path, tmp_path / "RESULTS.md").read_text()
    assert "## Tatoeba retrieval accuracy@1 (%)" in md and "| raw |" in md and "logical cores" in md
    # a --quick run is marked by its parameters, whatever its file is called (was: by a -quick name only)
    # it says the precision and runtime measured, as the result records them (auto: bf16 on this CPU)
    enc = r["encoder"]
    measured = f"{enc['precision']} on {enc.get('runtime', 'torch')}"
    assert f"*tatoeba.json*: encoder `me5-small` (dim 384, {measured}); **a --quick smoke run**, not comparable" in md
    assert f"Tatoeba retrieval accuracy@1 (%): me5-small at {measured}, a --quick subset" \
        in res.output
    from xmine.errors import OutputError

    with pytest.raises(OutputError, match="already exists"):  # replaced only when asked
        report.write_report(tmp_path, tmp_path / "RESULTS.md")
    assert report.write_report(tmp_path, tmp_path / "RESULTS.md", overwrite=True).read_text().splitlines()[1:3] == \
        md.splitlines()[1:3]


def test_cli_bench_sts_with_use_m3(tmp_path, data_dir):
    out = tmp_path / "sts.json"
    res = CliRunner().invoke(_cli(), ["bench", "sts", "--encoder", "use-m3", "--tracks", "track5,track6",
                                      "--out", str(out)])
    assert res.exit_code == 0, res.output
    r = json.loads(out.read_text())["details"]["raw"]
    assert set(r["per_track"]) == {"track5", "track6"}
    # use-m3 measured here: track5 en-en r = 84.8, track6 tr-en r = 73.1 (first 250 input lines)
    assert r["per_track"]["track5"]["pearson"] > 75 and r["per_track"]["track6"]["pearson"] > 60
    assert r["crosslingual"]["tracks"] == 1 and r["monolingual"]["tracks"] == 1
    # no monolingual track: its mean is undefined, written as null (was: a bare NaN, not JSON)
    out6 = tmp_path / "sts6.json"
    # a track in any case (was: 'unknown STS 2017 track TRACK6')
    res = CliRunner().invoke(_cli(), ["bench", "sts", "--encoder", "use-m3", "--tracks", "TRACK6", "--out", str(out6)])
    assert res.exit_code == 0, res.output

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    r6 = json.loads(out6.read_text(), parse_constant=refuse)["details"]["raw"]
    assert r6["monolingual"]["pearson"] is None and r6["crosslingual"]["pearson"] > 60
    ok_res = CliRunner().invoke(_cli(), ["verify", str(out6)])
    assert ok_res.exit_code == 0, ok_res.output


def test_a_bench_on_languages_the_encoder_was_not_trained_on_says_so(tmp_path, caplog):
    """use-m3 on Swahili and Finnish (was: their low rows without a word, as `mine` warns)"""
    out = tmp_path / "tat.json"
    with caplog.at_level("WARNING", logger="xmine"):
        res = CliRunner().invoke(_cli(), ["bench", "tatoeba", "--encoder", "use-m3", "--langs", "deu,swh,fin",
                                          "--max-pairs", "100", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["provenance"]["parameters"]["encoder_untrained_languages"] == ["swh", "fin"]
    assert any(r.getMessage().startswith("use-m3 was not trained on swh, fin (2 of the 3 languages read)")
               for r in caplog.records)
    # more pairs asked for than a language holds (a fuzz: the number asked recorded, unsaid)
    res = CliRunner().invoke(_cli(), ["bench", "tatoeba", "--encoder", "use-m3", "--langs", "swh", "--max-pairs",
                                      "5000", "--out", str(tmp_path / "swh.json")])
    assert res.exit_code == 0 and "--max-pairs 5,000: no language holds more than 390 pairs; all were used" in res.output


def test_cli_missing_data_is_a_clear_error(tmp_path):
    res = CliRunner().invoke(_cli(), ["bench", "qe", "--data-dir", str(tmp_path / "none"), "--quick"])
    assert res.exit_code == 2
    assert "data not found" in res.output and "mlqe" in res.output
    # a folder that is there but holds no test set: said so (was: "unknown Tatoeba language(s) deu, fra, ...;
    # /tmp has: ", the quick languages named as if they were the mistake)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.txt").write_text("a user's file\n")
    res = CliRunner().invoke(_cli(), ["bench", "tatoeba", "--data-dir", str(tmp_path / "data"), "--quick",
                                      "--out", str(tmp_path / "t.json")])
    assert res.exit_code == 2 and f"{tmp_path / 'data'}: no Tatoeba test files in it" in res.output, res.output
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["data", "notes.txt"]


@pytest.fixture(scope="module")
def center_projection(tmp_path_factory, data_dir):
    """A real projection (method `center`: per-language means, no gradient training) on use-m3."""
    out = tmp_path_factory.mktemp("proj") / "center-usem3"
    res = CliRunner().invoke(_cli(), [
        "train", "--method", "center", "--encoder", "use-m3", "--pairs", str(data_dir / "parallel" / "tatoeba-challenge"),
        "--langs", "deu,fra,eng", "--max-pairs-per-lang", "200", "-o", str(out), "-q"])
    assert res.exit_code == 0, res.output
    return out


def test_cli_bench_with_projection_meaning_and_language_rows(tmp_path, data_dir, center_projection):
    out = tmp_path / "tat.json"
    res = CliRunner().invoke(_cli(), [
        "bench", "tatoeba", "--projection", str(center_projection),  # (its encoder taken, as embed takes it)
        "--langs", "deu,fra", "--max-pairs", "100", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["encoder"]["name"] == "use-m3"
    assert "Tatoeba retrieval accuracy@1 (%): use-m3 at fp32 on torch\n" in res.output  # what the table's numbers are (was: not said)
    r = json.loads(out.read_text())
    assert [row[0] for row in r["table"]["rows"]] == ["raw", "center-usem3:meaning", "center-usem3:language"]
    assert r["projections"]["center-usem3"]["method"] == "center"
    acc = {row[0]: row[3] for row in r["table"]["rows"]}
    assert acc["raw"] >= 85 and acc["center-usem3:meaning"] >= 85
    # the language part of `center` is the language mean: it carries no meaning, retrieval fails
    assert acc["center-usem3:language"] <= 5


def test_cli_plot_and_encoder_mismatch(tmp_path, data_dir, center_projection):
    png = tmp_path / "pca.png"
    # no --encoder: the projection's (was: me5-small encoded, then refused as not the projection's encoder)
    res = CliRunner().invoke(_cli(), ["plot", "--projection", str(center_projection), "--rows", "40", "--out", str(png)])
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert res.output.count("language separation") == 3
    # what made it travels in the PNG, as in a benchmark result (was: its kind alone)
    from PIL import Image

    from xmine.benchmarks.plot import RECORD_KEY

    record = json.loads(Image.open(png).text[RECORD_KEY])
    assert record["encoder"]["name"] == "use-m3" and [p["id"] for p in record["projections"]] == [
        json.loads((center_projection / "config.json").read_text())["weights_sha256"][:16]]
    assert [Path(d["path"]).name for d in record["data"]] == ["deu_Latn.devtest", "eng_Latn.devtest"]
    assert all(d["sha256"] == hashlib.sha256(Path(d["path"]).read_bytes()).hexdigest() for d in record["data"])
    assert record["provenance"]["parameters"]["rows"] == 40 and record["machine"]["cores"]
    assert len(record["separation"]) == 3 and all(  # as printed (an encoding bar may end on the same line)
        f"{name}: language separation {value:.2f}" in res.output for name, value in record["separation"].items())
    # more rows than FLORES-200 holds: all are plotted, and said (was: the title claimed 5,000)
    res = CliRunner().invoke(_cli(), ["plot", "--encoder", "use-m3", "--rows", "5000", "--out", str(png), "--overwrite"])
    assert res.exit_code == 0, res.output
    assert "xmine: warning: --rows 5000: FLORES-200 devtest holds 1,012 sentences a language; plotting all of them" \
        in res.output
    # --projection none is raw alone, as in every other command (was: "Path 'none' does not exist")
    res = CliRunner().invoke(_cli(), ["plot", "--encoder", "use-m3", "--projection", "none", "--rows", "20",
                                      "--out", str(tmp_path / "raw.png")])
    assert res.exit_code == 0 and res.output.count("language separation") == 1, res.output
    # one language against itself (was: accepted, one cloud drawn twice)
    res = CliRunner().invoke(_cli(), ["plot", "--encoder", "use-m3", "--src-lang", "eng_Latn", "--out",
                                      str(tmp_path / "same.png")])
    assert res.exit_code == 2 and "both eng_Latn" in res.output and not (tmp_path / "same.png").exists()
    # a use-m3 projection refuses another encoder, with a one-line error
    res = CliRunner().invoke(_cli(), ["bench", "sts", "--encoder", "me5-small", "--tracks", "track5",
                                      "--projection", str(center_projection), "--out", str(tmp_path / "x.json")])
    assert res.exit_code == 2 and "encoder" in res.output and not (tmp_path / "x.json").exists()


def test_mining_languages_a_user_projection_never_saw_is_said(tmp_path, data_dir, center_projection, caplog):
    """(was: a projection trained on German, French and English mined Spanish without a word)"""
    from tests.flores import flores_lines

    for code, lang in (("fra_Latn", "fr"), ("spa_Latn", "es"), ("eng_Latn", "en")):
        (tmp_path / f"{lang}.txt").write_text("\n".join(flores_lines(data_dir, code, 40)) + "\n", encoding="utf-8")
    for src, tgt, unseen in (("fr", "en", None), ("fr", "es", ["es"])):
        out = tmp_path / f"{src}-{tgt}.tsv"
        res = CliRunner().invoke(_cli(), ["mine", str(tmp_path / f"{src}.txt"), str(tmp_path / f"{tgt}.txt"),
                                          "--src-lang", src, "--tgt-lang", tgt, "--encoder", "use-m3", "--projection",
                                          str(center_projection), "-o", str(out), "-q"])
        assert res.exit_code == 0, res.output
        said = json.loads(out.with_name(out.name + ".json").read_text()).get("projection_languages")
        assert (said and said["unseen"]) == unseen, said
    assert f"projection {center_projection} was not trained on es: its meaning part of that language" in said["note"]
    # ... and embed and build-index say it too (was: an index of such vectors searched without a word)
    note = f"projection {center_projection} was not trained on es: its meaning part of that language is untested"
    for lang, expected in (("es", True), ("fr", False)):
        for args in (["embed", "--lang", lang, "-o", str(tmp_path / f"{lang}.store")],
                     ["build-index", "--lang", lang, "-o", str(tmp_path / f"{lang}.index")]):
            caplog.clear()
            with caplog.at_level("WARNING", logger="xmine"):
                res = CliRunner().invoke(_cli(), [args[0], str(tmp_path / f"{lang}.txt"), *args[1:], "--encoder",
                                                  "use-m3", "--projection", str(center_projection), "-q"])
            assert res.exit_code == 0, res.output
            assert any(note.replace(" es:", f" {lang}:") in r.getMessage() for r in caplog.records) == expected, args


def test_cli_geometry_records_the_rows_it_measured_and_refuses_a_language_against_itself(tmp_path, data_dir):
    """(was: `--rows 5000` recorded as given when 1,012 lines were used; `--pivot deu_Latn --langs
    deu_Latn` reported alignment 0.000)"""
    out = tmp_path / "geo.json"
    res = CliRunner().invoke(_cli(), ["bench", "geometry", "--encoder", "use-m3", "--langs", "deu_Latn", "--rows", "5000",
                                      "--data-dir", str(data_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "--rows 5000: FLORES-200 devtest holds 1,012 lines a language; all were used" in res.output
    assert json.loads(out.read_text())["provenance"]["parameters"]["rows"] == 1012
    res = CliRunner().invoke(_cli(), ["bench", "geometry", "--encoder", "use-m3", "--langs", "deu_Latn", "--pivot",
                                      "deu_Latn", "--data-dir", str(data_dir), "--out", str(tmp_path / "same.json")])
    assert res.exit_code == 2 and "holds the pivot deu_Latn" in res.output and not (tmp_path / "same.json").exists()
    # ISO codes, as `xmine calibrate` takes them (was: "missing FLORES-200 file for 'de'"), the
    # pivot among them by its code
    assert geometry.measured_languages(data_dir, ["de", "fra_Latn", "rus"], "en") == (
        ["deu_Latn", "fra_Latn", "rus_Cyrl"], "eng_Latn")
    with pytest.raises(ConfigError, match="--langs holds the pivot deu_Latn"):
        geometry.measured_languages(data_dir, ["de"], "deu_Latn")
    with pytest.raises(ConfigError, match="^--pivot 'zho': 2 FLORES-200 files match"):
        geometry.measured_languages(data_dir, ["de"], "zho")


def test_cli_plot_takes_iso_codes_and_writes_only_a_png(tmp_path, data_dir):
    from xmine.benchmarks.plot import plotted_languages

    assert plotted_languages(data_dir, "de", "eng_Latn", None) == ("deu_Latn", "eng_Latn")
    # the same language by two codes; a PNG under another suffix (was: written to p.txt without a word)
    for args, message in ((["--src-lang", "en", "--out", str(tmp_path / "p.png")], "both eng_Latn"),
                          (["--src-lang", "de", "--out", str(tmp_path / "p.txt")], "--out " + str(tmp_path / "p.txt"))):
        res = CliRunner().invoke(_cli(), ["plot", "--encoder", "use-m3", "--data-dir", str(data_dir), *args])
        assert res.exit_code == 2 and message in res.output, res.output
    assert not list(tmp_path.iterdir())


def test_list_options_refuse_an_empty_list_and_an_item_listed_twice(tmp_path):
    """(was: `bench tatoeba --langs ""` ran all 112 languages, `--langs deu,deu` counted German twice in
    the averages, `train --langs ""` trained on every language found)"""
    from tests.clitools import refused, xm

    out = tmp_path / "x.json"
    for args, fragment in (
            (("bench", "tatoeba", "--langs", "", "--out", out), "an empty list"),
            (("bench", "tatoeba", "--langs", "deu,fra,deu", "--out", out), "deu listed twice"),
            (("bench", "geometry", "--langs", " , ", "--out", out), "an empty list"),
            (("bench", "massive", "--locales", "de-DE,de-DE", "--out", out), "de-DE listed twice"),
            (("bench", "qe", "--pairs", "en-de,en-de", "--out", out), "en-de listed twice"),
            (("bench", "sts", "--tracks", "", "--out", out), "an empty list"),
            (("bench", "mining", "--langs", "de,de", "--out", out), "de listed twice"),
            (("train", "--pairs", tmp_path, "--langs", "", "-o", tmp_path / "proj"), "an empty list"),
            # an item left out by mistake (was: 'deu,' ran German alone), one code in two cases
            (("bench", "tatoeba", "--langs", "deu,", "--out", out), "an empty item in 'deu,'"),
            (("bench", "qe", "--pairs", "en-de,,en-zh", "--out", out), "an empty item"),
            (("bench", "sts", "--tracks", "track5,TRACK5", "--out", out), "TRACK5, track5 listed twice"),
            # one projection named twice (was: measured twice, as two numbered rows of one table)
            (("bench", "tatoeba", "--projection", tmp_path / "p", "--projection", f"{tmp_path / 'p'}/",
              "--out", out), "names the projection"),
            (("bench", "sts", "--projection", "none", "--projection", "NONE", "--out", out), "'NONE' names"),
            (("bench", "sts", "--projection", "default", "--projection", "default", "--out", out),
             "'default' is given twice"),
            # (a fuzz: 'none' beside a projection was dropped without a word)
            (("bench", "sts", "--projection", "none", "--projection", tmp_path / "p", "--out", out),
             "'none' (the raw encoder output alone) beside a projection"),
            # bench mining: a threshold of no margin's scale, --sets-dir with --noisy, before any set is built
            (("bench", "mining", "--threshold", "0", "--sets-dir", tmp_path / "sets", "--out", out),
             "--threshold 0 is below an ordinary pair's ratio margin"),
            (("bench", "mining", "--noisy", "--sets-dir", tmp_path / "sets", "--out", out),
             "--sets-dir holds the clean sets; --noisy builds its own"),
            (("bench", "sts", "--prompt-name", "", "--out", out), "Invalid value for '--prompt-name': '' is empty"),
            # NaN is no number (was: passed click's float and FloatRange)
            (("bench", "mining", "--threshold", "nan", "--out", out), "'nan' is not a finite number"),
            (("bench", "mining", "--gold-fraction", "nan", "--out", out), "'nan' is not a finite number"),
            # a seed numpy and torch both take (was: a traceback from either)
            (("bench", "mining", "--seed", "-1", "--out", out), "-1 is not in the range 0<=x<=4294967295"),
            (("bench", "massive-templates", "--seed", str(2**64), "--out", out), "is not in the range 0<=x<="),
            (("train", "--pairs", tmp_path, "--seed", "-1", "-o", tmp_path / "proj"), "'--seed': -1 is not"),
            (("train", "--pairs", tmp_path, "--valid-fraction", "1e-320", "-o", tmp_path / "proj"),
             "'--valid-fraction': 1e-320 is not in the range 0.0001<=x<1")):
        refused(xm(*args), fragment)
    assert not list(tmp_path.iterdir())


def test_a_qe_pair_named_the_other_way_round_is_refused_with_the_pair_wmt20_has(data_dir):
    """`de-en` is refused naming en-de, English first (the source is the sentence the QE scores
    judge the translation of, so the pair is not reversed for the user)."""
    from xmine.benchmarks import qe

    with pytest.raises(ConfigError, match=r"unknown QE pair 'de-en'.*\(en-de: a pair names the source language"):
        qe.evaluate_qe(None, data_dir, ["de-en"])


def test_each_benchmark_takes_a_language_by_any_of_its_codes(tmp_path, data_dir):
    """`de`, `deu` and `de-DE` name one language in every benchmark, as in `plot` and `mine` (was:
    Tatoeba took `deu` only, `bench mining` `de` only, MASSIVE `de-DE` only); two codes of one
    language, or one naming several, are refused."""
    from tests.clitools import refused, xm
    from xmine.benchmarks import massive
    from xmine.langs import codes_among

    assert codes_among(["de", "jpn", "xx", "zh"], ["de-DE", "zh-CN", "zh-TW", "ja-JP"]) == (
        ["de-DE", "ja-JP"], ["xx", "zh"])
    assert codes_among(["de", "fra_Latn", "kk"], ["deu", "fra", "kaz"]) == (["deu", "fra", "kaz"], [])
    # a code naming a region names no other region's data (was: zh-CN run on zh-TW, pt-BR on pt-PT)
    assert codes_among(["zh-CN", "pt-BR", "es_419", "fr"], ["zh-TW", "pt-PT", "es-ES", "fr-FR"]) == (
        ["fr-FR"], ["zh-CN", "pt-BR", "es_419"])
    with pytest.raises(ConfigError, match="unknown MASSIVE locale"):
        massive.parse_locales("pt-BR", ["pt-PT", "en-US"])
    assert massive.parse_locales("deu,ja", ["de-DE", "en-US", "ja-JP"]) == ["de-DE", "ja-JP"]
    with pytest.raises(ConfigError, match="en-US is the pivot"):
        massive.parse_locales("de,en", ["de-DE", "en-US", "ja-JP"])
    res = tatoeba.evaluate_tatoeba(lambda s: np.eye(len(s), 8, dtype=np.float32), data_dir, ["de"],
                                   max_pairs=5)
    assert list(res["per_lang"]) == ["deu"]
    out = tmp_path / "x.json"
    refused(xm("bench", "mining", "--langs", "deu,de", "--out", out), "deu and de name one language (de)")
    refused(xm("bench", "tatoeba", "--langs", "de,deu", "--out", out), "de and deu name one language (deu)")
    refused(xm("bench", "mining", "--langs", "deu,xx", "--out", out), "unknown language(s) xx")
    refused(xm("bench", "massive-templates", "--locales", "de,de-DE", "--out", out), "de and de-DE name one language")
    refused(xm("bench", "geometry", "--langs", "de,deu", "--out", out), "--langs names deu_Latn twice")
    assert not out.exists()


def test_quiet_bench_shows_no_progress_bar(tmp_path):
    """`bench TASK -q` as `mine -q` (was: no -q on bench: a bar per variant and language in logs)."""
    # a prompt of its own (the embedding cache is keyed by it): its sentences are encoded, not read from the cache
    prompt = f"quiet {uuid.uuid4().hex[:12]}: "
    args = ["bench", "tatoeba", "--langs", "deu", "--max-pairs", "20", "--projection", "none", "--prompt", prompt]
    res = CliRunner().invoke(_cli(), [*args, "-q", "--out", str(tmp_path / "q.json")])
    assert res.exit_code == 0, res.output
    assert "sent/s" not in res.stderr and "raw" in res.stdout, res.stderr
    res = CliRunner().invoke(_cli(), [*args[:-1], prompt + "again: ", "--out", str(tmp_path / "bars.json")])
    assert res.exit_code == 0 and "sent/s" in res.stderr, res.stderr  # (the same run, bars on: they show)


def test_report_says_what_a_result_recorded_of_its_making(tmp_path):
    """A result with no provenance (an old lab script's) reads "no commit or date recorded", not
    "commit `None`"; one run outside a git checkout says so; no "Parameters:" line when none were
    recorded (was an empty one)."""
    from xmine.benchmarks import report

    table = {"columns": ["measure", "value"], "rows": [["a", 1.0]]}
    results = {"old.json": {"task": "langid", "table": table},
               "nogit.json": {"task": "langid", "table": table,
                              "provenance": {"git_commit": None, "date": "2026-12-05", "parameters": {"task": "x"}}},
               "full.json": {"task": "langid", "table": table,
                             "provenance": {"git_commit": "abc", "date": "2026-12-05", "parameters": {"rows": 3}},
                             "machine": {"cpu": "Xeon 9", "cores": 16, "ram_gb": 125.8, "gpu": "NVIDIA H200"}}}
    for name, res in results.items():
        (tmp_path / name).write_text(json.dumps({"kind": "xmine-benchmark-result", "format_version": 1} | res))
    md = report.write_report(tmp_path, tmp_path / "RESULTS.md").read_text()
    assert "*old.json*; no commit or date recorded" in md and "`None`" not in md
    assert "*nogit.json*; commit `unknown: not run from a git checkout`; 2026-12-05" in md
    # each result on the machine it records (a helper: every one under the report's own machine)
    assert "*full.json*; commit `abc`; 2026-12-05; on NVIDIA H200, Xeon 9, 16 logical cores, 125.8 GB RAM\n\n" \
           "Parameters: rows=3" in md
    assert "*old.json*; no commit or date recorded (the lab script wrote none then); machine not recorded" in md
    # a GPU check's GPU beside its machine, an older speed result's CPU in its environment
    (tmp_path / "gpu.json").write_text(json.dumps({"kind": "xmine-benchmark-result", "format_version": 1,
                                                   "task": "langid", "table": table, "gpu": "NVIDIA H200",
                                                   "machine": {"cpu": "Xeon 9", "cores": 16}}))
    (tmp_path / "speed.json").write_text(json.dumps({"kind": "xmine-benchmark-result", "format_version": 1,
                                                     "task": "langid", "table": table,
                                                     "environment": {"cpu_model": "AMD EPYC"}}))
    md = report.write_report(tmp_path, tmp_path / "R2.md").read_text()
    assert "*gpu.json*; no commit or date recorded (the lab script wrote none then); on NVIDIA H200, Xeon 9, 16 " \
           "logical cores" in md and "*speed.json*; no commit or date recorded (the lab script wrote none then); " \
           "on AMD EPYC\n" in md
    assert md.count("Parameters:") == 1


def test_a_damaged_projection_is_refused_before_a_benchmark_reads_or_builds_its_data(tmp_path):
    """(was: `bench mining --projection P` with P's config.json edited built its mining sets, then refused P)"""
    import shutil

    from tests.clitools import refused, xm
    from xmine.encoders.projection import shipped_dir

    proj = tmp_path / "proj"
    shutil.copytree(shipped_dir("me5-small"), proj)
    config = proj / "config.json"
    config.write_text(config.read_text(encoding="utf-8").replace('"method"', '"method" ', 1), encoding="utf-8")
    res = xm("bench", "mining", "--quick", "--projection", proj, "--sets-dir", tmp_path / "sets", "--out",
             tmp_path / "m.json")
    refused(res, "config.json")
    assert "mining sets in" not in res.output and not (tmp_path / "sets").exists() and not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("command", [["bench", "tatoeba", "--langs", "deu"], ["bench", "massive", "--locales", "de-DE"],
                                     ["bench", "bucc", "--pair", "de-en"], ["plot", "--src-lang", "deu_Latn"]])
def test_an_output_inside_the_data_folder_found_by_default_is_refused(command, tmp_path, monkeypatch):
    """The data folder is an input whether given (--data-dir) or found ($XMINE_DATA, ../shared/data)
    (was: `--out $XMINE_DATA/tatoeba/v1/x.json` written into the data set, exit 0)."""
    data = tmp_path / "data"
    (data / "tatoeba" / "v1").mkdir(parents=True)
    (data / "tatoeba" / "v1" / "tatoeba.deu-eng.deu").write_text("Hallo.\n", encoding="utf-8")
    (data / "parallel" / "flores200" / "devtest").mkdir(parents=True)
    for lang in ("deu_Latn", "eng_Latn"):
        (data / "parallel" / "flores200" / "devtest" / f"{lang}.devtest").write_text("Hallo.\n", encoding="utf-8")
    before = tree(data)
    monkeypatch.setenv("XMINE_DATA", str(data))
    out = data / "tatoeba" / "v1" / ("x.png" if command[0] == "plot" else "x.json")
    refused(xm(*command, "--out", out), f"{out}: lies inside the input {data}")
    assert tree(data) == before
