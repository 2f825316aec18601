"""How well `xmine langid` says "unknown" for languages a projection never saw, and how the
declared-language check of `xmine mine` behaves (`xmine.mining.langid.TrustRule`).

Two data families, so the rule's thresholds are chosen on one and reported on the other:
- choose: MASSIVE test utterances (`--massive-lines` per locale, 50 locales);
- report: FLORES-200 devtest (`--flores-lines` per language the projection knows,
  `--flores-unseen-lines` for each of the others; 204 files).
A file is in-set when its language (normalised: deu_Latn = de-DE = deu) is one of the
projection's. For every rule of the grid it measures: in-set lines labelled correctly, in-set
lines whose nearest language was right but that the rule calls unknown ("lost"), and out-of-set
lines called unknown ("caught"); and the declared-language check on whole files: correct
declarations warned about (false warnings), and English lines declared as each other trusted
language, and each trusted language declared as English (warnings that should fire). The rule
chosen on MASSIVE: the most "caught - lost" without a false warning. Also the AUC of the
nearest-centroid cosine (in-set above out-of-set), the score a threshold would have to use.
Raw embeddings come through the embedding cache (`xmine.encoders.embed_cache`).
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from types import SimpleNamespace

import click
import numpy as np

GRID_RECALL = (0.0, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
GRID_HELDOUT = (0, 10, 20, 50)


def _auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(a random pos scores above a random neg), ties counted half: the Mann-Whitney U over n_pos n_neg."""
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(pos, neg).statistic / (len(pos) * len(neg)))


def _families(data: Path, languages, args) -> dict[str, dict[str, list[str]]]:
    """{"massive": {file label: lines}, "flores": {...}}: the first lines of each file."""
    from xmine.benchmarks.common import FLORES_DEVTEST, flores_lines
    from xmine.langs import normalize_lang
    from xmine.disentangle.massive import available_locales, load_locale

    folder = data / "massive" / "data"
    massive = {}
    for loc in available_locales(folder):
        utts = load_locale(folder, loc, partition="test")
        massive[loc] = [utts[k] for k in sorted(utts)][:args.massive_lines]
    flores = {f.stem: flores_lines(f.parent, f.stem, rows=args.flores_lines if normalize_lang(f.stem) in languages
                                   else args.flores_unseen_lines)
              for f in sorted((data / FLORES_DEVTEST).glob("*.devtest"))}
    return {"massive": massive, "flores": flores}


def _measure(projection, family: dict[str, list[str]], embed, rule) -> dict:
    from xmine.mining.filter_step import check_declared
    from xmine.mining.langid import UNKNOWN, trust_table
    from xmine.mining.langid import identify_by_projection as identify
    from xmine.langs import normalize_lang

    table = trust_table(projection.config, projection.languages, rule)
    trusted = sorted(l for l, t in table.items() if t["trusted"])
    ins = {"lines": 0, "correct": 0, "nearest_correct": 0, "lost": 0}
    oos = {"lines": 0, "caught": 0}
    false_warnings, labels_of = [], {}
    for name, lines in family.items():
        truth = normalize_lang(name)
        labels, _, nearest = identify(projection, embed(lines), rule=rule)
        labels_of[truth] = labels_of.get(truth) or labels  # one file per language for the check
        lab, near = np.array(labels), np.array(nearest)
        if truth in table:
            ins["lines"] += len(lab)
            ins["correct"] += int((lab == truth).sum())
            ins["nearest_correct"] += int((near == truth).sum())
            ins["lost"] += int(((near == truth) & (lab == UNKNOWN)).sum())
            if check_declared(labels, truth, table)["status"] == "mismatch":
                false_warnings.append(name)
        else:
            oos["lines"] += len(lab)
            oos["caught"] += int((lab == UNKNOWN).sum())
    eng = labels_of.get("eng")
    swapped = [(labels_of[l], "eng") for l in trusted if l != "eng" and l in labels_of]
    swapped += [(eng, l) for l in trusted if l != "eng"] if eng else []
    fired = sum(check_declared(lab, d, table)["status"] == "mismatch" for lab, d in swapped)
    return {"rule": vars(rule), "trusted": trusted,
            "in_set": {**ins, "accuracy": ins["correct"] / max(ins["lines"], 1),
                       "nearest_accuracy": ins["nearest_correct"] / max(ins["lines"], 1),
                       "lost_share": ins["lost"] / max(ins["lines"], 1)},
            "out_of_set": {**oos, "caught_share": oos["caught"] / max(oos["lines"], 1)},
            "false_warnings": false_warnings, "swapped_declarations": len(swapped), "swapped_warned": fired}


def _cosine_auc(projection, family, embed) -> float:
    from xmine.langs import normalize_lang

    pos, neg = [], []
    for name, lines in family.items():
        _, score = projection.langid(embed(lines))
        (pos if normalize_lang(name) in projection.languages else neg).append(score)
    return _auc(np.concatenate(pos), np.concatenate(neg))


@click.command("langid-unknown")
@click.option("--projection", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Projection folder (default: the shipped me5-small one).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Data folder (default: $XMINE_DATA or ../shared/data).")
@click.option("--massive-lines", type=int, default=200, show_default=True, help="Lines per MASSIVE locale (choose).")
@click.option("--flores-lines", type=int, default=300, show_default=True,
              help="Lines per FLORES-200 language the projection knows (report).")
@click.option("--flores-unseen-lines", type=int, default=100, show_default=True,
              help="Lines per FLORES-200 language it does not know.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Result JSON (default: benchmarks/results/langid_unknown-<encoder>.json).")
def command(**kw) -> None:
    """How well langid says "unknown" for unseen languages, and the declared-language check of mine."""
    from measure import write_result_json
    from xmine.artefacts.directory import provenance
    from xmine.benchmarks.common import RawEmbedder, results_dir
    from xmine.mining.langid import TrustRule
    from xmine.disentangle.projection import load_projection
    from xmine.encoders import load_encoder
    from xmine.paths import default_data_dir
    from xmine.encoders.projection import SHIPPED_ROOT

    args = SimpleNamespace(**kw)
    args.projection = args.projection or SHIPPED_ROOT / "me5-small"
    t0 = time.time()
    projection = load_projection(args.projection)
    enc = load_encoder(projection.config["encoder"]["name"], precision=projection.config["encoder"].get("precision"))
    projection.check_encoder(enc.fingerprint())
    embed = RawEmbedder(enc, show_progress=False)
    data = args.data_dir or default_data_dir()
    families = _families(Path(data), projection.languages, args)
    grid = {}
    for fam, files in families.items():
        grid[fam] = [_measure(projection, files, embed, TrustRule(min_recall=r, min_heldout=h))
                     for r, h in itertools.product(GRID_RECALL, GRID_HELDOUT)]
    safe = [m for m in grid["massive"] if not m["false_warnings"]] or grid["massive"]
    best = max(safe, key=lambda m: m["out_of_set"]["caught_share"] - m["in_set"]["lost_share"])
    chosen = best["rule"]
    report = next(m for m in grid["flores"] if m["rule"] == chosen)
    result = {
        "task": "langid_unknown", "projection": projection.fingerprint(),
        "encoder": enc.fingerprint(), "chosen_on": "massive", "chosen_rule": chosen,
        "default_rule": vars(TrustRule()), "chosen": best, "reported": report,
        "cosine_auc": {fam: _cosine_auc(projection, files, embed) for fam, files in families.items()},
        "table": _table(grid, chosen), "grid": grid, "seconds": round(time.time() - t0, 1),
        "provenance": provenance(task="langid_unknown", **{k: str(v) for k, v in vars(args).items()}),
    }
    out = args.out or results_dir() / f"langid_unknown-{enc.name}.json"
    write_result_json(out, result)
    print(json.dumps({"chosen_rule": chosen, "massive": _short(best), "flores": _short(report),
                      "cosine_auc": result["cosine_auc"]}, indent=1))


def _table(grid: dict, chosen: dict) -> dict:
    """No rule (every line gets its nearest language) against the chosen rule, on both families."""
    rows = []
    for fam in ("massive", "flores"):
        for m in grid[fam]:
            r = m["rule"]
            if r == chosen or (r["min_recall"] == 0 and r["min_heldout"] == 0):
                rule = "nearest language" if r["min_recall"] == 0 and r["min_heldout"] == 0 else (
                    f"unknown unless recall >= {r['min_recall']:g} on >= {r['min_heldout']} lines")
                rows.append([fam + (" (chosen on)" if fam == "massive" else " (held out)"), rule, len(m["trusted"]),
                             round(100 * m["in_set"]["accuracy"], 1), round(100 * m["in_set"]["lost_share"], 1),
                             round(100 * m["out_of_set"]["caught_share"], 1), len(m["false_warnings"]),
                             f"{m['swapped_warned']}/{m['swapped_declarations']}"])
    return {"columns": ["data", "rule", "trusted labels", "in-set accuracy %", "in-set lost %",
                        "out-of-set caught %", "false warnings (files)", "swapped declarations warned"],
            "rows": rows}


def _short(m: dict) -> dict:
    return {"in_set_accuracy": round(m["in_set"]["accuracy"], 3), "nearest": round(m["in_set"]["nearest_accuracy"], 3),
            "lost": round(m["in_set"]["lost_share"], 3), "caught": round(m["out_of_set"]["caught_share"], 3),
            "false_warnings": m["false_warnings"],
            "swapped_warned": f"{m['swapped_warned']}/{m['swapped_declarations']}",
            "trusted": len(m["trusted"])}

