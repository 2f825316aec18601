"""The lab's bound on any threshold rule (`threshold-rules oracle`) against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from labscripts import lab_module


@pytest.mark.parametrize("seed", range(8))
def test_oracle_bound_brackets_the_brute_force_optimum(seed):
    tr = lab_module("threshold_rules")
    rng = np.random.default_rng(seed)
    runs, family = {}, {}
    for i, fam in enumerate(("news", "news", "wiki", "short", "templated")):
        n = int(rng.integers(3, 6))
        correct = rng.random(n) < 0.6
        correct[int(rng.integers(0, n))] = True  # every set has a translation
        runs[f"s{i}"] = {"max": tr.Run(np.sort(rng.random(n))[::-1], correct,
                                       n_gold=int(correct.sum()) + int(rng.integers(0, 2)))}
        family[f"s{i}"] = fam

    # every way of keeping 1..all candidates of each set: (mean gap, mean precision over news/wiki/short)
    names = list(runs)
    choices = []
    for kept in itertools.product(*(range(1, len(runs[n]["max"].s) + 1) for n in names)):
        rows = tr.oracle_rows(runs, family, dict(zip(names, kept)))
        choices.append((100 * float(np.mean([r["gap"] for r in rows])),
                        tr._fam_mean(rows, "precision", ["news", "wiki", "short"])))
    at_best = max(p for g, p in choices if g < 1e-9)
    # a floor between the precision at each set's best and the most precise choice: it binds
    floor = float(rng.uniform(at_best, max(p for _, p in choices)))
    optimum = min(g for g, p in choices if p >= floor)

    res = tr.oracle_bound(runs, family, floor)
    assert res["lower_bound"] <= optimum + 1e-9
    assert res["achieved"]["precision_families"] >= 100 * floor - 1e-9
    assert optimum - 1e-9 <= res["achieved"]["gap"]
    assert res["at_each_best"]["gap"] == pytest.approx(0, abs=1e-9)
