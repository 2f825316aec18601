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

ENCODER_HELP = "Encoder: me5-small (default), use-m3, or any sentence-transformers name/path."
PROJECTION_HELP = (
    "A trained projection folder (xmine train). Repeat to compare several in one table; the raw "
    "encoder output is always the first row."
)
DATA_HELP = (
    "The data root (holding tatoeba/, mlqe/, sts2017/, parallel/, massive/) or the data set's own "
    "folder. Default: $XMINE_DATA, else ../shared/data beside the checkout."
)


def _claimed_out(fn: Callable) -> Callable:
    """Claim the result JSON (--out, or the default path) before the benchmark runs, so a refused
    output costs nothing: never an input, never a foreign file, replaced only with --overwrite."""
    task = fn.__name__.removesuffix("_cmd")

    @functools.wraps(fn)
    def run(*args, **kw):
        from xmine.outputs import claim_output

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
        click.option("--projection", "projections", multiple=True, type=click.Path(exists=True, file_okay=True),
                     help=PROJECTION_HELP),
        click.option("--data-dir", type=click.Path(file_okay=False), default=None, help=DATA_HELP),
        click.option("--out", type=click.Path(dir_okay=False), default=None,
                     help="Result JSON. Default: benchmarks/results/<task>-<encoder>[-quick].json."),
        click.option("--overwrite", is_flag=True, help="Replace the result JSON if it is an earlier xmine result."),
        click.option("--quick", is_flag=True, help="A small fixed subset, for smoke runs (seconds, not minutes)."),
        click.option("--device", default=None, help="Torch device for the encoder (cpu, cuda, ...). Default: auto."),
    ]
    for opt in reversed(options):
        fn = opt(fn)
    return fn


def _setup(encoder_name: str, projections: tuple[str, ...], device: str | None, parts=("meaning", "language")):
    from xmine.encoders import load_encoder

    encoder = load_encoder(encoder_name, device=device)
    return encoder, common.make_variants(encoder, projections, parts=parts)


def _finish(task, *, encoder, variants, out, quick, parameters, columns, rows, details, files, started,
            digits: int = 1) -> None:
    click.echo(common.format_table(columns, rows, digits=digits))
    out_path = Path(out) if out else common.default_out(task, encoder.name, quick=quick)
    common.write_result(
        out_path, task=task, encoder=encoder, variants=variants, data_files=files,
        parameters=parameters | {"quick": quick}, columns=columns, rows=rows, details=details,
        seconds=time.time() - started,
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
def tatoeba_cmd(encoder_name, projections, data_dir, out, quick, device, langs, max_pairs, margin, per_lang):
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
    encoder, variants = _setup(encoder_name, projections, device)
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
@click.option("--pairs", default=None,
              help="Locale pairs SRC:TGT, comma-separated (en-US:de-DE,de-DE:en-US), or 'all' (every "
                   "locale vs en-US, both ways). Default: FMDA's en-US<->de-DE, es-ES, ja-JP.")
@click.option("--partition", default="test", show_default=True, type=click.Choice(["train", "dev", "test"]),
              help="MASSIVE partition to retrieve in (FMDA: test, 2,974 utterances).")
@click.option("--max-rows", type=click.IntRange(min=2), default=None,
              help="Use only the first N shared ids (--quick: 300).")
def massive_cmd(encoder_name, projections, data_dir, out, quick, device, pairs, partition, max_rows):
    """MASSIVE cross-lingual retrieval accuracy@1 (%) per locale pair (FMDA Table 2)."""
    from xmine.benchmarks import massive

    started = time.time()
    if quick:
        max_rows = max_rows or massive.QUICK_ROWS
    folder = massive.locate(data_dir)
    pair_list = massive.parse_pairs(pairs, massive.available_locales(folder))
    encoder, variants = _setup(encoder_name, projections, device)
    details, rows = {}, []
    for v in variants:
        r = massive.evaluate_massive(v.embed, folder, pair_list, partition=partition, max_rows=max_rows)
        details[v.name] = r
        rows.append([v.name] + [r["per_pair"][f"{s}:{t}"]["acc"] for s, t in pair_list] + [r["average"]["acc"]])
    columns = ["variant"] + [f"{s}->{t}" for s, t in pair_list] + ["avg"]
    first = next(iter(details.values()))
    _finish("massive", encoder=encoder, variants=variants, out=out, quick=quick,
            parameters={"pairs": [f"{s}:{t}" for s, t in pair_list], "partition": partition, "max_rows": max_rows},
            columns=columns, rows=rows, details=details, files=first["files"], started=started)


@bench.command("qe")
@_common_options
@click.option("--pairs", default=None, help="Comma-separated WMT20 pairs. Default: en-de,en-zh,et-en,ne-en,ro-en,si-en.")
@click.option("--max-rows", type=click.IntRange(min=3), default=None, help="Use only the first N rows of each pair (--quick: 200).")
@click.option("--spearman", is_flag=True, help="Print Spearman per pair too (always in the JSON).")
def qe_cmd(encoder_name, projections, data_dir, out, quick, device, pairs, max_rows, spearman):
    """WMT20 QE: Pearson r (x100) of cos(source, translation) with human z_mean on test20.

    Unsupervised, as DREAM / MEAT / SEED report it; for a projection its meaning part is scored.
    """
    from xmine.benchmarks import qe

    started = time.time()
    pair_list = common.parse_list(pairs) or list(qe.PAIRS)
    if quick:
        max_rows = max_rows or qe.QUICK_ROWS
    qe.locate(data_dir)
    encoder, variants = _setup(encoder_name, projections, device, parts=("meaning",))
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
def sts_cmd(encoder_name, projections, data_dir, out, quick, device, tracks, metric):
    """SemEval-2017 STS: Pearson / Spearman (x100) of cosine vs gold, per track and averaged.

    --quick runs the two smallest-cost tracks (track5 en-en, track4a es-en).
    """
    from xmine.benchmarks import sts

    started = time.time()
    track_list = common.parse_list(tracks) or (["track5", "track4a"] if quick else list(sts.TRACKS))
    sts.locate(data_dir)
    encoder, variants = _setup(encoder_name, projections, device, parts=("meaning", "language"))
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
def geometry_cmd(encoder_name, projections, data_dir, out, quick, device, langs, pivot, rows):
    """Alignment and uniformity (Wang & Isola 2020) of raw / meaning / language embeddings.

    Alignment: mean squared distance of translation pairs (lower = closer). Uniformity: log mean
    exp(-2 squared distance) over all sentence pairs (lower = more evenly spread).
    """
    from xmine.benchmarks import geometry

    started = time.time()
    lang_list = common.parse_list(langs) or (list(geometry.DEFAULT_LANGS[:3]) if quick else list(geometry.DEFAULT_LANGS))
    rows = rows or (geometry.QUICK_ROWS if quick else geometry.DEFAULT_ROWS)
    geometry.locate(data_dir)
    encoder, variants = _setup(encoder_name, projections, device)
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
def plot_cmd(encoder_name, projections, src_lang, tgt_lang, rows, data_dir, out, overwrite, device):
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
        encoder, variants = _setup(encoder_name, projections, device)
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
