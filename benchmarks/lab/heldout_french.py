"""`heldout-french`: the mining defaults on data nothing in the project reads: WMT newstest fr-en.

    .venv/bin/python benchmarks/lab/run.py heldout-french      # -> benchmarks/results/heldout-french.json

The defaults are chosen leave one family out on the calibration sets (`calibrate-defaults`,
`threshold-rules`), and `bench mining` draws on the same sources (FLORES-200 devtest, newstest),
so neither is data the calibration never read (`calibrate-defaults overlap`). French is in no
calibration family, no `bench` set, and no projection training file from newstest (the projection's
French is Tatoeba's): newstest 2014 and newsdiscusstest 2015, fr-en and en-fr, are read here only. Each pair is kept
only where its English is in no other newstest file (the multi-way years share their English with
the calibrated languages and with the projection's training pairs) and in no calibration set, and its
French in no other newstest file. Two BUCC-style sets are built from all the kept pairs (seeded),
as the calibration builds its sets: a share of the pairs gold (both sides kept), the rest
alternately French-only and English-only distractors, so no unlisted translation is left; the two
differ in density (12% and 25% of a side has its translation: the 1,644 pairs that pass the
filters give at least 100 gold pairs a set only so), not in their sentences.

Each set is mined as `bench mining` mines (`bench mining`'s `evaluate_set`: exact, k = 4, max
retrieval, unique sentences, rows rounded as `mine`'s store keeps them) in each space xmine ships,
at the default `xmine mine` keeps it at (the space's margin and rule, `variant_threshold`), and for
raw use-m3 also at the ratio margin's rule it had before. Reported per set: F1 at the set's best
threshold, at the default, the gap, and precision and recall at the default.
"""

from __future__ import annotations

import time
from pathlib import Path

import click
import numpy as np

from calibrate_defaults import DATA, WORK, _encoder, _projection, _sets
from calibration_sets import NEWSTEST, _clean_pairs, _lines, _rng, compose, source_files

#: the newstest folders read here (and nowhere else)
FRENCH = (("2014", "fr-en"), ("2014", "en-fr"), ("2015", "fr-en"), ("2015", "en-fr"))
#: (name, share of a side that has its translation on the other side)
SETS = (("fr-12", 0.12), ("fr-25", 0.25))


def french_pairs(data: Path) -> list[tuple[str, str]]:
    """The (fr, en) pairs of the FRENCH folders whose English is in no other newstest file and no
    calibration set, and whose French is in no other newstest file."""
    root = data / NEWSTEST
    read_here = {root / y / d for y, d in FRENCH}
    pairs = _clean_pairs(p for folder in sorted(read_here) for f in sorted(folder.glob("*.fr"))
                         for p in zip(_lines(f), _lines(f.with_suffix(".en"))))
    others = [f for f in sorted(root.rglob("*"))
              if f.is_file() and f.parent not in read_here and f.suffix in (".en", ".fr")]
    english = {" ".join(s.split()) for f in others if f.suffix == ".en" for s in _lines(f)}
    french = {" ".join(s.split()) for f in others if f.suffix == ".fr" for s in _lines(f)}
    for st in _sets():
        english.update(st.en)
        english.update(st.xx)
    return [(fr, en) for fr, en in pairs if en not in english and fr not in french]


def build(data: Path, folder: Path) -> dict:
    """The two sets in BUCC's format under `folder` (`{name}-en/`), composed as the calibration
    composes its sets (`calibration_sets.compose`); their counts."""
    from xmine.benchmarks.mining import MiningSet, write_set

    pairs = french_pairs(data)
    counts = {"pairs": len(pairs), "sets": {}}
    for name, share in SETS:
        # every pair of the pool in each set (the two sets differ in their density, not their
        # sentences): G gold, the rest alternately French-only and English-only, so that a
        # side's share of gold, G / (G + (n - G) / 2), is `share`
        order = _rng(0, "heldout-french", name).permutation(len(pairs))
        n_gold = int(round(share * len(pairs) / (2 - share)))
        rest = [pairs[i] for i in order[n_gold:]]
        st = compose(name, "heldout", "fr", gold=[pairs[i] for i in order[:n_gold]],
                     xx_distractors=[fr for fr, _ in rest[0::2]], en_distractors=[en for _, en in rest[1::2]],
                     aligned=pairs, xx_size=len(pairs), en_size=len(pairs))
        fr_ids = [f"{name}-fr-{i:06d}" for i in range(len(st.xx))]
        en_ids = [f"{name}-en-{i:06d}" for i in range(len(st.en))]
        write_set(MiningSet(lang=name, src=(fr_ids, st.xx), en=(en_ids, st.en),
                            gold=[(fr_ids[a], en_ids[b]) for a, b in st.gold], counts={}, files=[]), folder)
        counts["sets"][name] = {"fr": len(st.xx), "en": len(st.en), "gold": len(st.gold), "dropped": st.dropped}
    return counts


@click.command("heldout-french")
def command():
    """The mining defaults of every space on newstest fr-en, which nothing else in the project reads."""
    from xmine.benchmarks.common import RawEmbedder, Variant, projected, results_dir, write_result
    from xmine.benchmarks.mining import evaluate_set, set_files, variant_threshold

    started = time.monotonic()
    folder = WORK / "heldout-french"
    counts = build(DATA, folder)
    click.echo(f"sets in {folder}: {counts}")
    rows, details = [], {"counts": counts, "spaces": {}}
    for encoder_name, projection, margins in (("me5-small", "default", (None,)), ("me5-small", None, (None,)),
                                              ("use-m3", None, (None, "ratio"))):
        enc = _encoder(encoder_name)
        raw = RawEmbedder(enc)
        if projection:
            proj = _projection(enc)
            variant = Variant("default", "meaning", projected(raw, proj, "meaning"), proj.fingerprint())
            space = "projection"
        else:
            variant, space = Variant("raw", "raw", raw), f"raw {encoder_name}"
        for margin in margins:
            record = variant_threshold(variant, None, margin=margin, encoder_name=encoder_name)
            label = f"{space} ({record['margin']}{', the default' if margin is None else ''})"
            per = {}
            for name, _ in SETS:
                r = evaluate_set(variant.embed, set_files(folder, name), threshold=record)
                per[name] = r
                rows.append([space, record["margin"], "default" if margin is None else "given", name,
                             r["sizes"]["src"], r["sizes"]["en"], r["sizes"]["gold"], round(100 * r["best"]["f1"], 1),
                             round(100 * r["default"]["f1"], 1), round(100 * r["gap"], 1),
                             round(100 * r["default"]["precision"], 1), round(100 * r["default"]["recall"], 1)])
                click.echo(f"{label:<40} {name}: best {r['best']['f1']:.3f} default {r['default']['f1']:.3f} "
                           f"gap {r['gap']:.3f} P {r['default']['precision']:.3f} R {r['default']['recall']:.3f} "
                           f"(threshold {r['default']['threshold']:.5g})")
            details["spaces"][label] = per
    out = results_dir() / "heldout-french.json"
    enc = _encoder("me5-small")
    write_result(out, task="heldout_french", encoder=enc, variants=[Variant("raw", "raw", RawEmbedder(enc))],
                 data_files=[f for f in source_files(DATA) if "wmt-newstest" in str(f)],
                 parameters={"command": "python benchmarks/lab/run.py heldout-french", "sets": dict(SETS)},
                 columns=["space", "margin", "threshold", "set", "fr", "en", "gold", "F1 best", "F1 default", "gap",
                          "P default", "R default"],
                 rows=rows, details=details, seconds=time.monotonic() - started)
    click.echo(f"-> {out}")
