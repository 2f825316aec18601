"""`xmine mine`."""

from __future__ import annotations

from pathlib import Path

import click

from xmine.cluster import ray_option
from xmine.encoders.options import precision_option
from xmine.mining.approximate import INDEX_TYPES
from xmine.mining.knn import DEFAULT_BLOCK_COLS, DEFAULT_BLOCK_ROWS
from xmine.mining.cli_options import pair_filter_options
from xmine.mining.defaults import DEFAULT_OPERATING_POINT, OPERATING_POINTS
from xmine.mining.presearch import STEPS as PRE_SEARCH_STEPS
from xmine.mining.margin import MARGINS
from xmine.mining.products import PRODUCTS
from xmine.mining.select import RETRIEVALS
from xmine.mining.writers import OUTPUT_FORMATS
from xmine.options import LANG, Finite, input_format_options


class ThresholdType(click.ParamType):
    """A finite number, or 'none' (keep every pair, even where a projection has a calibrated default)."""

    name = "threshold"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower() == "none":
            return "none"
        return Finite().convert(value, param, ctx)


@click.command("mine")
@click.argument("src", type=click.Path(exists=True, allow_dash=True, path_type=Path))
@click.argument("tgt", type=click.Path(exists=True, allow_dash=True, path_type=Path))
@click.option("-o", "--out", required=True, type=click.Path(path_type=Path),
              help="Output, highest score first (written atomically); TSV by default: score<TAB>src<TAB>tgt "
                   "(gzip when OUT ends in .gz). A summary with provenance goes to OUT.json, which also marks OUT "
                   "as xmine's. An existing OUT is replaced only if it is an earlier mining result and "
                   "--overwrite is given.")
@click.option("--format", "output_format", type=click.Choice(OUTPUT_FORMATS), default=None,
              help="tsv; moses (OUT.src and OUT.tgt, line-aligned); jsonl, parquet or hf (a Hugging Face "
                   "save_to_disk folder OUT with a dataset card): one row a pair with a translation dict keyed by "
                   "the language codes, the score, and where each side came from (file, line/row, record id). "
                   "Default: by OUT's extension (.jsonl, .parquet, else tsv).")
@click.option("--overwrite", is_flag=True, help="Replace OUT (and OUT.json, OUT.meta) if it is an earlier xmine mining result.")
@click.option("--src-lang", type=LANG, default=None, help="Language code of SRC (recorded; checked against artefacts).")
@click.option("--tgt-lang", type=LANG, default=None, help="Language code of TGT.")
@click.option("-k", "--k", "k", type=click.IntRange(min=1), default=4, show_default=True,
              help="Neighbours per sentence: the candidates considered and the neighbourhood whose mean "
                   "cosine forms the margin.")
@click.option("--margin", type=click.Choice(MARGINS), default="ratio", show_default=True,
              help="ratio = cos / m (about 1.0 for an ordinary pair; translations usually 1.05-1.3); "
                   "distance = cos - m (about 0; translations ~0.05-0.2); absolute = plain cosine "
                   "(-1..1; no hubness correction). m = mean of the k nearest cosines of both sentences.")
@click.option("--retrieval", type=click.Choice(RETRIEVALS), default="max", show_default=True,
              help="max: union of every source's and every target's best candidate, sorted by score, "
                   "then greedy one-to-one; fwd: each source's best target; bwd: each target's best "
                   "source; intersect: pairs that are each other's best in both directions.")
@click.option("--threshold", type=ThresholdType(), default=None, metavar="NUMBER|none",
              help="Keep pairs scoring at least this, in every retrieval mode. Default: the threshold "
                   "calibrated for the space mined in (the shipped projection: its SHIPPED.json; raw "
                   "me5-small or use-m3 embeddings: xmine/mining/calibration.json), for the margin in use and "
                   "--operating-point (recorded in OUT.json and the summary line; the balanced ratio "
                   "threshold of a shipped space is lowered where the run's candidates have few mutual best "
                   "pairs besides the translations, as in templated corpora: docs/mining.md); a space without a "
                   "calibration (your own projection, another encoder) keeps every pair, and says so: "
                   "measure one with `xmine calibrate` and pass --calibration. 'none' keeps every pair. "
                   "Scores are on each space's own scale (docs/mining.md).")
@click.option("--calibration", type=click.Path(exists=True, dir_okay=False), default=None, metavar="RECORD",
              help="A record of `xmine calibrate` for the space mined in (your encoder or projection): its "
                   "thresholds and score cap are the defaults, at --operating-point. A record of another "
                   "encoder or projection is refused.")
@click.option("--operating-point", type=click.Choice(OPERATING_POINTS), default=None,
              help="Which calibrated default threshold: balanced (default; the best F1 at a mean precision "
                   ">= 0.85 on the calibration sets) or precision (a mean precision >= 0.95 on them, fewer "
                   "pairs: for MT training data). Not with --threshold.")
@click.option("--min-length", type=click.IntRange(min=0), default=0, show_default=True,
              help="Sentences shorter than this many characters are not mined.")
@click.option("--max-length", type=click.IntRange(min=1), default=None, help="Sentences longer than this many characters are not mined.")
@click.option("--max-length-ratio", type=Finite(1), default=None,
              help="Drop candidate pairs whose character lengths differ by more than this factor "
                   "(e.g. 2.0), before one-to-one matching.")
@click.option("--encoder", default=None,
              help="Encoder for text inputs (default: the artefacts' encoder, else me5-small).")
@click.option("--projection", default=None, metavar="default|none|DIR",
              help="Projection to mine in: 'default' (the projection shipped with xmine for "
                   "the default encoder me5-small, the implicit default once its SHIPPED.json says is_default; any other "
                   "encoder gets raw embeddings, said in a log line), "
                   "'none' (raw encoder embeddings), or a projection directory (xmine train). With a store or "
                   "index input, the default follows the projection that input was made with.")
@click.option("--approximate", is_flag=True,
              help="Search neighbours with IVF / IVF-PQ indexes built in OUT.work/ (one quantiser trained on "
                   "both sides, shards, resumable) instead of the exact blocked product; margin, one-to-one "
                   "and filters are the same. For corpora where exact search is too slow (its cost grows "
                   "with n x m). A side that is an index directory is always searched through its index.")
@click.option("--index-type", type=click.Choice(INDEX_TYPES), default="ivfpqfs", show_default=True,
              help="With --approximate: ivfpqfs = IVF + 4-bit product quantisation with fast-scan kernels "
                   "(pq-m/2 bytes a row, fastest); ivfpq = IVF + 8-bit PQ (pq-m bytes, more accurate); "
                   "ivf = IVF with exact vectors (4 x dim bytes a row, recall limited only by nprobe).")
@click.option("--nlist", type=click.IntRange(min=1), default=None,
              help="With --approximate: IVF lists (default: by corpus size, 4..16 x sqrt(N), at most 4096).")
@click.option("--nprobe", type=click.IntRange(min=1), default=None,
              help="With --approximate: lists visited per query (default: max(32, nlist/16)). Higher: "
                   "better recall, slower; benchmarks/RESULTS.md has recall against exact mining.")
@click.option("--pq-m", type=click.IntRange(min=1), default=64, show_default=True,
              help="With --approximate and a PQ index type: sub-quantisers (must divide the dimension).")
@click.option("--index-shard-rows", type=click.IntRange(min=1), default=None,
              help="With --approximate: rows per index shard, searched one at a time (bounds the index "
                   "memory; default: one shard per side).")
@click.option("--refine/--no-refine", default=True, show_default=True,
              help="With --approximate and a threshold: search the sentences of every candidate pair at or "
                   "above it again, in 2 x nprobe lists with their stored vectors, so that neighbours the "
                   "index missed do not lift margins (without it, approximate mining keeps pairs exact "
                   "mining drops; benchmarks/RESULTS.md). Costs a search of those sentences only.")
@click.option("--allow-same-input", is_flag=True,
              help="Mine even when SRC and TGT are the same file or directory (every sentence then pairs "
                   "with itself; refused without this flag, since it is usually a mistake).")
@click.option("--line-numbers", is_flag=True, help="Add src and tgt line numbers as columns 4 and 5.")
@click.option("--meta", is_flag=True,
              help="Also write OUT.meta (stopes style): score, src file:line, tgt file:line, direction, then "
                   "the --keep-field values.")
@click.option("--keep-field", "keep_fields", multiple=True, metavar="NAME",
              help="A field of the input records (dotted: meta.url) to carry with every pair, for each side as "
                   "src_NAME and tgt_NAME (dots become _): columns of jsonl, parquet and hf, props of tmx, "
                   "columns after the others in tsv and OUT.meta (repeatable). Both sides must be JSON Lines, "
                   "Parquet, CSV/TSV or dataset corpora.")
@click.option("--block-rows", type=click.IntRange(min=1), default=DEFAULT_BLOCK_ROWS, show_default=True,
              help="Source rows per block of the exact product (memory ~ block-rows x block-cols x 4 bytes).")
@click.option("--block-cols", type=click.IntRange(min=1), default=DEFAULT_BLOCK_COLS, show_default=True, help="Target rows per block.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Threads sharing the exact product, one BLAS thread each (default: as many as BLAS "
                   "uses, normally one per core).")
@click.option("--product", type=click.Choice(PRODUCTS), default="auto", show_default=True,
              help="Block product that finds candidates for the exact search: auto = cuda if torch sees "
                   "a GPU, else bf16 on CPUs with avx512_bf16 or AMX, else fp32. Every candidate is "
                   "rescored exactly, with a proven bound on the product's error: the output is the "
                   "same byte for byte whatever the product. cuda without a GPU is an error.")
@pair_filter_options
@click.option("--lang-filter/--no-lang-filter", default=None,
              help="Before mining, drop the sentences of each side that --lid identifies as another "
                   "language than --src-lang / --tgt-lang with confidence >= the language's threshold "
                   "(--lid-min-confidence; close languages such as "
                   "hr/sr/bs or ms/id count as one; unsure lines are kept). Removes copies of the other "
                   "side and third-language lines before they can take a translation's place. Default: on "
                   "when --src-lang and --tgt-lang are given and --lid knows both, else off; --lang-filter "
                   "requires them. OUT.json's lang_filter says whether it ran; src/tgt.other_language count "
                   "the sentences dropped.")
@click.option("--pre-clean/--no-pre-clean", default=True, show_default=True,
              help="Before the search (xmine.mining.presearch): drop rows with no letters (their pairs "
                   "the identical filter drops anyway; only while it is on), mine near-duplicates (equal "
                   "but for digits, punctuation, case) once through their first row, and keep a text present "
                   "on both sides only on the side --lid identifies it as (with --src-lang and --tgt-lang; "
                   "else, or when it fits neither, it leaves both). A copy of one side in the other then "
                   "cannot take a translation's place. OUT.json's pre_search counts what each step removed.")
@click.option("--no-pre-clean-step", "no_pre_clean_step", multiple=True, type=click.Choice(PRE_SEARCH_STEPS),
              metavar="STEP", help=f"Switch one pre-search step off (repeatable): {', '.join(PRE_SEARCH_STEPS)}.")
@click.option("--keep-filtered", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the pairs the filters dropped here: score<TAB>src<TAB>tgt<TAB>rule "
                   "(atomically; replaced only with --overwrite, like OUT).")
@precision_option(default_from="the precision of the store or index inputs")
@click.option("--keep-work", is_flag=True, help="Keep OUT.work/ (checkpoints, built indexes) after success.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars (the one-line summary is still printed).")
@input_format_options(per_side=True)
@ray_option("the neighbour search: exact, tiles of the product as tasks; --approximate, the index shards "
            "built and searched (query blocks x shards) as tasks; an index side, its shards searched by "
            "query blocks as tasks; top-k merged per row in every case. The TSV is byte for byte the one "
            "without --ray")
def mine(src, tgt, out, overwrite, src_lang, tgt_lang, k, margin, retrieval, threshold, calibration, operating_point,
         min_length, max_length,
         max_length_ratio, encoder, projection, approximate, index_type, nlist, nprobe, pq_m, index_shard_rows,
         refine, allow_same_input, line_numbers, meta, block_rows, block_cols, workers, product, pair_filters,
         lang_filter, pre_clean, no_pre_clean_step, keep_filtered, keep_fields, precision,
         keep_work, quiet, ray_address, output_format, input_format):
    """Mine parallel sentence pairs between SRC and TGT with margin-based scoring.

    SRC and TGT are each a corpus (a text file, one sentence a line, plain or compressed; JSON
    Lines, Parquet or a Hugging Face dataset: see --input-format), an embedding store directory
    (xmine embed) or an index directory (xmine build-index); '-' reads one side from standard input
    (copied into OUT.work/ first). Text files are embedded into stores in OUT.work/ first. Stores
    are read block by block and sentences by offset, so memory does not grow with the corpora
    beyond the per-row state (a few hundred bytes a row: docs/scaling.md). Repeated sentences (64-bit hashes of the
    white-space-normalised text) are mined once. The exact search never holds the full similarity
    matrix; both searches checkpoint to OUT.work/: an interrupted run started again with the same
    command resumes.
    """
    from xmine.mining.approximate import ApproximateConfig
    from xmine.mining.pipeline import mine as _mine
    from xmine.mining.presearch import PreSearchConfig
    from xmine.mining.select import MiningConfig

    if operating_point is not None and threshold is not None:
        raise click.UsageError("give --threshold or --operating-point, not both")
    config = MiningConfig(k=k, margin=margin, retrieval=retrieval, threshold=None if threshold == "none" else threshold,
                          max_length_ratio=max_length_ratio, min_length=min_length, max_length=max_length,
                          block_rows=block_rows, block_cols=block_cols, workers=workers, product=product)
    if lang_filter:  # checked before anything is claimed or encoded
        _check_lang_filter(src_lang, tgt_lang, pair_filters.lid)
    approx = ApproximateConfig(index_type=index_type, nlist=nlist, nprobe=nprobe, pq_m=pq_m,
                               shard_rows=index_shard_rows, refine=refine)
    summary = _mine(src, tgt, out=out, src_lang=src_lang, tgt_lang=tgt_lang, config=config, encoder=encoder,
                    precision=precision, projection=projection, approximate=approximate, approximate_config=approx,
                    line_numbers=line_numbers, meta=meta, keep_work=keep_work, overwrite=overwrite, ray=ray_address,
                    default_threshold=threshold != "none", operating_point=operating_point or DEFAULT_OPERATING_POINT,
                    calibration=calibration,
                    show_progress=not quiet, allow_same_input=allow_same_input,
                    output_format=output_format, input_format=input_format, filters=pair_filters,
                    keep_filtered=keep_filtered, lang_filter=lang_filter, keep_fields=keep_fields,
                    pre_clean=PreSearchConfig(enabled=pre_clean, disabled=frozenset(no_pre_clean_step)))
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
        gone = f"language filter removed {summary['src']['other_language']:,} src, " \
               f"{summary['tgt']['other_language']:,} tgt sentences"
    else:
        gone = f"language filter off: {lf['source'].removeprefix('default, off: ')}"
    removed = (summary.get("pre_search") or {}).get("removed") or {}
    counts = [sum(removed.get(role, {}).values()) for role in ("src", "tgt")]
    if removed:
        gone += f"; pre-clean removed {counts[0]:,} src, {counts[1]:,} tgt sentences"
        # by step (e.g. `copies`: every line of a file mined against its own copy)
        steps = dict.fromkeys(step for side in removed.values() for step in side)
        by_step = [f"{step} {removed.get('src', {}).get(step, 0):,} src / {removed.get('tgt', {}).get(step, 0):,} tgt"
                   for step in steps if removed.get("src", {}).get(step) or removed.get("tgt", {}).get(step)]
        if by_step:
            gone += f" ({', '.join(by_step)})"
    return gone


def _check_lang_filter(src_lang, tgt_lang, lid) -> None:
    from xmine.errors import ConfigError
    from xmine.mining.langid import supported_languages

    missing = [opt for opt, lang in (("--src-lang", src_lang), ("--tgt-lang", tgt_lang)) if not lang]
    if missing:
        raise click.UsageError(f"--lang-filter needs the language of each side: give {' and '.join(missing)}")
    known = supported_languages(lid)
    from xmine.langs import normalize_lang

    for lang in (src_lang, tgt_lang):  # the user's codes (the LANG option type); identification's are canonical
        if normalize_lang(lang) not in known:
            raise ConfigError(f"--lang-filter: language identification '{lid}' does not know language {lang!r}")


COMMANDS = [mine]
