"""`xmine bench mining`: the mining benchmark's command (options, sets, tables); the sets and the
scoring live in benchmarks/mining.py, the noisy variant in benchmarks/mining_noisy.py."""

from __future__ import annotations

from pathlib import Path

import click

from xmine.benchmarks import common, mining, mining_noisy
from xmine.benchmarks.runner import current_encoder, evaluate_variants, finish, task_options
from xmine.langs import codes_among
from xmine.mining.cli_options import conflicts_as_usage_errors, margin_option
from xmine.mining.config import SelectionConfig
from xmine.mining.filters import PairFilterConfig
from xmine.options import SEED, Finite, GivenPath, comma_list


def _mining_langs(ctx, param, value):
    """--langs of `bench mining`, checked while parsing (before the result JSON is claimed)."""
    langs, unknown = codes_among(common.parse_list(comma_list(ctx, param, value)) or (), list(mining.NEWS_SETS))
    if unknown:
        raise click.BadParameter(f"unknown language(s) {', '.join(unknown)}; choose from {', '.join(mining.NEWS_SETS)}")
    return ",".join(langs) if value is not None else None  # `deu` is de


@click.command("mining")
@task_options
@click.option("--langs", default=None, callback=_mining_langs,
              help="Comma-separated languages paired with English, from: de,cs,ru,zh,ja,fi,kk,pl,lt,km,ha,is. "
                   "Default: de,cs,ru,zh,ja,fi,kk,pl,lt,km (--quick: de,zh,lt).")
@click.option("--gold-fraction", type=Finite(min=0.001, max=0.5), default=None,
              help="Share of each side's sentences that have a translation (default 0.08: >= 100 gold pairs "
                   "a set at the default sizes; BUCC's is 0.02-0.03). A set with fewer is warned about.")
@click.option("--max-news", type=click.IntRange(min=0), default=None,
              help="At most this many WMT newstest pairs per language (default 1500; --quick: 250).")
@click.option("--flores-rows", type=click.IntRange(min=10, max=1012), default=None,
              help="Draw only N of the 1,012 FLORES-200 devtest lines per language (seeded; --quick: 250).")
@margin_option(help="Score with this margin (as `xmine mine --margin`). Default: the margin `xmine mine` uses "
                    "in each variant's space (ratio; distance for raw use-m3), or ratio with --threshold.")
@click.option("--threshold", type=Finite(), default=None,
              help="The fixed threshold (on the scale of --margin, ratio unless given) reported beside the best "
                   "one, for every variant. Default: "
                   "each variant's own default, as `xmine mine` uses it: the balanced threshold calibrated for "
                   "its space (a projection's SHIPPED.json, raw embeddings' xmine/mining/calibration.json), "
                   "moved with each set by the space's rule as `xmine mine` moves it with each run.")
@click.option("--operating-point", type=click.Choice(["balanced", "precision"]), default=None,
              help="Which calibrated default each variant is scored at (as `xmine mine --operating-point`); "
                   "default balanced. Not with --threshold.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the set construction.")
@click.option("--sets-dir", type=GivenPath(file_okay=False), default=None,
              help="Write the sets (BUCC format) here. Default: $XMINE_HOME/bench-mining/<hash of data and settings>.")
@click.option("--noisy", is_flag=True,
              help="Add web-like noise to each set (copies of the other side, other-language lines, shared "
                   "boilerplate, number/URL lines, near-duplicates; benchmarks/mining_noisy.py) and report "
                   "precision and recall at the default threshold: clean, noisy, and noisy after the pair "
                   "filters of `xmine mine` (F1 of its default; all three in the result JSON), with what each "
                   "filter removed. Result: mining_noisy-<encoder>.json.")
def mining_cmd(data_dir, quick, langs, gold_fraction, max_news, flores_rows, margin, threshold, operating_point, seed,
               sets_dir, noisy):
    """BUCC-style mining F1 on sets built from FLORES-200 and WMT newstest (see benchmarks/mining.py).

    Per language, FLORES-200 devtest and newstest pairs of 2019-2021 (held out from training, not
    from the threshold calibration) are hidden among
    distractors of the same language and domain (8% of sentences have a translation), written in
    BUCC's format, mined (k=4, max retrieval, the margin `xmine mine` uses in the variant's space:
    ratio, distance for raw use-m3) and scored with `bench bucc`'s code:
    precision, recall and F1 at the best threshold and at each variant's default threshold (the one
    plain `xmine mine` keeps that set at: the calibrated rule of its space applied to the set's own
    candidates), and the gap between the two F1.
    """
    if threshold is not None and operating_point is not None:
        raise click.UsageError("give --threshold or --operating-point, not both")
    if noisy and sets_dir is not None:  # (was: read and dropped)
        raise click.UsageError("--sets-dir holds the clean sets; --noisy builds its own in memory: give one")
    with conflicts_as_usage_errors():  # a threshold of no margin's scale, before any set is built (was: after)
        SelectionConfig(margin=margin, threshold="default" if threshold is None else threshold)
    lang_list = common.parse_list(langs) or list(mining.QUICK_LANGS if quick else mining.DEFAULT_LANGS)
    settings = {"seed": seed, "gold_fraction": gold_fraction or mining.DEFAULT_GOLD_FRACTION,
                "max_news": max_news if max_news is not None else (mining.QUICK_MAX_NEWS if quick else mining.DEFAULT_MAX_NEWS),
                "flores_rows": flores_rows or (mining.QUICK_FLORES_ROWS if quick else None)}
    data = mining.locate(data_dir)
    if not noisy:
        folder, manifest = mining.build_sets(data, lang_list, sets_dir=Path(sets_dir) if sets_dir else None, **settings)
        click.echo(f"mining sets in {folder}", err=True)
        if note := mining.small_sets_note(manifest, lang_list):
            click.secho(f"xmine: warning: {note}", fg="yellow", err=True)

    def evaluate(v):
        record = mining.variant_threshold(v, threshold, margin=margin, encoder_name=current_encoder().name,
                                          point=operating_point)
        cap = record["score_max"]["value"]
        r = (mining_noisy.evaluate(v.embed, data, lang_list, threshold=record,
                                   filter_config=PairFilterConfig(score_max=cap, score_margin=record["margin"]),
                                   **settings) if noisy
             else mining.evaluate_mining(v.embed, folder, lang_list, threshold=record))
        return r | {"default_threshold": {k: record[k] for k in ("value", "source", "rule") if k in record},
                    "score_max": cap}

    details = evaluate_variants(evaluate, parts=("meaning",), add_default=True)
    if noisy:
        return _noisy_finish(details, data, lang_list, settings, margin, threshold, operating_point)
    click.echo("per variant and set: F1 at the set's best threshold, then F1, precision and recall at the threshold "
               "plain `xmine mine` keeps that set at (the rule of the variant's space applied to the set's own "
               "candidates, or its calibrated value; 'all': every pair kept) and the gap between the two F1")
    finish("mining", details | {"sets": manifest}, rows=mining.table_rows(details, lang_list),
           columns=mining.TABLE_COLUMNS,
           parameters=settings | {"langs": lang_list, "margin": margin, "threshold": threshold,
                                  "operating_point": operating_point, "sets_dir": str(folder)},
           files=[f["path"] for f in manifest["sources"]])


def _noisy_finish(details, data, lang_list, settings, margin, threshold, operating_point) -> None:
    columns, rows, extra = mining_noisy.tables(details)
    click.echo("averages over languages at each variant's default threshold: the clean sets (as is, after the "
               "pre-search cleaning, after --lang-filter and the cleaning), then the noisy sets without filters, "
               "with the pair filters only, with the cleaning and the filters (xmine mine's default), and with "
               "--lang-filter too")
    finish("mining_noisy", details, columns=columns, rows=rows, extra_tables=extra,
           parameters=settings | {"langs": lang_list, "margin": margin, "threshold": threshold,
                                  "operating_point": operating_point, "noise": mining_noisy.NOISE,
                                  "filters": PairFilterConfig().record("ratio"),
                                  "score_max": {name: r["score_max"] for name, r in details.items()}},
           files=mining_noisy.data_files(data, lang_list, settings))
    for t in extra:
        click.echo(t["title"])
        click.echo(common.format_table(t["columns"], t["rows"], digits=1))


command = mining_cmd

__all__ = ["command"]
