"""`xmine bench <task>` and `xmine plot`: reproduce the papers' numbers with one command.

Every `bench` task embeds its test data with one encoder (raw embeddings through the shared
cache, so a rerun or another projection encodes nothing again), evaluates the raw embeddings and
each projection's meaning (and, where it means something, language) part, prints a table and
writes a JSON result with full provenance. The logic lives in the task modules; this file only
parses options.
"""

from __future__ import annotations

from pathlib import Path
import sys

import click

from xmine.benchmarks import (bucc, common, fmda_tables, geometry, massive, massive_templates as mt,
                               mining_command, plot, qe, report, sts, tatoeba)
from xmine.benchmarks.runner import (DATA_HELP, ENCODER_HELP, encoder_of, evaluate_variants, finish, setup,
                                     task_options, variant_tag)
from xmine.encoders import load_encoder
from xmine.encoders.options import precision_option
from xmine.options import NAME, SEED, ExistingPath, GivenPath, comma_list, projection_option, quiet_option
from xmine.langs import codes_among
from xmine.artefacts.outputs import claim_output
from xmine.paths import data_root


@click.group("bench", context_settings={"help_option_names": ["-h", "--help"]})
def bench() -> None:
    """Benchmarks: Tatoeba, MASSIVE (retrieval, templates, FMDA), WMT20 QE, STS 2017, geometry, mining
    (BUCC-style sets) and BUCC 2018 where its data is present.

    Each prints a table (rows: raw, then each --projection's parts) and writes a JSON result with
    provenance; `xmine bench report` turns the results into benchmarks/RESULTS.md.
    """


@bench.command("tatoeba")
@task_options
@click.option("--langs", default=None, callback=comma_list,
              help="Comma-separated Tatoeba codes (deu,fra,...), or 'xtreme36'. Default: all 112 "
                   "(--quick: deu,fra,rus,cmn,ara,swh).")
@click.option("--max-pairs", type=click.IntRange(min=1), default=None,
              help="Use only the first N pairs of each language (--quick: 200).")
@click.option("--margin", is_flag=True, help="Also score with the xSIM-style ratio margin (k=4) beside plain cosine.")
@click.option("--per-lang", is_flag=True, help="Also print per-language average accuracy.")
def tatoeba_cmd(data_dir, quick, langs, max_pairs, margin, per_lang):
    """Tatoeba accuracy@1 (%) of nearest-neighbour retrieval, xx->eng and eng->xx.

    Averaged over the chosen languages and over XTREME's 36. For a projection, the language part
    is measured too: high accuracy there means meaning leaked into it (ORACLE's semantic leakage).
    """
    lang_list = common.parse_list(langs)
    if lang_list == ["xtreme36"]:
        lang_list = list(tatoeba.XTREME36)
    if quick:
        lang_list = lang_list or list(tatoeba.QUICK_LANGS)
        max_pairs = max_pairs or tatoeba.QUICK_PAIRS
    tatoeba.locate(data_dir)  # fail on missing data before loading the encoder
    details = evaluate_variants(lambda v: tatoeba.evaluate_tatoeba(v.embed, data_dir, lang_list, max_pairs=max_pairs,
                                                                   margin=margin))
    columns, rows = tatoeba.table(details, margin=margin)
    first = next(iter(details.values()))
    held = max(r["pairs"] for r in first["per_lang"].values())
    if max_pairs is not None and held < max_pairs:  # (was: the value asked for recorded, unsaid)
        click.echo(f"--max-pairs {max_pairs:,}: no language holds more than {held:,} pairs; all were used", err=True)
    if per_lang:
        click.echo(common.format_table(["lang"] + list(details),
                                       [[lg] + [r["per_lang"][lg]["avg"] for r in details.values()]
                                        for lg in first["langs"]]))
        click.echo()
    finish("tatoeba", details, columns=columns, rows=rows,
           parameters={"langs": first["langs"], "max_pairs": max_pairs, "margin": margin})


@bench.command("massive")
@task_options
@click.option("--locales", default=None, callback=comma_list,
              help="Comma-separated MASSIVE locales, each paired with en-US both ways (de-DE,ja-JP), "
                   "'fmda' (de-DE,es-ES,ja-JP) or 'all'. Default: all 49 (--quick: de-DE,es-ES,ja-JP,km-KH).")
@click.option("--partition", default="test", show_default=True, type=click.Choice(["train", "dev", "test"]),
              help="MASSIVE partition to retrieve in (FMDA: test, 2,974 utterances per locale).")
@click.option("--max-rows", type=click.IntRange(min=2), default=None,
              help="Use only the first N shared ids of each locale (--quick: 300).")
@click.option("--per-locale", is_flag=True, help="Also print each locale's cosine accuracy (always in the JSON).")
def massive_cmd(data_dir, quick, locales, partition, max_rows, per_locale):
    """MASSIVE cross-lingual retrieval accuracy@1 (%), en->xx and xx->en, for every locale vs en-US.

    Cosine and xSIM-style ratio margin (k=4); the average over the locales, and FMDA's three pairs
    (Table 2: EN-DE, EN-ES, EN-JA). A hit is counted when the retrieved utterance's text equals the
    gold one (test splits repeat utterances; copies are indistinguishable); "strict" counts only the
    exact row. For a projection the language part is measured too (semantic leakage).
    """
    if quick:
        locales = locales or ",".join(massive.QUICK_LOCALES)
        max_rows = max_rows or massive.QUICK_ROWS
    folder = massive.locate(data_dir)
    locale_list = massive.parse_locales(locales, massive.available_locales(folder))
    details = evaluate_variants(lambda v: massive.evaluate_massive(v.embed, folder, locale_list, partition=partition,
                                                                   max_rows=max_rows))
    columns, rows, locale_table = massive.tables(details, locale_list)
    held = max(r["rows"] for r in next(iter(details.values()))["per_locale"].values())
    if max_rows is not None and held < max_rows:  # (was: the number asked recorded, unsaid)
        click.echo(f"--max-rows {max_rows:,}: no locale holds more than {held:,} {partition} rows; all were used",
                   err=True)
    if per_locale:
        click.echo(common.format_table(locale_table["columns"], locale_table["rows"]))
        click.echo()
    finish("massive", details, columns=columns, rows=rows, extra_tables=[locale_table],
           parameters={"locales": locale_list, "pivot": "en-US", "partition": partition, "max_rows": max_rows,
                       "hit": "retrieved text equals gold text (strict: exact row)", "margin": "ratio, k=4"})


@bench.command("massive-templates")
@task_options
@click.option("--locales", default=",".join(("en-US", "de-DE")), show_default=True, callback=comma_list,
              help="Locales with an annotated test split (annot_utt): en-US, de-DE, sw-KE in the shared copy.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the slot-value draws.")
@click.option("--write-pairs", type=GivenPath(file_okay=False, path_type=Path), default=None,
              help="Also write the generated pairs as DIR/massive-templates-<locale>-seed<N>[-quick].jsonl (each "
                   "with a sidecar .jsonl.json saying how it was made; replaced only with --overwrite).")
def massive_templates_cmd(data_dir, quick, locales, seed, write_pairs):
    """MASSIVE monolingual template retrieval accuracy@1 (%) (FMDA section 4.3.2, Table 3).

    Each annotated test utterance with slots is paired with a copy whose every slot value is
    replaced by another value of the same slot type seen in that locale's data (seeded; ~1.9k
    pairs per locale). Each source must retrieve its copy among all copies, by cosine. --quick
    keeps the first 300 pairs of each locale.
    """
    folder = mt.data.locate(data_dir)
    locale_list = sum(codes_among(common.parse_list(locales) or list(mt.DEFAULT_LOCALES),  # `de` is de-DE; the
                                  mt.data.available_locales(folder)), [])  # unknown ones: read_locale names them
    sets = {loc: mt.build_template_pairs(folder, loc, seed=seed) for loc in locale_list}
    sets = {loc: s.head(300) for loc, s in sets.items()} if quick else sets
    if write_pairs is not None:
        files = {write_pairs / f"massive-templates-{loc}-seed{seed}{'-quick' if quick else ''}.jsonl": s
                 for loc, s in sets.items()}
        # the command's --overwrite (taken by _claimed_out for the result JSON) covers these too
        mt.write_pairs(files, overwrite=click.get_current_context().params.get("overwrite", False),
                       data=data_root(data_dir))
        for path, s in files.items():
            click.echo(f"wrote {path} ({len(s.pairs)} pairs)", err=True)
    details = evaluate_variants(lambda v: {loc: mt.evaluate_template_retrieval(v.embed, s) for loc, s in sets.items()})
    finish("massive_templates", details,
           columns=["variant"] + [f"{loc} ({len(sets[loc].pairs)})" for loc in locale_list],
           rows=[[name] + [r[loc]["acc"] for loc in locale_list] for name, r in details.items()],
           parameters={"locales": locale_list, "seed": seed, "pair_sets": {k: s.summary for k, s in sets.items()}},
           files=[s.summary["file"] for s in sets.values()])


@bench.command("qe")
@task_options
@click.option("--pairs", default=None, callback=comma_list, help="Comma-separated WMT20 pairs. Default: en-de,en-zh,et-en,ne-en,ro-en,si-en.")
@click.option("--max-rows", type=click.IntRange(min=3), default=None, help="Use only the first N rows of each pair (--quick: 200).")
@click.option("--spearman", is_flag=True, help="Print Spearman per pair too (always in the JSON).")
def qe_cmd(data_dir, quick, pairs, max_rows, spearman):
    """WMT20 QE: Pearson r (x100) of cos(source, translation) with human z_mean on test20.

    Unsupervised, as DREAM / MEAT / SEED report it; for a projection its meaning part is scored.
    """
    pair_list = [p.lower() for p in common.parse_list(pairs) or ()] or list(qe.PAIRS)
    if quick:
        max_rows = max_rows or qe.QUICK_ROWS
    qe.locate(data_dir)
    details = evaluate_variants(lambda v: qe.evaluate_qe(v.embed, data_dir, pair_list, max_rows=max_rows),
                                parts=("meaning",))
    metrics = ("pearson", "spearman") if spearman else ("pearson",)
    rows = [[name] + [r["per_pair"][p][m] for m in metrics for p in pair_list]
            + [r["average"]["pearson"], r["average"]["spearman"]] for name, r in details.items()]
    columns = ["variant"] + [f"{p} {'r' if m == 'pearson' else 'rho'}" for m in metrics for p in pair_list]
    finish("qe", details, columns=columns + ["avg r", "avg rho"], rows=rows,
           parameters={"pairs": pair_list, "split": "test20", "max_rows": max_rows})


@bench.command("sts")
@task_options
@click.option("--tracks", default=None, callback=comma_list, help="Comma-separated tracks (track1 ... track6, track4a, track4b). Default: all.")
@click.option("--metric", type=click.Choice(["pearson", "spearman"]), default="pearson", show_default=True,
              help="Which correlation the per-track columns show (both are in the JSON).")
def sts_cmd(data_dir, quick, tracks, metric):
    """SemEval-2017 STS: Pearson / Spearman (x100) of cosine vs gold, per track and averaged.

    --quick runs the two smallest-cost tracks (track5 en-en, track4a es-en).
    """
    track_list = ([t.lower() for t in common.parse_list(tracks) or ()]
                  or (["track5", "track4a"] if quick else list(sts.TRACKS)))
    sts.locate(data_dir)
    details = evaluate_variants(lambda v: sts.evaluate_sts(v.embed, data_dir, track_list))
    rows = [[name] + [r["per_track"][t][metric] for t in track_list]
            + [r["crosslingual"][metric], r["monolingual"][metric], r["average"][metric]] for name, r in details.items()]
    columns = (["variant"] + [f"{t} {sts.TRACKS[t].label}" for t in track_list]
               + [f"cross-ling. {metric}", f"mono {metric}", f"all {metric}"])
    finish("sts", details, columns=columns, rows=rows,
           parameters={"tracks": track_list, "metric_in_table": metric})


@bench.command("geometry")
@task_options
@click.option("--langs", default=None, callback=comma_list,
              help="FLORES-200 or ISO codes paired with --pivot. Default: deu_Latn,fra_Latn,rus_Cyrl,zho_Hans,arb_Arab,swh_Latn.")
@click.option("--pivot", default="eng_Latn", show_default=True, help="The language every --langs entry is paired with.")
@click.option("--rows", type=click.IntRange(min=2), default=None,
              help="First N FLORES-200 devtest lines per language (default all 1012; --quick: 200).")
def geometry_cmd(data_dir, quick, langs, pivot, rows):
    """Alignment and uniformity (Wang & Isola 2020) of raw / meaning / language embeddings.

    Alignment: mean squared distance of translation pairs (lower = closer). Uniformity: log mean
    exp(-2 squared distance) over all sentence pairs (lower = more evenly spread).
    """
    lang_list = common.parse_list(langs) or (list(geometry.DEFAULT_LANGS[:3]) if quick else list(geometry.DEFAULT_LANGS))
    lang_list, pivot = geometry.measured_languages(data_dir, lang_list, pivot)
    rows = rows or (geometry.QUICK_ROWS if quick else geometry.DEFAULT_ROWS)
    details = evaluate_variants(lambda v: geometry.evaluate_geometry(v.embed, data_dir, lang_list, rows=rows,
                                                                     pivot=pivot))
    used = sorted({pair["rows"] for r in details.values() for pair in r["per_pair"].values()})
    if rows is not None and used != [rows]:  # FLORES-200 devtest ends first: record what was measured
        click.echo(f"--rows {rows}: FLORES-200 devtest holds {used[-1]:,} lines a language; all were used", err=True)
        rows = used[0] if len(used) == 1 else used
    finish("geometry", details, columns=["variant", "alignment", "uniformity"],
           rows=[[name, r["average"]["alignment"], r["average"]["uniformity"]] for name, r in details.items()],
           parameters={"langs": lang_list, "pivot": pivot, "rows": rows}, digits=3)


def _locale_dirs(values: tuple[str, ...], what: str, available: list[str]) -> dict[str, str]:
    """{MASSIVE's locale (`de`, `deu`: de-DE; was: refused beside `de-DE=`): projection directory}."""
    out = {}
    for v in values:
        loc, eq, path = v.partition("=")
        if not eq or not loc or not path:
            raise click.BadParameter(f"{v!r} is not LOCALE=DIR (e.g. de-DE=proj-fmda-de)", param_hint=what)
        loc = massive.parse_locales(loc, available)[0]
        if loc in out:  # (was: the last one kept without a word)
            raise click.BadParameter(f"{loc} given twice ({out[loc]} and {path})", param_hint=what)
        if not Path(path).is_dir():  # (was: "PATH: no such file or directory", naming no option)
            why = "a file, not a projection directory" if Path(path).exists() else "no such projection directory"
            raise click.BadParameter(f"{loc}={path}: {why}", param_hint=what)
        out[loc] = path
    return out


@bench.command("fmda")
@click.option("--fmda", "fmda_dirs", multiple=True, required=True, metavar="LOCALE=DIR",
              help="An FMDA projection trained on en-US + LOCALE (xmine train --method fmda --langs LOCALE); repeat "
                   "per pair (the paper: de-DE, es-ES, ja-JP).")
@click.option("--dream", "dream_dirs", multiple=True, required=True, metavar="LOCALE=DIR",
              help="The DREAM projection trained on the same data, per locale.")
@click.option("--encoder", "encoder_name", type=NAME, default="me5-small", show_default=True,
              help="Encoder: me5-small, use-m3, or any sentence-transformers name/path; the encoder the --fmda "
                   "projections were made for unless given.")
@click.option("--data-dir", type=GivenPath(file_okay=False), default=None, help=DATA_HELP)
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the template-pair generator.")
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for fmda_table2-*.json and fmda_table3-*.json. [default: benchmarks/results]")
@click.option("--quick", is_flag=True, help="The first 300 test rows only (smoke runs).")
@click.option("--overwrite", is_flag=True, help="Replace the result JSONs if they are earlier xmine results.")
@precision_option()
@quiet_option(help="No progress bars (the tables are still printed).")
def fmda_cmd(fmda_dirs, dream_dirs, encoder_name, data_dir, seed, out_dir, quick, overwrite, device, precision,
             runtime, prompt, prompt_name, quiet):
    """FMDA's Tables 2 and 3 on MASSIVE: cross-lingual retrieval (test split, both directions) and
    monolingual template retrieval (generated slot-replacement pairs), raw vs DREAM vs FMDA's
    meaning, template and residual parts, each pair with the models trained on it."""
    folder = massive.locate(data_dir)
    encoder_name = encoder_of(encoder_name, [d.partition("=")[2] for d in (*fmda_dirs, *dream_dirs)])
    fmda, dream = (_locale_dirs(d, what, massive.available_locales(folder)) for d, what in ((fmda_dirs, "--fmda"),
                                                                                            (dream_dirs, "--dream")))
    encoder = load_encoder(encoder_name, device=device, precision=precision, runtime=runtime, prefix=prompt,
                           prompt_name=prompt_name)
    # --precision and --runtime as given, as every bench command names them (was: the ones auto resolved
    # to, so the default run's name changed with the machine)
    tag = variant_tag(exclude=("fmda_dirs", "dream_dirs", "out_dir"))
    paths = fmda_tables.run(encoder, folder, fmda, dream, out_dir=out_dir or common.results_dir(), seed=seed,
                            quick=quick, overwrite=overwrite, command="xmine " + " ".join(sys.argv[1:]), tag=tag,
                            show_progress=not quiet)
    click.echo("\n".join(f"wrote {p}" for p in paths), err=True)


@bench.command("report")
@click.option("--results", "results_dir", type=ExistingPath(file_okay=False, path_type=str), default=None,
              help="Folder of result JSONs. Default: benchmarks/results in the checkout.")
@click.option("--out", type=GivenPath(dir_okay=False), default=None, help="Markdown file. Default: benchmarks/RESULTS.md.")
@click.option("--overwrite", is_flag=True, help="Replace the markdown file if it is an earlier xmine report.")
def report_cmd(results_dir, out, overwrite):
    """Write benchmarks/RESULTS.md from the result JSONs (machine, date, one section per task)."""
    click.echo(f"wrote {report.write_report(results_dir, out, overwrite=overwrite)}", err=True)


@click.command("plot")
@click.option("--encoder", "encoder_name", type=NAME, default="me5-small", show_default=True, help=ENCODER_HELP)
@projection_option("to plot", multiple=True, default="Each adds its meaning and language panels; repeatable. "
                   "Default: raw embeddings alone.")
@click.option("--src-lang", default="deu_Latn", show_default=True, help="The first language (deu_Latn, deu or de).")
@click.option("--tgt-lang", default="eng_Latn", show_default=True, help="The second language (FLORES-200 or ISO code).")
@click.option("--rows", type=click.IntRange(min=3), default=200, show_default=True,
              help="How many FLORES-200 devtest sentences (per language) to plot.")
@click.option("--data-dir", type=GivenPath(file_okay=False), default=None, help=DATA_HELP)
@click.option("--out", type=GivenPath(dir_okay=False), default=None,
              help="PNG file. Default: benchmarks/results/pca-<encoder>-<src>-<tgt>.png.")
@click.option("--overwrite", is_flag=True, help="Replace the PNG if it is an earlier xmine plot.")
@precision_option()
def plot_cmd(encoder_name, projections, src_lang, tgt_lang, rows, data_dir, out, overwrite, device, precision,
             runtime, prompt, prompt_name):
    """PNG of a 2-D PCA of raw, meaning and language embeddings of one language pair.

    Raw embeddings cluster by language; a good meaning part overlaps across languages; the
    language part separates them again.
    """
    src_lang, tgt_lang = plot.plotted_languages(data_dir, src_lang, tgt_lang, out)
    encoder_name = encoder_of(encoder_name, projections)
    out_path = Path(out) if out else common.results_dir() / f"pca-{common.safe_name(encoder_name)}-{src_lang}-{tgt_lang}.png"
    with claim_output(out_path, kind=plot.PLOT_KIND, form="png", overwrite=overwrite,
                      inputs=[data_root(data_dir), *projections]):
        src, tgt, files = geometry.flores_pairs(data_dir, src_lang, rows=rows, pivot=tgt_lang)
        if len(src) < rows:
            click.echo(f"xmine: warning: --rows {rows}: FLORES-200 devtest holds {len(src):,} sentences a language; "
                       "plotting all of them", err=True)
        encoder, variants = setup(encoder_name, projections, device, precision, runtime, prompt, prompt_name)
        sep = plot.plot_pca(variants, src, tgt, out_path, src_label=src_lang, tgt_label=tgt_lang, title=(
            f"PCA of {encoder.name} embeddings: {len(src):,} FLORES-200 devtest sentences, {src_lang} and {tgt_lang}"),
            record=plot.plot_record(encoder, variants, files, languages=[src_lang, tgt_lang], rows=len(src)))
    for name, s in sep.items():
        click.echo(f"{name}: language separation {s:.2f} (centroid distance / mean spread)")
    click.echo(f"wrote {out_path}", err=True)


bench.add_command(mining_command.command)
bench.add_command(bucc.command)

COMMANDS = [bench, plot_cmd]
