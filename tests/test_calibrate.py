"""A projection's calibrated default threshold: how it is chosen, on which data, and how `mine` uses it."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from xmine.benchmarks import mining
from xmine.benchmarks.bucc import best_threshold
from xmine.errors import ArtefactError, DamagedManifestError, InputError
from xmine.encoders.projection import projection_defaults

from flores import flores_lines
from labscripts import lab_module

calibrate = lab_module("calibrate")


def _runs(seed: int, n_sets: int = 3):
    rng = np.random.default_rng(seed)
    runs = []
    for i in range(n_sets):
        n = 300 + 50 * i
        correct = rng.random(n) < 0.2
        # true pairs score higher on average, with a set-dependent offset: the sets disagree
        scores = np.round(rng.normal(1.0 + 0.01 * i, 0.03, n) + 0.06 * correct, 4)
        runs.append((scores, correct, int(correct.sum()) + 5))  # 5 gold pairs never mined
    return runs


def test_one_set_agrees_with_bucc_sweep():
    s, c, g = _runs(0, 1)[0]
    t, f1 = calibrate.best_common_threshold([(s, c, g)])
    bt, best = best_threshold(s, c, g)
    assert t == bt and f1 == pytest.approx(best["f1"])


def test_common_threshold_maximises_mean_f1_over_sets():
    runs = _runs(1)
    t, f1 = calibrate.best_common_threshold(runs)
    grid = np.unique(np.concatenate([r[0] for r in runs]))

    def brute(th):  # F1 of keeping scores >= th, by counting
        out = []
        for s, c, g in runs:
            kept = s >= th
            tp = int((kept & c).sum())
            p, r = tp / max(kept.sum(), 1), tp / g
            out.append(2 * p * r / (p + r) if p + r else 0.0)
        return float(np.mean(out))

    scores = [brute(th) for th in grid]
    assert f1 == pytest.approx(max(scores)) and brute(t) == pytest.approx(f1)
    # no single set's own best threshold is what the sets need together
    assert any(best_threshold(*r)[0] != t for r in runs)


def test_calibration_sets_are_disjoint_from_the_benchmarks(data_dir):
    """No sentence of a calibration set is in a `bench mining` set or the FLORES-200 devtest."""
    bench_text = set()
    for lang in mining.DEFAULT_LANGS:
        ms = mining.build_set(data_dir, lang)
        bench_text.update(ms.src[1], ms.en[1])
    bench_text.update(line.strip() for line in flores_lines(data_dir, "eng_Latn"))
    for lang in calibrate.CALIBRATION_SETS:
        ms = calibrate.build_calibration_set(data_dir, lang)
        assert len(ms.gold) >= 50 and ms.counts["gold_share_src"] < 0.1, (lang, ms.counts)
        assert not (set(ms.src[1]) | set(ms.en[1])) & bench_text, lang
        assert all("2019" not in str(f) and "2020" not in str(f) and "2021" not in str(f) for f in ms.files)


def test_projection_defaults_are_read_and_checked(tmp_path):
    from xmine.disentangle.projection import write_projection_manifest
    from xmine.encoders.projection import SHIPPED_ROOT

    proj = tmp_path / "p"
    shutil.copytree(SHIPPED_ROOT / "me5-small", proj)
    (proj / "SHIPPED.json").unlink()

    def shipped(info):  # SHIPPED.json written and recorded in the manifest, as the shipping step does
        (proj / "SHIPPED.json").write_text(json.dumps(info))
        write_projection_manifest(proj, json.loads((proj / "config.json").read_text()))

    assert projection_defaults(proj) is None  # no SHIPPED.json: not calibrated
    shipped({"default_thresholds": {"ratio": 1.071}})
    found = projection_defaults(proj)
    assert found.threshold("ratio", "balanced") == 1.071 and str(proj) in found.source
    assert found.threshold("distance", "balanced") is None
    shipped({"default_thresholds": {"ratio": "high"}})
    with pytest.raises(InputError, match="default_thresholds.ratio"):
        projection_defaults(proj)
    (proj / "SHIPPED.json").write_text(json.dumps({"default_thresholds": {"ratio": 1.5}}))  # edited, not recorded
    with pytest.raises(ArtefactError, match="SHIPPED.json: .* the manifest of the projection"):
        projection_defaults(proj)


def _mining_result(path, raw_f1, default_f1, weights_id="abc", default_threshold=None):
    """A `bench mining` result, written as `write_result` writes one (sealed with its checksum)."""
    from xmine.artefacts.fileio import atomic_write_manifest
    from xmine.benchmarks.common import RESULT_KIND

    def lang(f1, t):
        return {"best": {"f1": f1, "threshold": t}, "default": {"f1": f1, "threshold": t}}

    res = {"kind": RESULT_KIND, "task": "mining", "projections": {"default": {"id": weights_id}},
           "details": {"raw": {"per_lang": {lg: lang(f, 1.04) for lg, f in raw_f1.items()}},
                       "default:meaning": {"per_lang": {lg: lang(f, 1.02) for lg, f in default_f1.items()}}}}
    if default_threshold is not None:
        res["details"]["default:meaning"]["default_threshold"] = {"value": default_threshold}
    atomic_write_manifest(path, res)
    return path


def test_gate_compares_the_average_with_raw_and_refuses_other_weights(tmp_path):
    gate_failures = lab_module("ship_projection").gate_failures

    ok = _mining_result(tmp_path / "ok.json", {"de": 0.8, "ru": 0.9}, {"de": 0.8, "ru": 0.95})
    assert gate_failures([ok], "abc") == []
    # one language below raw, the average above: at least raw on the average (issue 39)
    mixed = _mining_result(tmp_path / "mixed.json", {"de": 0.8, "ru": 0.9}, {"de": 0.85, "ru": 0.899})
    assert gate_failures([mixed], "abc") == []
    bad = _mining_result(tmp_path / "bad.json", {"de": 0.8, "ru": 0.9}, {"de": 0.79, "ru": 0.9})
    failures = gate_failures([bad], "abc")
    assert len(failures) == 2 and all(f.startswith("bench mining average F1") for f in failures)
    with pytest.raises(SystemExit, match="not this one"):
        gate_failures([ok], "other")


def test_the_gate_refuses_a_result_edited_after_it_was_written(tmp_path):
    """The gate reads what `bench mining` wrote, checked: a projection below raw does not pass
    because someone raised its F1 in the result file (valid JSON, every field in place)."""
    gate_failures = lab_module("ship_projection").gate_failures

    bad = _mining_result(tmp_path / "bad.json", {"de": 0.8, "ru": 0.9}, {"de": 0.79, "ru": 0.9})
    assert len(gate_failures([bad], "abc")) == 2
    bad.write_text(bad.read_text().replace("0.79", "0.99"))
    with pytest.raises(DamagedManifestError, match=f"{bad}: content differs from the checksum it was written with.*"
                                                   "run the benchmark that wrote it again"):
        gate_failures([bad], "abc")
    unsealed = _mining_result(tmp_path / "old.json", {"de": 0.8}, {"de": 0.9})  # written before results were sealed
    record = json.loads(unsealed.read_text())
    del record["manifest_sha256"]
    unsealed.write_text(json.dumps(record))
    assert gate_failures([unsealed], "abc") == []
    (tmp_path / "other.json").write_text(json.dumps({"kind": "xmine-projection", "task": "mining"}))
    with pytest.raises(ArtefactError, match="other.json: records kind 'xmine-projection', not that of a result"):
        gate_failures([tmp_path / "other.json"], "abc")


def test_rules_against_brute_force():
    """Every rule's threshold, recomputed by counting on the 3-decimal grid."""
    runs = dict(zip("abc", _runs(2)))
    ref = dict(zip("abc", _runs(3)))
    rules = calibrate.rule_thresholds(runs, ref, reference_threshold=1.04)
    assert set(rules) == set(calibrate.RULES)
    grid = np.round(np.arange(900, 1200) / 1000, 3)

    def prf(run, th):
        s, c, g = run
        kept = s >= th
        tp = int((kept & c).sum())
        p, r = (tp / kept.sum() if kept.sum() else 0.0), tp / g
        return p, (2 * p * r / (p + r) if p + r else 0.0)

    f1 = np.array([[prf(runs[k], t)[1] for t in grid] for k in runs])
    base = np.array([prf(ref[k], 1.04)[1] for k in runs])
    gain = (f1 - base[:, None]).min(axis=0)
    best = [t for t, g_, m in zip(grid, gain, f1.mean(axis=0)) if g_ == gain.max()]
    top = max(f1.mean(axis=0)[list(grid).index(t)] for t in best)
    assert rules["worst_gain_vs_raw"] == min(t for t in best if f1.mean(axis=0)[list(grid).index(t)] == top)
    assert rules["worst_f1"] == grid[int(np.argmax(f1.min(axis=0)))]
    ref_p = np.mean([prf(ref[k], 1.04)[0] for k in runs])
    mean_p = np.array([np.mean([prf(runs[k], t)[0] for k in runs]) for t in grid])
    assert rules["raw_precision"] == grid[int(np.argmax(mean_p >= ref_p))]
    assert rules["mean_f1"] == round(calibrate.best_common_threshold(list(runs.values()))[0], 3)
    # the rules disagree on these sets: which one is used matters
    assert len(set(rules.values())) > 1
    assert calibrate.rule_of("projection", "ratio", True) == "worst_gain_vs_raw"
    assert calibrate.rule_of("raw", "ratio", True) == calibrate.rule_of("projection", "distance", True) == "mean_f1"


def test_gate_refuses_a_mining_result_at_another_threshold(tmp_path):
    gate_failures = lab_module("ship_projection").gate_failures

    ok = _mining_result(tmp_path / "ok.json", {"de": 0.8}, {"de": 0.9}, default_threshold=1.025)
    assert gate_failures([ok], "abc") == [] and gate_failures([ok], "abc", 1.025) == []
    failures = gate_failures([ok], "abc", 1.029)
    assert len(failures) == 1 and "1.025" in failures[0] and "1.029" in failures[0]
