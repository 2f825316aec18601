"""What a mining run is asked to do, as keyword-only config dataclasses (fairseq2-style): one per
concern, each checked when it is made, and `MineConfig` holding them all for one run.

- `SideInput`: one side to mine (path, language, how a corpus is read, record fields to carry);
- `EncodingConfig`: the space mined in (encoder, precision, projection);
- `SearchConfig`: the neighbour search (k, exact or approximate, its product, blocks, index);
- `SelectionConfig`: margin, retrieval and the threshold (given, or calibrated per operating point);
- `FilterConfig`: what is removed before the search (lengths, language, pre-search cleaning)
  and after it (the pair filters, `xmine.mining.filters.PairFilterConfig`);
- `OutputConfig`: where and how the result is written.

`xmine mine` builds them from its options (mining/cli.py), `xmine.mine` from its keywords or
takes them as they are (mining/api.py), and `xmine.mining.pipeline.mine` runs a `MineConfig`;
`xmine score` uses the encoding, search and selection configs. A bad value or combination is a
`ConfigError` of one line; `OptionConflict` marks two settings that exclude each other, which
the command line reports as a usage error, as click reports its own. The values the search and
selection code take are checked by their own configs (`MiningConfig`, `ApproximateConfig`), built here.
"""

from __future__ import annotations

import decimal
import numbers
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Literal

from xmine.calibration import DEFAULT_MARGIN, NEUTRAL
from xmine.encoders.base import EncoderConfig
from xmine.encoders.prompts import check_prompt
from xmine.errors import ConfigError, check_field_types
from xmine.artefacts.input_artefacts import artefact_lang
from xmine.langs import given_or_recorded, is_known_lang, normalize_lang
from xmine.mining.approximate import ApproximateConfig
from xmine.mining.defaults import OPERATING_POINTS
from xmine.mining.filters import PairFilterConfig
from xmine.mining.langid import check_installed, supported_languages
from xmine.mining.presearch import PreSearchConfig
from xmine.mining.select import MiningConfig
from xmine.mining.writers import OUTPUT_FORMATS
from xmine.io.reader_base import InputFormat
from xmine.io.stdin import is_url


class OptionConflict(ConfigError):
    """Two settings that exclude each other (or one that needs another that is missing)."""


@dataclass(frozen=True, kw_only=True)
class SideInput:
    """One side of a mining run (SRC or TGT)."""

    #: a corpus (text file, JSON Lines, Parquet, CSV/TSV, a dataset folder; "-": standard input),
    #: an embedding store (`xmine embed`) or an index directory (`xmine build-index`); or a corpus
    #: at an fsspec URL (s3://, hf://, ...: kept as the string it is, copied as it streams)
    path: Path | str
    #: its language code as the user writes it (`xmine.langs`); None: the artefact's recorded
    #: one, else unknown (the language filter and the tmx format need it)
    lang: str | None = None
    #: how a corpus is read (format, text field, id field, header, split, sentence splitting);
    #: None: by its extension, text in the field "text"
    input_format: InputFormat | None = None
    #: record fields (dotted: meta.url) every output carries for this side as `<role>_NAME`
    #: (JSON Lines, Parquet, CSV/TSV or dataset corpora only)
    keep_fields: tuple[str, ...] = ()

    def __post_init__(self):
        check_field_types(self, paths=("path",))  # (was: a bare TypeError from Path(5))
        if not is_url(self.path):  # (a Path would drop one of a URL's slashes)
            object.__setattr__(self, "path", Path(self.path))
        if isinstance(self.keep_fields, str) or not hasattr(self.keep_fields, "__iter__"):  # (5: was a TypeError)
            raise ConfigError(f"{self.path}: keep_fields must be a list of field names, not "
                              f"{'the string ' * isinstance(self.keep_fields, str)}{self.keep_fields!r}")
        object.__setattr__(self, "keep_fields", tuple(self.keep_fields))
        if not all(isinstance(name, str) and name.strip() for name in self.keep_fields):
            raise ConfigError(f"{self.path}: keep_fields must be non-empty field names (got {list(self.keep_fields)})")
        if self.lang is not None and not is_known_lang(self.lang):
            raise ConfigError(f"{self.path}: {self.lang!r} is not a known language code")
        if self.input_format is not None and not isinstance(self.input_format, InputFormat):
            raise ConfigError(f"{self.path}: input_format must be an xmine.io.reader_base.InputFormat, e.g. "
                              f"InputFormat(format={self.input_format!r}) (got {self.input_format!r})")


@dataclass(frozen=True, kw_only=True)
class EncodingConfig:
    """The space mined (or scored) in."""

    #: the encoder of text inputs (`xmine encoders`); None: the artefact sides', else me5-small
    encoder: str | None = None
    #: its precision (auto, fp32, bf16, fp16, int8); None: the artefact sides', else auto
    precision: str | None = None
    #: the runtime that runs it (auto, torch, openvino: `xmine.encoders.runtime`); None: auto
    runtime: str | None = None
    #: the text put before every sentence ("" = none); None: the encoder's own (`xmine.encoders.prompts`)
    prompt: str | None = None
    #: a prompt of the encoder's config by name, instead of `prompt`
    prompt_name: str | None = None
    #: the torch device that encodes text (cpu, cuda, cuda:1, ...); None: CUDA when available, else cpu
    device: str | None = None
    #: "default" (the projection shipped for the default encoder), "none" (raw embeddings), a
    #: projection directory (`xmine train`); None: as `xmine.encoders.projection.choose_projection` decides
    projection: str | Path | None = None

    def __post_init__(self):
        check_field_types(self, strings=("encoder", "precision", "runtime", "prompt", "prompt_name", "device"),
                          paths=("projection",))
        self.encoder_config()  # checks the precision and the runtime (EncoderConfig)
        check_prompt(self.prompt, self.prompt_name)

    def encoder_config(self) -> EncoderConfig:
        """The encoder of this space, as `xmine.encoders` loads it."""
        return EncoderConfig(name=self.encoder, precision=self.precision, runtime=self.runtime, prompt=self.prompt,
                             prompt_name=self.prompt_name, device=self.device)


#: SearchConfig fields that only the approximate search reads, and only the exact one: their options
_APPROXIMATE_ONLY = {"index_type": "--index-type", "nlist": "--nlist", "nprobe": "--nprobe", "pq_m": "--pq-m",
                     "shard_rows": "--index-shard-rows", "refine": "--no-refine", "query_block": "query_block"}
_EXACT_ONLY = {"product": "--product", "block_rows": "--block-rows", "block_cols": "--block-cols",
               "workers": "--workers"}


#: the most neighbours a margin may average: the candidates take k x rows entries (12 bytes each) a
#: side, and a margin over hundreds measures a side's bulk (LASER's k is 4; was: -k 20000 taken)
MAX_K = 256


@dataclass(frozen=True, kw_only=True)
class SearchConfig:
    """The neighbour search. The mined pairs are the same whatever `product`, `workers`, the block
    sizes and `ray`; `approximate` and its index settings trade recall for speed."""

    #: neighbours per sentence: the candidates considered and the neighbourhood whose mean cosine
    #: forms the margin
    k: int = 4
    #: search with IVF / IVF-PQ indexes built in OUT.work/ instead of the exact blocked product
    #: (a side that is an index directory is always searched through its index)
    approximate: bool = False
    #: exact search: the block product that finds candidates (auto, fp32, bf16, cuda:
    #: `xmine.mining.products`); every candidate is rescored exactly
    product: str = "auto"
    #: exact search: source rows per block (memory ~ block_rows x block_cols x 4 bytes; None: the
    #: product's, `xmine.mining.knn_product.default_blocks`)
    block_rows: int | None = None
    #: exact search: target rows per block (None: the product's)
    block_cols: int | None = None
    #: exact search: threads sharing the product, one BLAS thread each (None: as many as BLAS uses)
    workers: int | None = None
    #: approximate: ivfpqfs (4-bit PQ, fast-scan), ivfpq (8-bit PQ) or ivf (exact vectors)
    index_type: str = ApproximateConfig.index_type
    #: approximate: query rows searched at once
    query_block: int = ApproximateConfig.query_block
    #: approximate: IVF lists (None: by corpus size, 4..16 x sqrt(N), at most 4096)
    nlist: int | None = None
    #: approximate: lists visited per query (None: max(32, nlist/16))
    nprobe: int | None = None
    #: approximate, PQ index types: sub-quantisers (must divide the dimension)
    pq_m: int = ApproximateConfig.pq_m
    #: approximate: rows per index shard, searched one at a time (None: as few as fit 1/4 of RAM)
    shard_rows: int | None = None
    #: approximate with a threshold: search the sentences of every candidate pair at or above it
    #: again, wider and with stored vectors (`xmine.mining.approximate.refine_passing`)
    refine: bool = True
    #: None: search in this process; "auto" or a cluster address: the search's units as Ray tasks
    ray: str | None = None

    def __post_init__(self):
        check_field_types(self, booleans=("approximate", "refine"), strings=("product", "index_type", "ray"),
                          integers=("k", "block_rows", "block_cols", "workers", "query_block", "nlist", "nprobe",
                                    "pq_m", "shard_rows"))
        MiningConfig(k=self.k, block_rows=self.block_rows, block_cols=self.block_cols, workers=self.workers,
                     product=self.product)
        if self.k > MAX_K:
            raise ConfigError(f"-k {self.k}: at most {MAX_K} (the candidates take k x rows of memory, and a margin over "
                              "so many neighbours averages a side's bulk, not a neighbourhood; LASER's k is 4)")
        self.approximate_config()
        # Settings of the search not run would be read and dropped without a word: refused instead.
        unused = _APPROXIMATE_ONLY if not self.approximate else _EXACT_ONLY
        given = [option for name, option in unused.items()
                 if getattr(self, name) != next(f.default for f in fields(self) if f.name == name)]
        if given:
            raise ConfigError(f"{', '.join(given)}: " + (
                "settings of the approximate search, which runs with --approximate" if not self.approximate else
                "settings of the exact search, which --approximate replaces"))
        if self.product == "cuda" and self.ray is not None:
            raise ConfigError("--product cuda with --ray: Ray's tiles run as CPU tasks (they ask for no GPU), so "
                              "the cuda product cannot run in them; use --product auto, bf16 or fp32 with --ray, "
                              "or drop --ray to search on this machine's GPU")

    def approximate_config(self) -> ApproximateConfig:
        """The approximate search's settings (`xmine.mining.approximate`)."""
        return ApproximateConfig(index_type=self.index_type, nlist=self.nlist, nprobe=self.nprobe, pq_m=self.pq_m,
                                 shard_rows=self.shard_rows, query_block=self.query_block, refine=self.refine)


@dataclass(frozen=True, kw_only=True)
class SelectionConfig:
    """From neighbours to pairs: the score, the retrieval mode and the threshold."""

    #: ratio = cos / m, distance = cos - m, absolute = cos (m: the mean of both sentences' k
    #: nearest cosines). None: with the calibrated threshold ("default"), the margin calibrated for
    #: the space mined in (`SpaceDefaults.margin`); with a threshold given or none, ratio (the scale
    #: a number is given on unless a margin is named)
    margin: str | None = None
    #: max (union of both directions' best candidates, greedy one-to-one), fwd, bwd or intersect
    retrieval: str = "max"
    #: keep pairs scoring at least this: a number; "default": the threshold calibrated for the
    #: space mined in, for `margin` at `operating_point` (a space without one: estimated from the run);
    #: None: keep every pair
    threshold: float | Literal["default"] | None = "default"
    #: which calibrated threshold: balanced or precision (None: balanced); only with "default"
    operating_point: str | None = None
    #: a record of `xmine calibrate` for the space mined in, used instead of the shipped values
    #: (its thresholds and score cap)
    calibration: str | Path | None = None

    def __post_init__(self):
        check_field_types(self, paths=("calibration",))
        t = self.threshold
        if isinstance(t, (numbers.Real, decimal.Decimal)) and not isinstance(t, (bool, int, float)):  # numpy, Decimal
            object.__setattr__(self, "threshold", t := float(t))
        if t != "default" and t is not None and isinstance(t, (str, bool)):
            raise ConfigError(f"threshold must be a finite number, 'default' or None (got {t!r})")
        MiningConfig(margin=self.given_margin, retrieval=self.retrieval, threshold=self.given_threshold)
        self._check_threshold_scale()
        if self.operating_point is not None and self.operating_point not in OPERATING_POINTS:
            raise ConfigError(f"operating_point must be one of {', '.join(OPERATING_POINTS)} "
                              f"(got {self.operating_point!r})")
        if self.operating_point is not None and t != "default":
            raise OptionConflict("give --threshold or --operating-point, not both")

    def _check_threshold_scale(self) -> None:
        """Refuse a threshold whose scale is not known or that keeps nearly every candidate: beside a
        calibration, whose record mines in its own margin, the margin must be named (was: taken on
        the ratio scale, `--calibration C --threshold 0.02` kept every candidate at the record's ratio
        cap, where the user read the record's distance thresholds); and a number below an ordinary
        pair's margin (ratio 1, distance 0) is another margin's value or a way to keep every pair,
        which --threshold none says; one above any pair's (was: a ratio value on the distance scale,
        0 pairs, exit 0) keeps nothing."""
        t = self.given_threshold
        if t is None:
            return
        if self.calibration is not None and self.margin is None:
            raise OptionConflict(f"--threshold {t:g} with --calibration: name the margin it is on (--margin distance, "
                                 "the one a record of `xmine calibrate` mines in, or --margin ratio)")
        neutral = NEUTRAL.get(self.given_margin)
        if neutral is not None and t < neutral:
            other = "a distance margin's value? add --margin distance; " if self.margin is None else ""
            raise OptionConflict(f"--threshold {t:g} is below an ordinary pair's {self.given_margin} margin "
                                 f"({neutral:g}): it would keep nearly every candidate ({other}to keep every pair: "
                                 "--threshold none)")
        most = {"absolute": "a cosine, at most 1 (1.001 of float16 rows)",  # (was: 1, below a written 1.00022)
                "distance": "its cosine less its neighbours' mean cosine, below 1"}
        if self.given_margin in most and (t > 1.001 or (t >= 1 and self.given_margin == "distance")):
            raise OptionConflict(f"--threshold {t:g} is above what the {self.given_margin} margin gives a pair ("
                                 f"{most[self.given_margin]}): it would keep nothing (a ratio margin's value? add --margin ratio)")

    @property
    def calibrated(self) -> bool:
        """Whether the threshold is the calibrated default of the space (not given, not none)."""
        return self.threshold == "default"

    @property
    def given_threshold(self) -> float | None:
        """The threshold as `MiningConfig` takes it: a number, or None (none given yet, or none at all)."""
        return None if self.threshold == "default" else self.threshold

    @property
    def given_margin(self) -> str:
        """The margin as `MiningConfig` takes it before the space is known: the one given, else
        DEFAULT_MARGIN (`threshold_rule.run_threshold` then puts the space's calibrated one in its place)."""
        return self.margin or DEFAULT_MARGIN


#: The highest score a margin can give: a cosine (absolute) at most 1, a cosine less its neighbours'
#: mean cosine (distance) below 1 where they are not negative, as in any real corpus (the bound
#: `--threshold` has; was 2: a --score-max 1.1 that drops nothing ran); the ratio has no bound.
_MARGIN_CEILING = {"distance": 1.0, "absolute": 1.0}


def score_cap_on_margin(selection: SelectionConfig, pairs: PairFilterConfig) -> PairFilterConfig:
    """`pairs` with a cap given on the command line read on the scale of the margin named
    (`--margin distance --score-max 0.2` caps distance margins at 0.2); without a margin named, on
    the ratio scale, stopes' (a calibration that then mines with another margin says the cap does
    not apply). `check_score_cap` then refuses a cap that scale makes useless."""
    if pairs.score_max is None or selection.margin is None:
        return pairs
    return replace(pairs, score_margin=selection.margin)


def check_k_for_margin(search: SearchConfig, selection: SelectionConfig) -> None:
    """Refuse k=1 with a margin: a pair's neighbourhood of one is its partner, so a mutual pair's ratio
    is 1 (distance 0), every other's lower: no pair reaches a threshold (was: "mined 0 pairs", exit
    0); score's corpora too, which hold the partners where the bitext was mined from them."""
    if search.k == 1 and selection.given_margin != "absolute":
        raise OptionConflict(f"-k 1 with the {selection.given_margin} margin: a pair's one neighbour is the pair itself, so "
                             "no margin rises above an ordinary pair's" + " and nothing is kept" * (selection.threshold
                             is not None) + "; use -k 2 or more (4 is LASER's), or --margin absolute")


def check_score_cap(selection: SelectionConfig, pairs: PairFilterConfig) -> None:
    """Refuse a score cap given on one margin's scale for mining with another margin named, or at or
    above what its margin can score (the cap would drop nothing), and one not above an ordinary
    pair's margin or the threshold given (it would drop every pair). (A
    margin or threshold that a calibration chooses is known only with the space: the run then says
    that the cap does not apply, or warns, `threshold_rule.note_cap_not_above`.)"""
    if pairs.score_max is not None and selection.margin is not None and selection.margin != pairs.score_margin:
        raise OptionConflict(f"--score-max caps the {pairs.score_margin} margin; with --margin {selection.margin} "
                             "it would drop nothing")
    applies = pairs.enabled and "score_max" not in pairs.disabled and pairs.score_max is not None
    ceiling = _MARGIN_CEILING.get(pairs.score_margin)
    if applies and ceiling is not None and pairs.score_max >= ceiling:
        raise OptionConflict(f"--score-max {pairs.score_max:g} is on the scale of --margin {pairs.score_margin}, "
                             f"whose scores are at most {ceiling:g}: it would drop nothing (a ratio margin's cap?)")
    neutral = NEUTRAL.get(pairs.score_margin)
    if applies and neutral is not None and pairs.score_max <= neutral:
        raise OptionConflict(f"--score-max {pairs.score_max:g} is not above an ordinary pair's {pairs.score_margin} "
                             f"margin ({neutral:g}): it would drop nearly every pair (a cap is for copies and "
                             "boilerplate, far above translations)")
    threshold = selection.given_threshold
    if (applies and threshold is not None and selection.given_margin == pairs.score_margin
            and pairs.score_max <= threshold):
        raise OptionConflict(f"--score-max {pairs.score_max:g} is not above --threshold {threshold:g}: it would "
                             "drop every pair the threshold keeps (a cap is for copies and boilerplate, far above "
                             "translations)")


@dataclass(frozen=True, kw_only=True)
class FilterConfig:
    """What is removed: sentences before the search, candidates before one-to-one, pairs after."""

    #: sentences shorter than this many characters are not mined
    min_length: int = 0
    #: sentences longer than this many characters are not mined (None: no bound)
    max_length: int | None = None
    #: drop candidate pairs whose character lengths differ by more than this factor, before
    #: one-to-one matching (None: none dropped)
    max_length_ratio: float | None = None
    #: drop the sentences of each side identified as another language before the search; None:
    #: when both languages are given and known to `pairs.lid`; True needs both languages
    lang_filter: bool | None = None
    #: the cleaning of both sides before the search (`xmine.mining.presearch`)
    pre_clean: PreSearchConfig = field(default_factory=PreSearchConfig)
    #: the pair filters run on the selected pairs (`xmine.mining.filters`), the score cap included
    pairs: PairFilterConfig = field(default_factory=PairFilterConfig)

    def __post_init__(self):
        check_field_types(self, booleans=("lang_filter",), integers=("min_length", "max_length"),
                          reals=("max_length_ratio",), configs={"pre_clean": PreSearchConfig, "pairs": PairFilterConfig})
        MiningConfig(min_length=self.min_length, max_length=self.max_length, max_length_ratio=self.max_length_ratio)


@dataclass(frozen=True, kw_only=True)
class OutputConfig:
    """Where and how the mined pairs are written (atomically, highest score first)."""

    #: the output; OUT.json (summary, provenance) goes beside it
    path: Path
    #: tsv, moses, jsonl, parquet, hf or tmx (None: by the extension of `path`)
    format: str | None = None
    #: replace `path` (and its companions) when it is an earlier mining result
    overwrite: bool = False
    #: also write OUT.meta (stopes style: score, file:line of each side, direction, kept fields)
    meta: bool = False
    #: tsv: add the src and tgt line numbers as columns 4 and 5
    line_numbers: bool = False
    #: also write the pairs the pair filters dropped here (score, src, tgt, rule)
    keep_filtered: Path | None = None
    #: keep OUT.work/ (checkpoints, built indexes) after success
    keep_work: bool = False

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))
        if self.keep_filtered is not None:
            object.__setattr__(self, "keep_filtered", Path(self.keep_filtered))
        if self.format is not None and self.format not in OUTPUT_FORMATS:
            raise ConfigError(f"{self.path}: format must be one of {', '.join(OUTPUT_FORMATS)} (got {self.format!r})")


@dataclass(frozen=True, kw_only=True)
class MineConfig:
    """One mining run: two sides, the space, the search, the selection, the filters and the output."""

    src: SideInput
    tgt: SideInput
    output: OutputConfig
    encoding: EncodingConfig = field(default_factory=EncodingConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    filters: FilterConfig = field(default_factory=FilterConfig)
    #: mine even when SRC and TGT are the same file or directory (every sentence then pairs with itself)
    allow_same_input: bool = False

    def __post_init__(self):
        check_k_for_margin(self.search, self.selection)
        check_score_cap(self.selection, self.filters.pairs)
        check_installed(self.filters.pairs.lid)  # (it serves the pre-search cleaning and the language filter too)
        if self.filters.lang_filter:  # before anything is claimed or encoded
            # a store's or an index's own where none is given, as the run takes it (was: refused)
            langs = [given_or_recorded(side.lang, artefact_lang(side.path)) for side in (self.src, self.tgt)]
            missing = [opt for opt, lang in zip(("--src-lang", "--tgt-lang"), langs) if lang is None]
            if missing:
                raise OptionConflict(f"--lang-filter needs the language of each side: give {' and '.join(missing)}")
            lid, known = self.filters.pairs.lid, supported_languages(self.filters.pairs.lid)
            for lang in langs:  # the user's codes; identification's are canonical
                if normalize_lang(lang) not in known:
                    raise ConfigError(f"--lang-filter: language identification '{lid}' does not know language {lang!r}")

    def mining_config(self) -> MiningConfig:
        """The settings of the search and the selection (`xmine.mining.select.MiningConfig`), with the
        threshold given (None while it is still to be calibrated)."""
        s, f = self.search, self.filters
        return MiningConfig(k=s.k, margin=self.selection.given_margin, retrieval=self.selection.retrieval,
                            threshold=self.selection.given_threshold, max_length_ratio=f.max_length_ratio,
                            min_length=f.min_length, max_length=f.max_length, block_rows=s.block_rows,
                            block_cols=s.block_cols, workers=s.workers, product=s.product)


__all__ = ["EncodingConfig", "FilterConfig", "MineConfig", "OptionConflict", "OutputConfig", "SearchConfig",
           "SelectionConfig", "SideInput", "check_k_for_margin", "check_score_cap", "score_cap_on_margin"]
