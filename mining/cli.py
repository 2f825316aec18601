"""`xmine mine`."""

from __future__ import annotations

import click

from xmine.mining.cli_options import (conflicts_as_usage_errors, encoding_options, filter_options, output_options,
                                     pair_filter_options, search_options, selection_options, src_lang_option,
                                     tgt_lang_option)
from xmine.mining.config import MineConfig, SideInput
from xmine.mining.pipeline import mine as run_mine
from xmine.options import InputPath, input_format_options, quiet_option


@click.command("mine")
@click.argument("src", type=InputPath())
@click.argument("tgt", type=InputPath())
@output_options
@src_lang_option(help="Language code of SRC (recorded; checked against artefacts).")
@tgt_lang_option(help="Language code of TGT.")
@click.option("--keep-field", "keep_fields", multiple=True, metavar="NAME",
              help="A field of the input records (dotted: meta.url) to carry with every pair, for each side as "
                   "src_NAME and tgt_NAME (dots become _): columns of jsonl, parquet and hf, props of tmx, "
                   "columns after the others in tsv, and each side's meta in OUT.meta (repeatable). Both sides "
                   "must be JSON Lines, Parquet, CSV/TSV or dataset corpora.")
@click.option("--allow-same-input", is_flag=True,
              help="Mine even when SRC and TGT are the same file or directory (every sentence then pairs "
                   "with itself; refused without this flag, since it is usually a mistake).")
@input_format_options(per_side=True)
@selection_options
@search_options
@encoding_options(what="mine", inputs=("input", "inputs"))
@pair_filter_options
@filter_options
@quiet_option(help="No progress bars (the one-line summary is still printed).")
def mine(src, tgt, output, src_lang, tgt_lang, keep_fields, allow_same_input, input_format, selection, search,
         encoding, filters, quiet):
    """Mine parallel sentence pairs between SRC and TGT with margin-based scoring.

    SRC and TGT are each a corpus (a text file, one sentence a line, plain or compressed; JSON
    Lines, Parquet or a Hugging Face dataset: see --input-format), an embedding store directory
    (xmine embed) or an index directory (xmine build-index); '-' reads one side from standard input
    (copied into OUT.work/ first); an fsspec URL (s3://, hf://, gcs://, https://, ...) one corpus
    file (copied to a temporary file first, its URL and sha256 recorded). Text files are embedded into stores in OUT.work/ first. Stores
    are read block by block and sentences by offset, so memory does not grow with the corpora
    beyond the per-row state (a few hundred bytes a row: docs/scaling.md). Repeated sentences (64-bit hashes of the
    white-space-normalised text) are mined once. The exact search never holds the full similarity
    matrix; both searches checkpoint to OUT.work/: an interrupted run started again with the same
    command resumes. The options build the configs of xmine.mining.config (the Python API's too).
    """
    src_format, tgt_format = input_format
    with conflicts_as_usage_errors():  # checked before anything is claimed or encoded
        config = MineConfig(
            src=SideInput(path=src, lang=src_lang, input_format=src_format, keep_fields=keep_fields),
            tgt=SideInput(path=tgt, lang=tgt_lang, input_format=tgt_format, keep_fields=keep_fields),
            output=output, encoding=encoding, search=search, selection=selection, filters=filters,
            allow_same_input=allow_same_input)
    summary = run_mine(config, show_progress=not quiet)
    out = output.path
    t = summary["threshold"]
    kept = f"threshold {t['value']:g} ({t['source']})" if t["value"] is not None else t["source"]
    cap = t["score_max"]
    if "score_max" in summary["filters"]["active"]:
        kept += f"; score cap {cap['value']:g}"
    elif cap["value"] is None and summary["filters"]["enabled"] and "no score cap" not in kept:
        kept += f"; {cap['source']}"
    removed = summary["filters"]["removed"]
    if removed:
        kept += "; filtered out " + ", ".join(f"{n:,} {rule}" for rule, n in removed.items() if n) if any(
            removed.values()) else "; no pair filtered out"
    click.echo(f"mined {summary['pairs']:,} pairs from {summary['src']['unique']:,} x {summary['tgt']['unique']:,} "
               f"unique sentences ({summary['search']}; {_before_search(summary)}; {kept}) -> {out}", err=True)


def _before_search(summary: dict) -> str:
    """What the language filter and the pre-search cleaning removed, for the summary line."""
    lf = summary["lang_filter"]
    if lf["on"]:
        gone = (f"language filter removed {summary['src']['other_language']:,} src, "
                f"{summary['tgt']['other_language']:,} tgt sentences")
    else:
        gone = f"language filter off: {lf['source'].removeprefix('default, off: ')}"
    removed = (summary.get("pre_search") or {}).get("removed") or {}
    if removed:
        src, tgt = (removed.get(role, {}) for role in ("src", "tgt"))
        gone += f"; pre-clean removed {sum(src.values()):,} src, {sum(tgt.values()):,} tgt sentences"
        # by step (e.g. `copies`: every line of a file mined against its own copy)
        by_step = [f"{step} {src.get(step, 0):,} src / {tgt.get(step, 0):,} tgt" for step in dict.fromkeys([*src, *tgt])
                   if src.get(step) or tgt.get(step)]
        if by_step:
            gone += f" ({', '.join(by_step)})"
    return gone


COMMANDS = [mine]
