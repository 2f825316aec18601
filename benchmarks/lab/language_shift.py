"""`language-shift`: would the default keep more of a poorly known language's pairs if it moved down
with the language's FLORES-200 threshold? Chosen on `heldout-short`, reported on the other checks.

    .venv/bin/python benchmarks/lab/run.py language-shift short      # -> benchmarks/results/language-shift.json
    .venv/bin/python benchmarks/lab/run.py language-shift long-text  # -> benchmarks/results/language-shift-long.json

Needs the sets of `heldout-short`, `heldout-news` and `heldout-wiki` (run those first). The held-out
checks show the defaults missing, on the safe side, the languages whose FLORES-200 threshold (each
shipped space's `languages`, `calibrate-defaults languages`) lies low. The rule looked at here moves
the threshold the shipped rule gives a run (`t_rule`, after its share term) down by the language's
distance below a reference, never up:

    t = t_rule + lam * min(0, r_lang - c)

with `r_lang` the language's FLORES-200 ratio threshold in the space, and `c` either the lowest of
the calibration languages' (`lo`: only languages below the range the calibration saw move, so the
calibration sets do not) or their median (`median`). (c, lam) is chosen on the `heldout-short`
sets (16 languages, most low-resource, 32 sets): the smallest mean gap to each set's best F1 whose
mean precision is at least PRECISION_FLOOR, or where the shipped rule is already below that, at
least the shipped rule's (a shift may not buy its recall with precision the default is held to).
It is reported on `heldout-news` (22 sets) and `heldout-wiki` (4 sets), which the choice does not
read. Each set is mined once (exact, k = 4, max retrieval, ratio margin, as `bench mining`) and
every threshold is applied to the same candidates; the shipped rule's F1 is checked against the
check's own result. Both me5-small spaces.

`long-text`: the same shift (median reference) only where the run's sentences are long (the larger
of its two sides' median lengths at least LONG_TEXT_CHARS), so short and templated corpora keep the
shipped rule, with lam chosen on the calibration's news family (each set at the rule chosen without
that family, threshold-rules.json) under the same floor, and reported on `heldout-news` and
`heldout-wiki` (the calibration's wiki family, FLORES-200 devtest, is the text the language values
are read on: shown, not chosen on).
"""

from __future__ import annotations

import time

import click
import numpy as np

from calibrate_defaults import PRECISION_FLOOR, _encoder
from heldout_news import check_candidates, median_chars, stats
from threshold_rules import CHECK_SPACES
from xmine.benchmarks.common import read_result, results_dir

ROOT_RESULTS = results_dir()

#: the checks, the one the shift is chosen on first
CHECKS = ("heldout-short", "heldout-news", "heldout-wiki")
CHOOSE_ON = "heldout-short"
LAMBDAS = tuple(np.round(np.arange(0, 3.01, 0.25), 2))
REFERENCES = ("lo", "median")


def evaluate(sets: list[dict], values: dict, c: float, lam: float) -> dict:
    """Mean gap, worst, sets > 8, P, R (x100) over `sets` (each a study `Run`, its rule's threshold and
    language) at t_rule + lam * min(0, r_lang - c), r_lang the language's ratio threshold in `values`
    (no shift where a set's language is None or has no value)."""
    from xmine.calibration import language_threshold

    rows = []
    for s in sets:
        found = language_threshold(values, s["lang"], "ratio")
        t = s["t_rule"] + lam * min(0.0, (found[1] - c) if found is not None else 0.0)
        p, rec, f1, _ = s["run"].at(float(np.float32(t)))  # as `xmine mine` compares
        rows.append({"gap": s["run"].best - f1, "precision": p, "recall": rec})
    return stats(rows)


@click.group("language-shift")
def command() -> None:
    """A down-only shift of the default by the language's FLORES-200 threshold (module doc)."""


@command.command("short")
def short_command():
    """The shift chosen on heldout-short, reported on heldout-news and heldout-wiki."""
    from xmine.benchmarks.common import RawEmbedder, Variant, write_result

    started = time.monotonic()
    shipped = read_result(ROOT_RESULTS / "language-thresholds.json")["details"]["spaces"]
    rows, details = [], {"choose_on": CHOOSE_ON, "lambdas": list(map(float, LAMBDAS)), "spaces": {}}
    for key in ("projection", "raw-me5-small"):  # the me5-small spaces
        space = CHECK_SPACES[key]
        values = shipped[key]["values"]
        calib = [values[c]["ratio"] for c in shipped[key]["calibration_languages"]]
        refs = {"lo": min(calib), "median": float(np.median(calib))}
        sets = {check: check_candidates(check, space) for check in CHECKS}
        grid = {ref: {float(lam): {check: evaluate(sets[check], values, refs[ref], lam) for check in CHECKS}
                      for lam in LAMBDAS} for ref in REFERENCES}
        base = grid["lo"][0.0][CHOOSE_ON]
        floor = min(100 * PRECISION_FLOOR, base["precision"])
        ok = [(ref, lam) for ref in REFERENCES for lam in grid[ref]
              if grid[ref][lam][CHOOSE_ON]["precision"] >= floor]
        ref, lam = min(ok, key=lambda rl: (grid[rl[0]][rl[1]][CHOOSE_ON]["mean_gap"], rl[1]))
        details["spaces"][space] = {"references": refs, "precision_floor": floor, "chosen": {"reference": ref,
                                    "lambda": lam}, "grid": grid}
        for r in REFERENCES:
            for lm in LAMBDAS:
                for check in CHECKS:
                    e = grid[r][float(lm)][check]
                    rows.append([space, r, float(lm), check, e["mean_gap"], e["worst_gap"], e["over_8"],
                                 e["precision"], e["recall"], "chosen" if (r, float(lm)) == (ref, lam) else ""])
        click.echo(f"{space}: refs {refs}, floor {floor}, chosen {ref} lam {lam}")
        for check in CHECKS:
            click.echo(f"  {check:<14} shipped rule {grid['lo'][0.0][check]}  chosen {grid[ref][lam][check]}")
    enc = _encoder("me5-small")
    out = ROOT_RESULTS / "language-shift.json"
    write_result(out, task="language_shift", encoder=enc, variants=[Variant("raw", "raw", RawEmbedder(enc))],
                 data_files=[], parameters={"command": "python benchmarks/lab/run.py language-shift short",
                                            "choose_on": CHOOSE_ON, "checks": list(CHECKS)},
                 columns=["space", "reference", "lambda", "check", "mean gap", "worst", "sets > 8", "P", "R",
                          "chosen"], rows=rows, details=details, seconds=time.monotonic() - started)
    click.echo(f"-> {out}")


#: the gate of `long-text`: the shift applies where a side's median sentence is at least this long
#: (characters; the larger of the two sides' medians). The calibration's families fall on either
#: side of it with room: short and templated 27-37, news and wiki 102-156; the value is their
#: geometric middle, sqrt(37 * 102) = 61, rounded (no gold read).
LONG_TEXT_CHARS = 60


def _gated(sets: list[dict]) -> list[dict]:
    """`sets` with the shift off (language None) where the text is short."""
    return [s if s["chars"] >= LONG_TEXT_CHARS else s | {"lang": None} for s in sets]


@command.command("long-text")
def long_text_command():
    """The shift gated on long sentences, chosen on the calibration's news family (the rule held out
    of it), reported on heldout-news, heldout-wiki and heldout-short."""
    from calibrate_defaults import _sets
    from threshold_rules import SHIPPED_RULE, mutual_null_share, product_rule, space_runs
    from xmine.benchmarks.common import RawEmbedder, Variant, write_result
    from xmine.mining.threshold_rule import rule_threshold

    started = time.monotonic()
    shipped = read_result(ROOT_RESULTS / "language-thresholds.json")["details"]["spaces"]
    study = read_result(ROOT_RESULTS / "threshold-rules.json")["details"]["spaces"]
    studysets = _sets()
    meta = [dict(name=st.name, **st.counts) for st in studysets]
    chars = {st.name: median_chars(st.xx, st.en) for st in studysets}
    rows, details = [], {"long_text_chars": LONG_TEXT_CHARS, "lambdas": list(map(float, LAMBDAS)), "spaces": {},
                         "lengths": {}}
    for key in ("projection", "raw-me5-small"):  # the me5-small spaces
        space = CHECK_SPACES[key]
        values = shipped[key]["values"]
        c = float(np.median([values[code]["ratio"] for code in shipped[key]["calibration_languages"]]))
        # the calibration's families, each at the rule chosen without it (threshold-rules.json)
        smeta, runs, family = space_runs(key, meta)
        held = study[key]["rules"][SHIPPED_RULE]["held_out"]
        iso = {m["name"]: m["iso"] for m in smeta}
        families = {}
        for fam, h in held.items():
            rule = product_rule(h["params"], h["params"]["t1"], "")
            families[f"calibration {fam}"] = _gated([
                {"set": n, "lang": iso[n], "run": runs[n]["max"], "chars": chars[n],
                 "t_rule": rule_threshold(rule, mutual_null_share(runs[n]))} for n in runs if family[n] == fam])
        for check in CHECKS:
            families[check] = _gated(check_candidates(check, space))
        for f, sets in families.items():
            details["lengths"].setdefault(f, {}).update({st["set"]: round(st["chars"], 1) for st in sets})
        grid = {float(lam): {f: evaluate(sets, values, c, lam) for f, sets in families.items()} for lam in LAMBDAS}
        choose_on = "calibration news"
        base = grid[0.0][choose_on]
        floor = min(100 * PRECISION_FLOOR, base["precision"])
        lam = min((lm for lm in grid if grid[lm][choose_on]["precision"] >= floor),
                  key=lambda lm: (grid[lm][choose_on]["mean_gap"], lm))
        details["spaces"][space] = {"reference": c, "precision_floor": floor, "chosen_lambda": lam,
                                    "shifted_sets": {f: sum(s["lang"] is not None for s in sets)
                                                     for f, sets in families.items()}, "grid": grid}
        click.echo(f"{space}: reference {c:.5f}, floor {floor}, chosen lam {lam}, sets the gate lets shift: "
                   f"{details['spaces'][space]['shifted_sets']}")
        for f in families:
            click.echo(f"  {f:<22} rule {grid[0.0][f]}  chosen {grid[lam][f]}")
            for lm in LAMBDAS:
                e = grid[float(lm)][f]
                rows.append([space, float(lm), f, e["mean_gap"], e["worst_gap"], e["over_8"], e["precision"],
                             e["recall"], "chosen" if float(lm) == lam else ""])
    enc = _encoder("me5-small")
    out = ROOT_RESULTS / "language-shift-long.json"
    write_result(out, task="language_shift_long", encoder=enc, variants=[Variant("raw", "raw", RawEmbedder(enc))],
                 data_files=[], parameters={"command": "python benchmarks/lab/run.py language-shift long-text",
                                            "long_text_chars": LONG_TEXT_CHARS, "choose_on": "calibration news"},
                 columns=["space", "lambda", "sets", "mean gap", "worst", "sets > 8", "P", "R", "chosen"],
                 rows=rows, details=details, seconds=time.monotonic() - started)
    click.echo(f"-> {out}")
