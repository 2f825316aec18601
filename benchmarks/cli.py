"""`xmine bench <task>` and `xmine plot`: reproduce the papers' numbers with one command.

Every `bench` task embeds its test data with one encoder (raw embeddings through the shared
cache, so a rerun or another projection encodes nothing again), evaluates the raw embeddings and
each projection's meaning (and, where it means something, language) part, prints a table and
writes a JSON result with full provenance. The logic lives in the task modules; this file only
parses options.
"""

from __future__ import annotations

import functools
import importlib
import time
from pathlib import Path
from typing import Any, Callable

import click

from xmine.benchmarks import common
from xmine.encoders.options import precision_option

ENCODER_HELP = "Encoder: me5-small (default), use-m3, or any sentence-transformers name/path."
PROJECTION_HELP = (
    "A trained projection folder (xmine train), or 'default' (the projection shipped with xmine for "
    "this encoder). Repeat to compare several in one table; the raw encoder output is always the "
    "first row. `bench mining` adds the default by itself unless a projection (or 'none') is named."
)
DATA_HELP = (
    "The data root (holding tatoeba/, mlqe/, sts2017/, parallel/, massive/) or the data set's own "
    "folder. Default: $XMINE_DATA, else ../shared/data beside the checkout."
)


def _claimed_out(fn: Callable) -> Callable:
    """Claim the result JSON (--out, or the default path) before the benchmark runs, so a refused
    output costs nothing: never an input, never a foreign file, replaced only with --overwrite."""
    name = fn.__name__.removesuffix("_cmd")

    @functools.wraps(fn)
    def run(*args, **kw):
        from xmine.outputs import claim_output

        task = name + ("_noisy" if kw.get("noisy") else "")  # `bench mining --noisy` has its own result
        out = Path(kw["out"]) if kw["out"] else common.default_out(task, kw["encoder_name"], quick=kw["quick"])
        with claim_output(out, kind=common.RESULT_KIND, form="json", overwrite=kw.pop("overwrite"),
                          inputs=[kw["data_dir"], *kw["projections"]]):
            kw["out"] = str(out)
            return fn(*args, **kw)

    return run


def _common_options(fn: Callable) -> Callable:
    fn = _claimed_out(fn)
    options = [
        click.option("--encoder", "encoder_name", default="me5-small", show_default=True, help=ENCODER_HELP),
        click.option("--projection", "projections", multiple=True, metavar="DIR|default|none", help=PROJECTION_HELP),
        click.option("--data-dir", type=click.Path(file_okay=False), default=None, help=DATA_HELP),
        click.option("--out", type=click.Path(dir_okay=False), default=None,
                     help="Result JSON. Default: benchmarks/results/<task>-<encoder>[-quick].json."),
        click.option("--overwrite", is_flag=True, help="Replace the result JSON if it is an earlier xmine result."),
        click.option("--quick", is_flag=True, help="A small fixed subset, for smoke runs (seconds, not minutes)."),
        click.option("--device", default=None, help="Torch device for the encoder (cpu, cuda, ...). Default: auto."),
        precision_option(),
    ]
    for opt in reversed(options):
        fn = opt(fn)
    return fn


def _setup(encoder_name: str, projections: tuple[str, ...], device: str | None, precision: str,
           parts=("meaning", "language"), add_default: bool = False):
    from xmine.encoders import load_encoder

    encoder = load_encoder(encoder_name, device=device, precision=precision)
    return encoder, common.make_variants(encoder, projections, parts=parts, add_default=add_default)


def _finish(task, *, encoder, variants, out, quick, parameters, columns, rows, details, files, started,
            digits: int = 1, extra_tables=None) -> None:
    click.echo(common.format_table(columns, rows, digits=digits))
    out_path = Path(out) if out else common.default_out(task, encoder.name, quick=quick, precision=encoder.precision,
                                                          runtime=getattr(encoder, "runtime", "torch"))
    common.write_result(
        out_path, task=task, encoder=encoder, variants=variants, data_files=files,
        parameters=parameters | {"quick": quick}, columns=columns, rows=rows, details=details,
        seconds=time.time() - started, extra_tables=extra_tables,
    )
    click.echo(f"wrote {out_path}", err=True)


@click.group("bench", context_settings={"help_option_names": ["-h", "--help"]})
def bench() -> None:
    """Benchmarks: Tatoeba, MASSIVE, WMT20 QE, STS 2017, geometry (and BUCC when present).

    Each prints a table (rows: raw, then each --projection's parts) and writes a JSON result with
    provenance; `xmine bench report` turns the results into benchmarks/RESULTS.md.
    """


@bench.command("tatoeba")
@_common_options
@click.option("--langs", default=None,
              help="Comma-separated Tatoeba codes (deu,fra,...), or 'xtreme36'. Default: all 112 "
                   "(--quick: deu,fra,rus,cmn,ara,swh).")
@click.option("--max-pairs", type=click.IntRange(min=1), default=None,
              help="Use only the first N pairs of each language (--quick: 200).")
@click.option("--margin", is_flag=True,
              help="Also score with the xSIM-style ratio margin (k=4) beside plain cosine.")
@click.option("--per-lang", is_flag=True, help="Also print per-language average accuracy.")
def tatoeba_cmd(encoder_name, projections, data_dir, out, quick, device, precision, langs, max_pairs, margin, per_lang):
    """Tatoeba accuracy@1 (%) of nearest-neighbour retrieval, xx->eng and eng->xx.

    Averaged over the chosen languages and over XTREME's 36. For a projection, the language part
    is measured too: high accuracy there means meaning leaked into it (ORACLE's semantic leakage).
    """
    from xmine.benchmarks import tatoeba

    started = time.time()
    lang_list = common.parse_list(langs)
    if lang_list == ["xtreme36"]:
        lang_list = list(tatoeba.XTREME36)
    if quick:
        lang_list = lang_list or list(tatoeba.QUICK_LANGS)
        max_pairs = max_pairs or tatoeba.QUICK_PAIRS
    tatoeba.locate(data_dir)  # fail on missing data before loading the encoder
    encoder, variants = _setup(encoder_name, projections, device, precision)
    details, rows = {}, []
    for v in variants:
        r = tatoeba.evaluate_tatoeba(v.embed, data_dir, lang_list, max_pairs=max_pairs, margin=margin)
        details[v.name] = r
        a, x = r["average"], r["xtreme36"]
        row = [v.name, a["xx2eng"], a["eng2xx"], a["avg"], x["avg"]]
        if margin:
            row += [a["xx2eng_margin"], a["eng2xx_margin"], a["avg_margin"]]
        rows.append(row)
    first = next(iter(details.values()))
    n_all, n_x = first["average"]["languages"], first["xtreme36"]["languages"]
    columns = ["variant", f"xx->eng ({n_all})", f"eng->xx ({n_all})", f"avg ({n_all})", f"avg XTREME ({n_x})"]
    if margin:
        columns += ["xx->eng margin", "eng->xx margin", "avg margin"]
    if per_lang:
        langs_ = first["langs"]
        click.echo(common.format_table(["lang"] + [v.name for v in variants],
                                       [[lg] + [details[v.name]["per_lang"][lg]["avg"] for v in variants] for lg in langs_]))
        click.echo()
    _finish("tatoeba", encoder=encoder, variants=variants, out=out, quick=quick,
            parameters={"langs": first["langs"], "max_pairs": max_pairs, "margin": margin},
            columns=columns, rows=rows, details=details, files=first["files"], started=started)


@bench.command("massive")
@_common_options
@click.option("--locales", default=None,
              help="Comma-separated MASSIVE locales, each paired with en-US both ways (de-DE,ja-JP), "
                   "'fmda' (de-DE,es-ES,ja-JP) or 'all'. Default: all 49 (--quick: de-DE,es-ES,ja-JP,km-KH).")
@click.option("--partition", default="test", show_default=True, type=click.Choice(["train", "dev", "test"]),
              help="MASSIVE partition to retrieve in (FMDA: test, 2,974 utterances per locale).")
@click.option("--max-rows", type=click.IntRange(min=2), default=None,
              help="Use only the first N shared ids of each locale (--quick: 300).")
@click.option("--per-locale", is_flag=True, help="Also print each locale's cosine accuracy (always in the JSON).")
def massive_cmd(encoder_name, projections, data_dir, out, quick, device, precision, locales, partition, max_rows,
                per_locale):
    """MASSIVE cross-lingual retrieval accuracy@1 (%), en->xx and xx->en, for every locale vs en-US.

    Cosine and xSIM-style ratio margin (k=4); the average over the locales, and FMDA's three pairs
    (Table 2: EN-DE, EN-ES, EN-JA). A hit is counted when the retrieved utterance's text equals the
    gold one (test splits repeat utterances; copies are indistinguishable); "strict" counts only the
    exact row. For a projection the language part is measured too (semantic leakage).
    """
    from xmine.benchmarks import massive

    started = time.time()
    if quick:
        locales = locales or ",".join(massive.QUICK_LOCALES)
        max_rows = max_rows or massive.QUICK_ROWS
    folder = massive.locate(data_dir)
    locale_list = massive.parse_locales(locales, massive.available_locales(folder))
    encoder, variants = _setup(encoder_name, projections, device, precision)
    details, rows = {}, []
    fmda_pairs = [loc for loc in massive.FMDA_LOCALES if loc in locale_list]
    for v in variants:
        r = massive.evaluate_massive(v.embed, folder, locale_list, partition=partition, max_rows=max_rows)
        details[v.name] = r
        a = r["average"]
        row = [v.name, a["en2xx"], a["xx2en"], a["avg"], a["avg_strict"], a["en2xx_margin"], a["xx2en_margin"],
               a["avg_margin"], a["avg_margin_strict"]]
        for loc in fmda_pairs:
            p = r["per_locale"][loc]
            row += [p["en2xx"], p["xx2en"]]
        rows.append(row)
    n = len(locale_list)
    columns = ["variant", f"en->xx ({n})", f"xx->en ({n})", "avg", "avg strict", "en->xx margin",
               "xx->en margin", "avg margin", "avg margin strict"]
    for loc in fmda_pairs:
        code = loc.split("-")[0].upper()
        columns += [f"EN-{code}", f"{code}-EN"]
    locale_table = {
        "title": "Per locale: accuracy@1 (%), cosine, mean of en->xx and xx->en (text-equal hits); "
                 "`rep.` = repeated utterances in the locale's test rows",
        "columns": ["locale", "rep."] + [v.name for v in variants],
        "rows": [[loc, details[variants[0].name]["per_locale"][loc]["repeated_xx"]]
                 + [details[v.name]["per_locale"][loc]["avg"] for v in variants] for loc in locale_list],
    }
    if per_locale:
        click.echo(common.format_table(locale_table["columns"], locale_table["rows"]))
        click.echo()
    first = next(iter(details.values()))
    _finish("massive", encoder=encoder, variants=variants, out=out, quick=quick,
            parameters={"locales": locale_list, "pivot": "en-US", "partition": partition, "max_rows": max_rows,
                        "hit": "retrieved text equals gold text (strict: exact row)", "margin": "ratio, k=4"},
            columns=columns, rows=rows, details=details, files=first["files"], started=started,
            extra_tables=[locale_table])


@bench.command("massive-templates")
@_common_options
@click.option("--locales", default=",".join(("en-US", "de-DE")), show_default=True,
              help="Locales with an annotated test split (annot_utt): en-US, de-DE, sw-KE in the shared copy.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the slot-value draws.")
@click.option("--write-pairs", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write the generated pairs as DIR/massive-templates-<locale>-seed<N>.jsonl (each with a "
                   "sidecar .jsonl.json saying how it was made; replaced only with --overwrite).")
def massive_templates_cmd(encoder_name, projections, data_dir, out, quick, device, precision, locales, seed,
                          write_pairs):
    """MASSIVE monolingual template retrieval accuracy@1 (%) (FMDA section 4.3.2, Table 3).

    Each annotated test utterance with slots is paired with a copy whose every slot value is
    replaced by another value of the same slot type seen in that locale's data (seeded; ~1.9k
    pairs per locale). Each source must retrieve its copy among all copies, by cosine. --quick
    keeps the first 300 pairs of each locale.
    """
    from xmine.benchmarks import massive_templates as mt

    started = time.time()
    folder = mt.data.locate(data_dir)
    locale_list = common.parse_list(locales) or list(mt.DEFAULT_LOCALES)
    sets = {}
    for loc in locale_list:
        s = mt.build_template_pairs(folder, loc, seed=seed)
        sets[loc] = s.head(300) if quick else s
    if write_pairs is not None:
        for loc, s in sets.items():
            path = write_pairs / f"massive-templates-{loc}-seed{seed}{'-quick' if quick else ''}.jsonl"
            # the command's --overwrite (taken by _claimed_out for the result JSON) covers these too
            mt.write_pairs(path, s, overwrite=click.get_current_context().params.get("overwrite", False))
            click.echo(f"wrote {path} ({len(s.pairs)} pairs)", err=True)
    encoder, variants = _setup(encoder_name, projections, device, precision)
    details, rows = {}, []
    for v in variants:
        r = {loc: mt.evaluate_template_retrieval(v.embed, s) for loc, s in sets.items()}
        details[v.name] = r
        rows.append([v.name] + [r[loc]["acc"] for loc in locale_list])
    columns = ["variant"] + [f"{loc} ({len(sets[loc].pairs)})" for loc in locale_list]
    _finish("massive_templates", encoder=encoder, variants=variants, out=out, quick=quick,
            parameters={"locales": locale_list, "seed": seed, "pair_sets": {k: s.summary for k, s in sets.items()}},
            columns=columns, rows=rows, details=details,
            files=[s.summary["file"] for s in sets.values()], started=started)


@bench.command("qe")
@_common_options
@click.option("--pairs", default=None, help="Comma-separated WMT20 pairs. Default: en-de,en-zh,et-en,ne-en,ro-en,si-en.")
@click.option("--max-rows", type=click.IntRange(min=3), default=None, help="Use only the first N rows of each pair (--quick: 200).")
@click.option("--spearman", is_flag=True, help="Print Spearman per pair too (always in the JSON).")
def qe_cmd(encoder_name, projections, data_dir, out, quick, device, precision, pairs, max_rows, spearman):
    """WMT20 QE: Pearson r (x100) of cos(source, translation) with human z_mean on test20.

    Unsupervised, as DREAM / MEAT / SEED report it; for a projection its meaning part is scored.
    """
    from xmine.benchmarks import qe

    started = time.time()
    pair_list = common.parse_list(pairs) or list(qe.PAIRS)
    if quick:
        max_rows = max_rows or qe.QUICK_ROWS
    qe.locate(data_dir)
    encoder, variants = _setup(encoder_name, projections, device, precision, parts=("meaning",))
    details, rows = {}, []
    for v in variants:
        r = qe.evaluate_qe(v.embed, data_dir, pair_list, max_rows=max_rows)
        details[v.name] = r
        row = [v.name] + [r["per_pair"][p]["pearson"] for p in pair_list] + [r["average"]["pearson"], r["average"]["spearman"]]
        if spearman:
            row[1 + len(pair_list):1 + len(pair_list)] = [r["per_pair"][p]["spearman"] for p in pair_list]
        rows.append(row)
    columns = ["variant"] + [f"{p} r" for p in pair_list]
    if spearman:
        columns += [f"{p} rho" for p in pair_list]
    columns += ["avg r", "avg rho"]
    first = next(iter(details.values()))
    _finish("qe", encoder=encoder, variants=variants, out=out, quick=quick,
            parameters={"pairs": pair_list, "split": "test20", "max_rows": max_rows},
            columns=columns, rows=rows, details=details, files=first["files"], started=started)


@bench.command("sts")
@_common_options
@click.option("--tracks", default=None, help="Comma-separated tracks (track1 ... track6, track4a, track4b). Default: all.")
@click.option("--metric", type=click.Choice(["pearson", "spearman"]), default="pearson", show_default=True,
              help="Which correlation the per-track columns show (both are in the JSON).")
def sts_cmd(encoder_name, projections, data_dir, out, quick, device, precision, tracks, metric):
    """SemEval-2017 STS: Pearson / Spearman (x100) of cosine vs gold, per track and averaged.

    --quick runs the two smallest-cost tracks (track5 en-en, track4a es-en).
    """
    from xmine.benchmarks import sts

    started = time.time()
    track_list = common.parse_list(tracks) or (["track5", "track4a"] if quick else list(sts.TRACKS))
    sts.locate(data_dir)
    encoder, variants = _setup(encoder_name, projections, device, precision, parts=("meaning", "language"))
    details, rows = {}, []
    for v in variants:
        r = sts.evaluate_sts(v.embed, data_dir, track_list)
        details[v.name] = r
        rows.append([v.name] + [r["per_track"][t][metric] for t in track_list]
                    + [r["crosslingual"][metric], r["monolingual"][metric], r["average"][metric]])
    columns = (["variant"] + [f"{t} {sts.TRACKS[t].label}" for t in track_list]
               + [f"cross-ling. {metric}", f"mono {metric}", f"all {metric}"])
    first = next(iter(details.values()))
    _finish("sts", encoder=encoder, variants=variants, out=out, quick=quick,
            parameters={"tracks": track_list, "metric_in_table": metric},
            columns=columns, rows=rows, details=details, files=first["files"], started=started)


@bench.command("geometry")
@_common_options
@click.option("--langs", default=None,
              help="FLORES-200 codes paired with --pivot. Default: deu_Latn,fra_Latn,rus_Cyrl,zho_Hans,arb_Arab,swh_Latn.")
@click.option("--pivot", default="eng_Latn", show_default=True, help="The language every --langs entry is paired with.")
@click.option("--rows", type=click.IntRange(min=2), default=None,
              help="First N FLORES-200 devtest lines per language (default all 1012; --quick: 200).")
def geometry_cmd(encoder_name, projections, data_dir, out, quick, device, precision, langs, pivot, rows):
    """Alignment and uniformity (Wang & Isola 2020) of raw / meaning / language embeddings.

    Alignment: mean squared distance of translation pairs (lower = closer). Uniformity: log mean
    exp(-2 squared distance) over all sentence pairs (lower = more evenly spread).
    """
    from xmine.benchmarks import geometry

    started = time.time()
    lang_list = common.parse_list(langs) or (list(geometry.DEFAULT_LANGS[:3]) if quick else list(geometry.DEFAULT_LANGS))
    rows = rows or (geometry.QUICK_ROWS if quick else geometry.DEFAULT_ROWS)
    geometry.locate(data_dir)
    encoder, variants = _setup(encoder_name, projections, device, precision)
    details, table = {}, []
    for v in variants:
        r = geometry.evaluate_geometry(v.embed, data_dir, lang_list, rows=rows, pivot=pivot)
        details[v.name] = r
        table.append([v.name, r["average"]["alignment"], r["average"]["uniformity"]])
    first = next(iter(details.values()))
    _finish("geometry", encoder=encoder, variants=variants, out=out, quick=quick,
            parameters={"langs": lang_list, "pivot": pivot, "rows": rows},
            columns=["variant", "alignment", "uniformity"], rows=table, details=details,
            files=first["files"], started=started, digits=3)


def _locale_dirs(values: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for v in values:
        loc, eq, path = v.partition("=")
        if not eq or not loc or not path:
            raise click.BadParameter(f"{v!r} is not LOCALE=DIR (e.g. de-DE=proj-fmda-de)", param_hint=what)
        out[loc] = path
    return out


@bench.command("fmda")
@click.option("--fmda", "fmda_dirs", multiple=True, required=True, metavar="LOCALE=DIR",
              help="An FMDA projection trained on en-US + LOCALE (xmine train --method fmda --langs LOCALE); repeat "
                   "per pair (the paper: de-DE, es-ES, ja-JP).")
@click.option("--dream", "dream_dirs", multiple=True, required=True, metavar="LOCALE=DIR",
              help="The DREAM projection trained on the same data, per locale.")
@click.option("--encoder", "encoder_name", default="me5-small", show_default=True, help=ENCODER_HELP)
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help=DATA_HELP)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the template-pair generator.")
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for fmda_table2-*.json and fmda_table3-*.json. [default: benchmarks/results]")
@click.option("--quick", is_flag=True, help="The first 300 test rows only (smoke runs).")
@click.option("--overwrite", is_flag=True, help="Replace the result JSONs if they are earlier xmine results.")
@click.option("--device", default=None, help="Torch device for the encoder (cpu, cuda, ...). Default: auto.")
@precision_option()
def fmda_cmd(fmda_dirs, dream_dirs, encoder_name, data_dir, seed, out_dir, quick, overwrite, device, precision):
    """FMDA's Tables 2 and 3 on MASSIVE: cross-lingual retrieval (test split, both directions) and
    monolingual template retrieval (generated slot-replacement pairs), raw vs DREAM vs FMDA's
    meaning, template and residual parts, each pair with the models trained on it."""
    import sys

    from xmine import massive
    from xmine.benchmarks import fmda_tables
    from xmine.encoders import load_encoder

    folder = massive.locate(data_dir)
    encoder = load_encoder(encoder_name, device=device, precision=precision)
    paths = fmda_tables.run(encoder, folder, _locale_dirs(fmda_dirs, "--fmda"), _locale_dirs(dream_dirs, "--dream"),
                            out_dir=out_dir or common.results_dir(), seed=seed, quick=quick, overwrite=overwrite,
                            command="xmine " + " ".join(sys.argv[1:]))
    for p in paths:
        click.echo(f"wrote {p}", err=True)
def _mining_langs(ctx, param, value):
    """--langs of `bench mining`, checked while parsing (before the result JSON is claimed)."""
    from xmine.benchmarks import mining

    langs = common.parse_list(value)
    unknown = [lg for lg in langs or () if lg not in mining.NEWS_SETS]
    if unknown:
        raise click.BadParameter(f"unknown language(s) {', '.join(unknown)}; choose from {', '.join(mining.NEWS_SETS)}")
    return value


@bench.command("mining")
@_common_options
@click.option("--langs", default=None, callback=_mining_langs,
              help="Comma-separated languages paired with English, from: de,cs,ru,zh,ja,fi,kk,pl,lt,km,ha,is. "
                   "Default: de,cs,ru,zh,ja,fi,kk,pl,lt,km (--quick: de,zh,lt).")
@click.option("--gold-fraction", type=click.FloatRange(min=0.001, max=0.5), default=None,
              help="Share of each side's sentences that have a translation (default 0.05; BUCC's is 0.02-0.03).")
@click.option("--max-news", type=click.IntRange(min=0), default=None,
              help="At most this many WMT newstest pairs per language (default 1500; --quick: 250).")
@click.option("--flores-rows", type=click.IntRange(min=10), default=None,
              help="Draw only N of the 1,012 FLORES-200 devtest lines per language (seeded; --quick: 250).")
@click.option("--threshold", type=float, default=None,
              help="The fixed ratio-margin threshold reported beside the best one, for every variant. Default: "
                   "each variant's own default, as `xmine mine` uses it: a projection's calibrated threshold "
                   "(SHIPPED.json), else 1.04 (WikiMatrix's, for raw embeddings).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the set construction.")
@click.option("--sets-dir", type=click.Path(file_okay=False), default=None,
              help="Write the sets (BUCC format) here. Default: $XMINE_HOME/bench-mining/<hash of data and settings>.")
@click.option("--noisy", is_flag=True,
              help="Add web-like noise to each set (copies of the other side, other-language lines, shared "
                   "boilerplate, number/URL lines, near-duplicates; benchmarks/mining_noisy.py) and report "
                   "precision/recall/F1 at the default threshold: clean, noisy, and noisy after the pair "
                   "filters of `xmine mine`, with what each filter removed. Result: mining_noisy-<encoder>.json.")
def mining_cmd(encoder_name, projections, data_dir, out, quick, device, precision, langs, gold_fraction, max_news, flores_rows,
               threshold, seed, sets_dir, noisy):
    """BUCC-style mining F1 on sets built from FLORES-200 and WMT newstest (see benchmarks/mining.py).

    Per language, FLORES-200 devtest and held-out newstest pairs (2019-2021) are hidden among
    distractors of the same language and domain (5% of sentences have a translation), written in
    BUCC's format, mined (k=4, ratio margin, max retrieval) and scored with `bench bucc`'s code:
    precision, recall and F1 at the best threshold and at each variant's default threshold (a
    projection's calibrated one, raw 1.04).
    """
    from xmine.benchmarks import mining

    started = time.time()
    lang_list = common.parse_list(langs) or list(mining.QUICK_LANGS if quick else mining.DEFAULT_LANGS)
    settings = {"seed": seed, "gold_fraction": gold_fraction or mining.DEFAULT_GOLD_FRACTION,
                "max_news": max_news if max_news is not None else (mining.QUICK_MAX_NEWS if quick else mining.DEFAULT_MAX_NEWS),
                "flores_rows": flores_rows or (mining.QUICK_FLORES_ROWS if quick else None)}
    data = mining.locate(data_dir)
    if noisy:
        return _mining_noisy(encoder_name, projections, device, precision, data, lang_list, settings, threshold,
                             out=out, quick=quick, started=started)
    folder, manifest = mining.build_sets(data, lang_list, sets_dir=Path(sets_dir) if sets_dir else None, **settings)
    click.echo(f"mining sets in {folder}", err=True)
    encoder, variants = _setup(encoder_name, projections, device, precision, parts=("meaning",), add_default=True)
    details, rows = {}, []
    for v in variants:
        t, source = mining.variant_threshold(v, threshold)
        r = mining.evaluate_mining(v.embed, folder, lang_list, threshold=t)
        details[v.name] = r | {"default_threshold": {"value": t, "source": source}}
        for at, label in (("best", v.name), ("default", f"{v.name} @{t:g}")):
            a = r["average"][at]
            rows.append([label] + [100 * r["per_lang"][lg][at]["f1"] for lg in lang_list]
                        + [a["precision"], a["recall"], a["f1"]])
    columns = ["variant"] + [f"{lg} F1" for lg in lang_list] + ["avg P", "avg R", "avg F1"]
    click.echo("per variant: F1 at each language's best threshold, then at the variant's default threshold "
               "(its calibrated one, else 1.04)")
    _finish("mining", encoder=encoder, variants=variants, out=out, quick=quick,
            parameters=settings | {"langs": lang_list, "threshold": threshold, "sets_dir": str(folder)},
            columns=columns, rows=rows, details=details | {"sets": manifest},
            files=[f["path"] for f in manifest["sources"]], started=started)


_NOISY_COLUMNS = (("clean", "precision"), ("clean", "recall"), ("clean_pre", "precision"), ("clean_pre", "recall"),
                  ("clean_lang", "precision"), ("clean_lang", "recall"), ("noisy", "precision"), ("noisy", "recall"),
                  ("filtered", "precision"), ("filtered", "recall"), ("pre_filtered", "precision"),
                  ("pre_filtered", "recall"), ("lang_filtered", "precision"), ("lang_filtered", "recall"))
_NOISY_NAMES = {"clean": "clean", "clean_pre": "clean+pre", "clean_lang": "clean+lang", "noisy": "noisy",
                "filtered": "filters", "pre_filtered": "+pre", "lang_filtered": "+lang"}


def _noisy_label(variant: str, metric: str) -> str:
    return f"{_NOISY_NAMES[variant]} {metric[0].upper()}"


def _before_search(removed: dict, step: str = "pre_search") -> str:
    r = removed.get(step, {})
    return f"{r.get('src', 0)}+{r.get('en', 0)} ({r.get('gold_src', 0)}+{r.get('gold_en', 0)})"


def _mining_noisy(encoder_name, projections, device, precision, data, lang_list, settings, threshold, *, out, quick,
                  started):
    from xmine.benchmarks import mining, mining_noisy
    from xmine.mining.filters import PairFilterConfig

    encoder, variants = _setup(encoder_name, projections, device, precision, parts=("meaning",), add_default=True)
    details, rows = {}, []
    for v in variants:
        t, source = mining.variant_threshold(v, threshold)
        r = mining_noisy.evaluate(v.embed, data, lang_list, threshold=t, **settings)
        details[v.name] = r | {"default_threshold": {"value": t, "source": source}}
        a = r["average"]
        rows.append([f"{v.name} @{t:g}"] + [a[var][m] for var, m in _NOISY_COLUMNS]
                    + [min(100 * x[var]["precision"] for x in r["per_lang"].values())
                       for var in ("pre_filtered", "lang_filtered")])
    columns = ["variant @threshold"] + [_noisy_label(var, m) for var, m in _NOISY_COLUMNS] + ["+pre min P",
                                                                                              "+lang min P"]
    extra = []
    for v in variants:
        per = details[v.name]["per_lang"]
        extra.append({"title": f"{v.name}: per language (x100); rows removed before the search (gold among them) "
                               "on the noisy set by the cleaning, and on the clean set by the cleaning / --lang-filter",
                      "columns": ["lang"] + [_noisy_label(var, m) for var, m in _NOISY_COLUMNS]
                                 + ["removed before search (noisy)", "clean: cleaning / lang-filter"],
                      "rows": [[lg] + [100 * x[var][m] for var, m in _NOISY_COLUMNS]
                               + [_before_search(x["removed_before_search"]["pre"]),
                                  _before_search(x["removed_before_search"]["clean_pre"]) + " / "
                                  + _before_search(x["removed_before_search"]["clean_lang"], "language")]
                               for lg, x in per.items()]})
    click.echo("averages over languages at each variant's default threshold: the clean sets (as is, after the "
               "pre-search cleaning, after --lang-filter and the cleaning), then the noisy sets without filters, "
               "with the pair filters only, with the cleaning and the filters (xmine mine's default), and with "
               "--lang-filter too")
    _finish("mining_noisy", encoder=encoder, variants=variants, out=out, quick=quick,
            parameters=settings | {"langs": lang_list, "threshold": threshold, "noise": mining_noisy.NOISE,
                                   "filters": PairFilterConfig().record("ratio")},
            columns=columns, rows=rows, details=details, extra_tables=extra,
            files=sorted({str(p) for lg in lang_list for p in mining.build_set(data, lg, **settings).files}
                         | {str(data / common.FLORES_DEVTEST / f"{c}.devtest")
                            for c in mining_noisy.OTHER_LANGS}),
            started=started)
    for t in extra:
        click.echo(t["title"])
        click.echo(common.format_table(t["columns"], t["rows"], digits=1))


@bench.command("report")
@click.option("--results", "results_dir", type=click.Path(file_okay=False), default=None,
              help="Folder of result JSONs. Default: benchmarks/results in the checkout.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Markdown file. Default: benchmarks/RESULTS.md.")
@click.option("--overwrite", is_flag=True, help="Replace the markdown file if it is an earlier xmine report.")
def report_cmd(results_dir, out, overwrite):
    """Write benchmarks/RESULTS.md from the result JSONs (machine, date, one section per task)."""
    from xmine.benchmarks import report

    path = report.write_report(results_dir, out, overwrite=overwrite)
    click.echo(f"wrote {path}", err=True)


@click.command("plot")
@click.option("--encoder", "encoder_name", default="me5-small", show_default=True, help=ENCODER_HELP)
@click.option("--projection", "projections", multiple=True, type=click.Path(exists=True),
              help="A projection folder: adds its meaning and language panels. Repeatable.")
@click.option("--src-lang", default="deu_Latn", show_default=True, help="FLORES-200 code of the first language.")
@click.option("--tgt-lang", default="eng_Latn", show_default=True, help="FLORES-200 code of the second language.")
@click.option("--rows", type=click.IntRange(min=3), default=200, show_default=True,
              help="How many FLORES-200 devtest sentences (per language) to plot.")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help=DATA_HELP)
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="PNG file. Default: benchmarks/results/pca-<encoder>-<src>-<tgt>.png.")
@click.option("--overwrite", is_flag=True, help="Replace the PNG if it is an earlier xmine plot.")
@click.option("--device", default=None, help="Torch device for the encoder. Default: auto.")
@precision_option()
def plot_cmd(encoder_name, projections, src_lang, tgt_lang, rows, data_dir, out, overwrite, device, precision):
    """PNG of a 2-D PCA of raw, meaning and language embeddings of one language pair.

    Raw embeddings cluster by language; a good meaning part overlaps across languages; the
    language part separates them again.
    """
    from xmine.benchmarks import geometry, plot
    from xmine.outputs import claim_output

    out_path = Path(out) if out else (
        common.results_dir() / f"pca-{common.safe_name(encoder_name)}-{src_lang}-{tgt_lang}.png")
    with claim_output(out_path, kind=plot.PLOT_KIND, form="png", overwrite=overwrite,
                      inputs=[data_dir, *projections]):
        src, tgt, _ = geometry.flores_pairs(data_dir, src_lang, rows=rows, pivot=tgt_lang)
        encoder, variants = _setup(encoder_name, projections, device, precision)
        sep = plot.plot_pca(
            variants, src, tgt, out_path, src_label=src_lang, tgt_label=tgt_lang,
            title=f"PCA of {encoder.name} embeddings: {rows} FLORES-200 devtest sentences, {src_lang} and {tgt_lang}",
        )
    for name, s in sep.items():
        click.echo(f"{name}: language separation {s:.2f} (centroid distance / mean spread)")
    click.echo(f"wrote {out_path}", err=True)


def _add_optional(group: click.Group, module: str, attr: str = "command") -> None:
    """Add another engineer's benchmark command (e.g. BUCC) when its module is present."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name == module:
            return
        raise
    cmd: Any = getattr(mod, attr, None)
    if isinstance(cmd, click.Command):
        group.add_command(cmd)


_add_optional(bench, "xmine.benchmarks.bucc")

COMMANDS = [bench, plot_cmd]
