"""`xmine score`: score and filter a bitext one already has."""

from __future__ import annotations

from pathlib import Path

import click

from xmine.mining.bitext import BITEXT_FORMATS, Bitext, BitextFormat, parse_pairs_argument
from xmine.mining.cli_options import (approximate_option, conflicts_as_usage_errors, encoding_options, k_option,
                                      margin_option, pair_filter_options, src_lang_option, tgt_lang_option,
                                      threshold_options)
from xmine.mining.config import SearchConfig, SelectionConfig
from xmine.mining.score_output import SCORE_FORMATS
from xmine.options import InputPath, quiet_option, ray_option
from xmine.io.stdin import with_local_inputs


@click.command("score")
@click.argument("pairs", required=False)
@click.option("--src", "src_file", type=InputPath(), default=None,
              help="A Moses bitext's source file (with --tgt; or PAIRS as SRC_FILE:TGT_FILE).")
@click.option("--tgt", "tgt_file", type=InputPath(), default=None,
              help="A Moses bitext's target file, line-aligned with --src.")
@click.option("-o", "--out", required=True, type=click.Path(path_type=Path),
              help="Output: the bitext's rows in their order with the columns cosine, margin, keep (1/0) and "
                   "rule (the rule that dropped the pair) added; a summary with the counts goes to OUT.json. "
                   "Replaced only with --overwrite when it is an earlier score result.")
@click.option("--format", "output_format", type=click.Choice(SCORE_FORMATS), default=None,
              help="tsv (a TSV/CSV input's own columns, else src and tgt, then the score columns), csv, jsonl "
                   "or parquet (a JSON Lines, Parquet or dataset input's records with the score fields). "
                   "Default: by OUT's extension (.csv, .jsonl, .parquet, else tsv).")
@click.option("--pairs-format", type=click.Choice(("auto",) + BITEXT_FORMATS), default="auto", show_default=True,
              help="How to read PAIRS: auto = by extension (.csv; .jsonl/.ndjson/.json; .parquet; a dataset "
                   "folder: hf; anything else: tsv, one pair a line, tab-separated, no quoting).")
@click.option("--src-field", "--src-column", "src_field", default=None,
              help="The source text: tsv/csv, a 1-based column number or (with a header) a column name "
                   "[default: 1]; jsonl/parquet/hf, a dotted field [default: the source language's entry "
                   "of a 'translation' object, else 'src'].")
@click.option("--tgt-field", "--tgt-column", "tgt_field", default=None,
              help="The target text, likewise [default: column 2; the target's 'translation' entry, else 'tgt'].")
@click.option("--header/--no-header", default=None,
              help="tsv/csv: the first line names the columns [default: csv yes, tsv no].")
@click.option("--split", "hf_split", default=None, help="hf: the split to read (default: the only one, else train).")
@click.option("--kept-only", is_flag=True, help="Write only the pairs that are kept.")
@click.option("--overwrite", is_flag=True, help="Replace OUT (and OUT.json) if it is an earlier xmine score result.")
@src_lang_option(help="Language of the source side (the script and language filters judge it by this).")
@tgt_lang_option(help="Language of the target side.")
@click.option("--src-corpus", type=click.Path(exists=True, path_type=Path), default=None,
              help="A source-language corpus, embedding store or index whose sentences form each target's "
                   "neighbourhood (default: the bitext's own sources).")
@click.option("--tgt-corpus", type=click.Path(exists=True, path_type=Path), default=None,
              help="A target-language corpus, store or index forming each source's neighbourhood (default: the "
                   "bitext's own targets).")
@k_option(help="Neighbours whose mean cosine forms each side's margin neighbourhood (as in xmine mine).")
@margin_option(help="ratio = cos / m, distance = cos - m, absolute = cos (m: the mean of both sides' k nearest "
                    "cosines; see xmine mine --help).")
@threshold_options(
    "Keep pairs whose margin is at least this. Default: the threshold xmine mine uses in the same space, "
    "at --operating-point (the shipped projection's or raw me5-small/use-m3's calibrated one, or that of "
    "--calibration; a space without a calibration drops no pair for its score). 'none': no threshold. "
    "OUT.json records which, and why.")
@encoding_options(what="score", inputs=("corpus", "corpora"))
@approximate_option(help="Search the neighbourhoods with IVF indexes (as xmine mine --approximate) instead of exactly.")
@pair_filter_options
@click.option("--keep-work", is_flag=True, help="Keep OUT.work/ (the embedded sides, checkpoints) after success.")
@quiet_option(help="No progress bars (the one-line summary is still printed).")
@ray_option("the neighbourhood search, as xmine mine --ray does (exact: tiles of the product as tasks; "
            "--approximate: the index shards built and searched as tasks; the output byte for byte the one "
            "without --ray),")
@with_local_inputs("pairs", "src_file", "tgt_file")  # a URL: copied as it streams, its URL recorded
def score(pairs, src_file, tgt_file, out, output_format, pairs_format, src_field, tgt_field, header, hf_split,
          kept_only, overwrite, src_lang, tgt_lang, src_corpus, tgt_corpus, k, margin, threshold, calibration,
          operating_point, encoding, approximate, pair_filters, keep_work, quiet, ray_address):
    """Score every pair of an existing bitext and say which to keep.

    PAIRS is a TSV (one pair a line), CSV, JSON Lines or Parquet file, a Hugging Face dataset
    folder, or a Moses pair SRC_FILE:TGT_FILE (or --src/--tgt); a file may be an fsspec URL
    (s3://, hf://, https://, ...), copied as it streams, its URL recorded. Each pair gets its cosine and
    its margin against the neighbourhoods xmine mine would use (each source's k nearest targets
    and each target's k nearest sources, exact search, in the same space), then the first rule
    that drops it: empty (a side without text), threshold (margin below the threshold mine uses
    by default), or one of mine's pair filters (identical, score_max, script, urls, numbers,
    length_ratio, language). An interrupted run resumes from OUT.work/.
    """
    from xmine.mining.score import score_bitext

    paths = parse_pairs_argument(pairs, src_file, tgt_file)
    bitext = Bitext(paths, BitextFormat(format=pairs_format, src_field=src_field, tgt_field=tgt_field,
                                        header=header, split=hf_split), langs=(src_lang, tgt_lang))
    with conflicts_as_usage_errors():
        selection = SelectionConfig(margin=margin, threshold=threshold, operating_point=operating_point,
                                    calibration=calibration)
    summary = score_bitext(bitext, out=out, src_lang=src_lang, tgt_lang=tgt_lang, encoding=encoding,
                           search=SearchConfig(k=k, approximate=approximate, ray=ray_address), selection=selection,
                           filters=pair_filters, src_corpus=src_corpus, tgt_corpus=tgt_corpus, kept_only=kept_only,
                           output_format=output_format, overwrite=overwrite, keep_work=keep_work,
                           show_progress=not quiet)
    t = summary["threshold"]
    rule = f"threshold {t['value']:g} ({t['source']})" if t["value"] is not None else t["source"]
    dropped = ", ".join(f"{n:,} {name}" for name, n in summary["dropped"].items() if n) or "none"
    click.echo(f"kept {summary['kept']:,} of {summary['pairs']:,} pairs ({rule}; dropped: {dropped}) -> {out}",
               err=True)


COMMANDS = [score]
