"""The mining package's commands: `xmine mine`; `xmine score`, which scores and filters a bitext
one already has; and `xmine calibrate`, the command of `xmine.mining.calibrate`."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import click

from xmine.artefacts.directory import file_fingerprint
from xmine.artefacts.fileio import atomic_write_manifest
from xmine.artefacts.outputs import claim_output
from xmine.artefacts.input_artefacts import projection_encoder
from xmine.encoders import DEFAULT_ENCODER
from xmine.encoders.base import EncoderConfig
from xmine.encoders.loader import known_encoder_name
from xmine.encoders.options import precision_option
from xmine.errors import ConfigError
from xmine.io.stdin import with_local_inputs
from xmine.mining.bitext import BITEXT_FORMATS, Bitext, BitextFormat, parse_pairs_argument
from xmine.calibration import CALIBRATION_KIND
from xmine.mining.calibrate import (WEAK_CALIBRATION_F1, calibrate, flores_file, read_aligned, trained_on,
                                    usable_pairs)
from xmine.mining.cli_options import (approximate_option, conflicts_as_usage_errors, encoding_options, filter_options,
                                      format_of_directory, k_option, margin_option, output_options,
                                      pair_filter_options, search_options, selection_options, src_lang_option,
                                      tgt_lang_option, threshold_options)
from xmine.mining.config import (MineConfig, SearchConfig, SelectionConfig, SideInput, check_k_for_margin,
                                 check_score_cap, score_cap_on_margin)
from xmine.mining.pipeline import mine as run_mine
from xmine.mining.score_output import SCORE_FORMATS
from xmine.options import (NAME, ExistingPath, GivenPath, InputPath, OutputPath, input_format_options,
                           projection_option, quiet_option, ray_option)
from xmine.paths import resolve_data_dir

log = logging.getLogger(__name__)


@click.command("mine")
@click.argument("src", type=InputPath())
@click.argument("tgt", type=InputPath())
@output_options
@src_lang_option(help="Language code of SRC (recorded; checked against artefacts). Default: a store's own, else "
                      "none: the language filter and the language check are then off, and said to be.")
@tgt_lang_option(help="Language code of TGT. Default: as for SRC, a store's own, else none (not SRC's language).")
@click.option("--keep-field", "keep_fields", type=NAME, multiple=True, metavar="NAME",
              help="A field of the input records (dotted: meta.url) to carry with every pair, for each side as "
                   "src_NAME and tgt_NAME (dots become _): columns of jsonl, parquet and hf, props of tmx, "
                   "columns after the others in tsv, and each side's meta in OUT.meta (repeatable). Both sides "
                   "must be JSON Lines, Parquet, CSV/TSV or dataset corpora. Default: none.")
@click.option("--allow-same-input", is_flag=True,
              help="Mine even when SRC and TGT are the same file or directory (refused without this flag, "
                   "since it is usually a mistake): for one file holding both languages, each side's lines "
                   "chosen by the language filter of --src-lang and --tgt-lang. A line is never paired with "
                   "another line of its own side, so this finds no paraphrases or near-copies within one "
                   "language: a line on both sides (its language unclear) is removed by the pre-search cleaning.")
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
    (copied to a temporary file first, in $TMPDIR); an fsspec URL (s3://, hf://, gcs://, https://, ...) one corpus
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
            output=output, encoding=encoding, search=search, selection=selection,
            filters=replace(filters, pairs=score_cap_on_margin(selection, filters.pairs)),
            allow_same_input=allow_same_input)
    summary = run_mine(config, show_progress=not quiet)
    out = output.path
    t = summary["threshold"]
    # (the threshold's whole source, with its rule and advice, is the log line above and OUT.json's)
    kept = f"threshold {t['value']:g} ({t.get('source_brief', t['source'])})" if t["value"] is not None else t["source"]
    cap = t["score_max"]
    if "score_max" in summary["filters"]["active"]:
        kept += f"; score cap {cap['value']:g}"
    elif cap["value"] is None and summary["filters"]["enabled"] and "no score cap" not in kept:
        kept += "; no calibrated score cap"
    elif summary["filters"]["enabled"] and "score_max" not in summary["filters"]["disabled"]:
        kept += f"; score cap {cap['value']:g} {cap['source']}"
    for note in t.get("language_notes", []):
        kept += f"; {note['summary']}"
    if "few_neighbours" in t:
        kept += "; too few sentences for k neighbours, see above"
    if "cap_note" in t:
        kept += "; the score cap is not above the threshold, see above"
    if "estimate_note" in t:
        kept += f"; {t['estimate_summary']}, see above"
    if "other_k" in t:
        kept += f"; calibrated at k={t['other_k']['calibrated_k']}, see above"
    if "other_encoder" in t:
        kept += "; calibrated with other embeddings, see above"
    if "max_length_ratio" in summary:
        kept += (f"; {summary['max_length_ratio']['candidates_dropped'] or 0:,} candidate pairs over "
                 f"--max-length-ratio {summary['max_length_ratio']['bound']:g} dropped before matching")
    removed = summary["filters"]["removed"]
    if removed:
        kept += "; filtered out " + ", ".join(f"{n:,} {rule}" for rule, n in removed.items() if n) if any(
            removed.values()) else "; no pair filtered out"
    searched = [summary[role]["mined_rows"] for role in ("src", "tgt")]
    # what the length bounds, the language filter and the cleaning left (was: only the unique counts)
    rows = ("" if searched == [summary["src"]["unique"], summary["tgt"]["unique"]]
            else f"{searched[0]:,} x {searched[1]:,} searched; ")
    pairs = f"{summary['pairs']:,} pair" + ("" if summary["pairs"] == 1 else "s")
    click.echo(f"mined {pairs} from {summary['src']['unique']:,} x {summary['tgt']['unique']:,} "
               f"unique sentences ({rows}{summary['search']}; {_before_search(summary)}; {kept}) -> {out}", err=True)


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


@click.command("score")
@click.argument("pairs", required=False)
@click.option("--src", "src_file", type=InputPath(), default=None,
              help="A Moses bitext's source file (with --tgt; or PAIRS as SRC_FILE:TGT_FILE), or the embedding "
                   "store of that file (xmine embed, of vectors made elsewhere too), the target's as --tgt.")
@click.option("--tgt", "tgt_file", type=InputPath(), default=None,
              help="A Moses bitext's target file, line-aligned with --src.")
@click.option("-o", "--out", required=True, type=OutputPath(path_type=Path),
              help="Output: the bitext's rows in their order with the columns cosine, margin, keep (1/0 in "
                   "TSV/CSV, true/false in JSON Lines, Parquet and datasets) and rule (the rule that dropped the "
                   "pair) added; a summary with the counts goes to OUT.json. A name ending in .gz is written "
                   "gzip-compressed (tsv, csv, jsonl). Replaced only with --overwrite when it is an earlier score "
                   "result.")
@click.option("--format", "output_format", type=click.Choice(SCORE_FORMATS), default=None,
              help="tsv (a TSV/CSV input's own columns, else src and tgt, then the score columns), csv, jsonl, "
                   "parquet or hf (a Hugging Face save_to_disk folder): a JSON Lines, Parquet or dataset input's "
                   "records with the score fields. Default: by OUT's extension (.csv, .jsonl/.ndjson, .parquet; an "
                   "existing directory: hf; else tsv).")
@click.option("--pairs-format", type=click.Choice(("auto",) + BITEXT_FORMATS), default="auto", show_default=True,
              help="How to read PAIRS: auto = by extension (.csv; .jsonl/.ndjson/.json; .parquet; a dataset "
                   "folder: hf; anything else: tsv, one pair a line, tab-separated, no quoting).")
@click.option("--src-field", "--src-column", "src_field", type=NAME, default=None,
              help="The source text: tsv/csv, a 1-based column number or (with a header) a column name "
                   "[default: 1]; jsonl/parquet/hf, a dotted field [default: the source language's entry "
                   "of a 'translation' object, else 'src'].")
@click.option("--tgt-field", "--tgt-column", "tgt_field", type=NAME, default=None,
              help="The target text, likewise [default: column 2; the target's 'translation' entry, else 'tgt'].")
@click.option("--header/--no-header", default=None,
              help="tsv/csv: the first line names the columns [default: csv yes, tsv no].")
@click.option("--split", "hf_split", default=None, help="hf: the split to read (default: the only one; a DatasetDict of several needs it).")
@click.option("--kept-only", is_flag=True, help="Write only the pairs that are kept.")
@click.option("--overwrite", is_flag=True, help="Replace OUT (and OUT.json) if it is an earlier xmine score result.")
@src_lang_option(help="Language of the source side (the script and language filters judge it by this). Default: "
                      "a store's own, or the one recorded by the mining run whose output PAIRS is, else none.")
@tgt_lang_option(help="Language of the target side. Default: as for the source side.")
@click.option("--src-corpus", type=ExistingPath(), default=None,
              help="A source-language corpus, embedding store or index whose sentences form each target's "
                   "neighbourhood (default: the bitext's own sources).")
@click.option("--tgt-corpus", type=ExistingPath(), default=None,
              help="A target-language corpus, store or index forming each source's neighbourhood (default: the "
                   "bitext's own targets).")
@k_option(help="Neighbours whose mean cosine forms each side's margin neighbourhood (as in xmine mine).")
@margin_option(help="ratio = cos / m, distance = cos - m, absolute = cos (m: the mean of both sides' k nearest "
                    "cosines; see xmine mine --help). Default: as xmine mine (the space's calibrated margin with "
                    "the calibrated threshold, else ratio).")
@threshold_options(
    "Keep pairs whose margin is at least this. Default: the space's calibrated threshold, as xmine mine uses "
    "it, at --operating-point (the shipped projection's or raw me5-small/use-m3's, or that of --calibration). "
    "A space without a calibration (your own encoder or projection) drops no pair for its score, said in a "
    "notice: xmine mine estimates a threshold from a run's candidates, which a bitext's own pairs are not; "
    "xmine calibrate makes a record for --calibration. 'none': no threshold. OUT.json records which, and why. "
    "Scores are compared unrounded (printed to 6 decimals).")
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
    (s3://, hf://, https://, ...), copied as it streams, its URL recorded. The Moses pair may be the
    two files' embedding stores (xmine embed, of vectors made elsewhere too): pair i is line i of
    both, scored with the stores' vectors, nothing encoded. Each pair gets its cosine and
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
        pair_filters = score_cap_on_margin(selection, pair_filters)
        check_score_cap(selection, pair_filters)  # (score_bitext checks again: as usage errors here)
        check_k_for_margin(SearchConfig(k=k), selection)
    summary = score_bitext(bitext, out=out, src_lang=src_lang, tgt_lang=tgt_lang, encoding=encoding,
                           search=SearchConfig(k=k, approximate=approximate, ray=ray_address), selection=selection,
                           filters=pair_filters, src_corpus=src_corpus, tgt_corpus=tgt_corpus, kept_only=kept_only,
                           output_format=format_of_directory(output_format, out), overwrite=overwrite,
                           keep_work=keep_work, show_progress=not quiet)
    t = summary["threshold"]
    rule = f"threshold {t['value']:g} ({t.get('source_brief', t['source'])})" if t["value"] is not None else t["source"]
    for note in t.get("language_notes", []):
        rule += f"; {note['summary']}"
    if "few_neighbours" in t:
        rule += "; too few sentences for k neighbours, see above"
    if "cap_note" in t:
        rule += "; the score cap is not above the threshold, see above"
    if "estimate_note" in t:
        rule += f"; {t['estimate_summary']}, see above"
    if "other_k" in t:
        rule += f"; calibrated at k={t['other_k']['calibrated_k']}, see above"
    if "other_encoder" in t:
        rule += "; calibrated with other embeddings, see above"
    dropped = ", ".join(f"{n:,} {name}" for name, n in summary["dropped"].items() if n) or "none"
    click.echo(f"kept {summary['kept']:,} of {summary['pairs']:,} pairs ({rule}; dropped: {dropped}) -> {out}",
               err=True)


@click.command("calibrate")
@click.option("--encoder", type=NAME, default=None,
              help="Encoder of the space to calibrate (default: the one a --projection DIR was trained on, else "
                   "me5-small).")
@projection_option("of the space to calibrate")
@src_lang_option(required=True, help="Source language: a FLORES-200 code (deu_Latn) or ISO 639-1/3.")
@tgt_lang_option(required=True, help="Target language.")
@click.option("--gold", nargs=2, type=ExistingPath(dir_okay=False), default=None,
              metavar="SRC TGT", help="Your own line-aligned translations (>= 500 pairs) instead of FLORES-200.")
@click.option("--data-dir", type=GivenPath(file_okay=False, path_type=Path), default=None,
              help="Folder of the data sets (holding parallel/flores200/devtest); default: $XMINE_DATA or "
                   "../shared/data beside the checkout.")
@k_option(help="Neighbours of the margin, as mine's -k (2 or more: with 1, a pair's neighbour is itself).")
@click.option("-o", "--out", required=True, type=GivenPath(path_type=Path),
              help="Calibration record to write (JSON); `xmine mine --calibration OUT` uses it.")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it is an earlier calibration record.")
@precision_option()
@quiet_option(help="No progress bars (the thresholds found are still printed).")
def calibrate_command(encoder, projection, src_lang, tgt_lang, gold, data_dir, k, out, overwrite, device, precision,
                      runtime, prompt, prompt_name, quiet):
    """Measure the mining thresholds (balanced and precision-first, per margin) and the score cap of
    a space for one language pair: a space xmine has no calibration for (an encoder you bring, or a
    projection you trained), or a shipped one for a language its encoder knows poorly, whose
    translations score below what the shipped defaults keep (docs/mining.md).

    Translations are hidden among distractors (a fifth of the pairs are the gold; FLORES-200
    devtest for the language pair, or --gold), mined exactly, and the thresholds read off the
    precision and recall of what was mined. Pass the record to `xmine mine --calibration`, which
    mines in the margin the record names: distance, in which one corpus's threshold transfers best
    to another (docs/mining.md). Calibrate with the -k, --prompt (or --prompt-name) you mine with:
    margins over other neighbours, or embeddings of another prompt, are on another scale."""
    # (a folder by its absolute path, as stores record it; a projection's own encoder where none is named: was
    # me5-small, and a use-m3 projection refused once FLORES-200 was encoded)
    encoder = known_encoder_name(encoder) or projection_encoder(projection) or DEFAULT_ENCODER
    if gold is not None:
        if data_dir is not None:  # (was: read and dropped)
            raise click.UsageError("--data-dir is where FLORES-200 is read from; with --gold it is not read: "
                                   "give one of them")
        inputs, data = list(gold), {"source": "gold pairs", "files": [str(p) for p in gold]}
    else:
        flores = resolve_data_dir(data_dir, needs="parallel/flores200/devtest",
                                  how_to_get="Get FLORES-200 devtest (github.com/facebookresearch/flores, "
                                             "flores200_dataset/devtest) into parallel/flores200/devtest/.")
        inputs = [flores_file(flores, lang, other=" or your own --gold pairs") for lang in (src_lang, tgt_lang)]
        if inputs[0] == inputs[1]:
            raise click.UsageError(f"--src-lang {src_lang} and --tgt-lang {tgt_lang} are one FLORES-200 language "
                                   f"({inputs[0].name}): its pairs would be each sentence with itself; calibrate a "
                                   "language pair")
        data = {"source": "FLORES-200 devtest", "files": [p.name for p in inputs]}
    data["inputs"] = [file_fingerprint(p) for p in inputs]  # (was: the names alone, no folder, size or sha256)
    try:  # too few pairs, or copies: said with the files, before anything is claimed or encoded
        pairs = usable_pairs(read_aligned(*inputs))
    except ConfigError as e:
        raise ConfigError(f"{inputs[0]} and {inputs[1]}: {e}") from None
    with claim_output(out, kind=CALIBRATION_KIND, form="json", inputs=inputs, overwrite=overwrite):
        record = calibrate(pairs, encoder=encoder, projection=projection, src_lang=src_lang, tgt_lang=tgt_lang,
                           k=k, data=data, encoder_config=EncoderConfig(name=encoder, precision=precision,
                                                                        runtime=runtime, prompt=prompt,
                                                                        prompt_name=prompt_name, device=device),
                           show_progress=not quiet)
        if not record["operating_points"]:  # (was: a record of no threshold written, which mine read as none)
            raise ConfigError(f"{inputs[0]} and {inputs[1]}: no threshold: in neither margin does a gold pair score "
                              f"above an ordinary pair's, so {encoder} does not align these pairs (`xmine encoders "
                              f"--check {encoder}` says whether it aligns languages); nothing written")
        record["data"]["projection_trained_on"] = trained_on(record["space"]["projection"], inputs)
        atomic_write_manifest(out, record)  # ends with its own checksum: mine refuses an edited record
    best = max((v["f1"] for found in record["measured"].values() for v in found.values()), default=0.0)
    if record["data"]["projection_trained_on"]:  # (was: unsaid)
        log.warning(f"the projection {record['space']['projection']} was trained on pairs from "
                    f"{' and '.join(record['data']['projection_trained_on'])}: thresholds measured on its own training "
                    "pairs are optimistic (they score higher than pairs it never saw); calibrate on other pairs")
    if best < WEAK_CALIBRATION_F1:  # (was: a record of F1 0.05 written with "mine with --calibration" alone)
        log.warning(f"the best F1 on these pairs is {best:.2f}: {encoder} finds few of their translations (are the two "
                    f"files line-aligned? `xmine encoders --check {encoder}` says whether it aligns languages); its "
                    "thresholds keep mostly wrong pairs")
    for margin, found in record["measured"].items():
        line = ", ".join(f"{point} {v['threshold']:.4f} (P {v['precision']:.2f} R {v['recall']:.2f} F1 {v['f1']:.2f})"
                         for point, v in found.items())
        click.echo(f"{margin}: {line or 'no threshold (no gold pair scores above an ordinary pair)'}", err=True)
    click.echo(f"calibrated {encoder} ({'projection ' + record['space']['projection'] if record['space']['projection'] else 'raw'}) "
               f"on {record['data']['gold_pairs']} gold pairs -> {out}; mine with --calibration {out}"
               + (f" (it mines in the {record['default_margin']} margin)" if "default_margin" in record else ""),
               err=True)


COMMANDS = [mine, score, calibrate_command]
