"""xmine from Python: `mine`, `score` and `embed` over lists of strings, files or stores, with the
defaults and filters of the command line (docs/api.md).

`mine` and `score` take the commands' configs (`xmine.mining.config`: SideInput, SearchConfig,
SelectionConfig, FilterConfig, EncodingConfig), or plain keywords that build them, and run the
commands' own code (`xmine.mining.pipeline.mine`, `xmine.mining.score.score_bitext`) into a
temporary directory and return the result as a `pyarrow.Table`, which `datasets.Dataset(table)` and
`table.to_pylist()` turn into a dataset and dicts; the command's summary (threshold, filter counts,
provenance) is in the table's schema metadata under b"xmine" (`summary(table)`). A list of strings
stands for a corpus, one sentence an item (line breaks inside an item become spaces, as in a text
file); the result then names each sentence by its 0-based position in the list (`src_index`,
`tgt_index`) instead of a file and line. Everything heavy is imported when a function is called.

Like the command line (xmine/cli.py), this module is a composition root: it registers the feature
packages' artefact readers with the core.
"""

from __future__ import annotations

import contextlib
import functools
import json
import numbers
import logging
import os
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from xmine.artefacts.directory import register_readers
from xmine.artefacts.input_artefacts import encoding_prompt, projection_encoder
from xmine.disentangle.projection import load_projection
from xmine.encoders import DEFAULT_ENCODER, load_encoder
from xmine.encoders.base import EncoderConfig, check_finite_output
from xmine.encoders.projection import choose_projection, resolve_projection, shipped_dir
from xmine.errors import ConfigError, InputError
from xmine.index.faiss_index import IndexDir
from xmine.io.corpus import DEFAULT_MAX_CHARS, CorpusStats, is_blank, truncate_for_encoding
from xmine.io.reader_base import one_line, text_problem
from xmine.io.stdin import is_url
from xmine.langs import is_known_lang
from xmine.mining.bitext import Bitext, BitextFormat
from xmine.mining.filters import PairFilterConfig
from xmine.mining.api_terms import in_python_terms, lists_written_in
from xmine.mining.presearch import PreSearchConfig
from xmine.tempdirs import temporary_directory

if TYPE_CHECKING:  # the configs are imported when a function is called
    from xmine.mining.config import EncodingConfig, FilterConfig, SearchConfig, SelectionConfig, SideInput

register_readers(projection=load_projection, index=IndexDir.open)
log = logging.getLogger(__name__)

Source = str | os.PathLike | Sequence[str]
#: the schema metadata key that holds a result's summary
SUMMARY_KEY = b"xmine"


def _is_path(value) -> bool:
    """A path rather than a sequence of sentences: a string, or any os.PathLike (was: pathlib's only)."""
    return isinstance(value, (str, os.PathLike))


def _corpus(value: Source, directory: Path, name: str) -> tuple[Path, bool]:
    """A path to mine or score: the value itself, or a list of strings written one a line."""
    if is_url(value):  # an fsspec URL, kept as the string it is (`mine` copies it as it streams)
        return value, False
    if _is_path(value):
        if isinstance(value, str) and not os.path.lexists(value) and not os.path.dirname(value) and (
                " " in value.strip() or "\n" in value or not Path(value).suffix):
            # (was: "'Der Hund schläft.': no such file or directory" for a sentence given for a list; then
            # the same without a hint for one word, "Hallo")
            raise InputError(value, f"no such file or directory (a string names a file; give {name}'s sentences "
                                    f"as a list: [{value[:40]!r}])")
        return Path(value), False
    _check_sequence(value, name)
    path = directory / f"{name}.txt"
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for text in value:  # once: an iterator (a generator) is read as it is written
            if not isinstance(text, str):
                raise ConfigError(f"{name}: expected a path or a sequence of strings; item {n} is a "
                                  f"{type(text).__name__}")
            if (why := text_problem(text)) is not None:  # (was: a UnicodeEncodeError, or a NUL mined)
                raise ConfigError(f"{name}: item {n} holds {why}")
            f.write(" ".join(text.splitlines()) + "\n")
            n += 1
    if n == 0:
        raise InputError(f"{name} (the list given)", "no sentence: an empty sequence")
    return path, True


def _in_caller_terms(value, directory: Path):
    """`value` (a summary) with each path into the temporary `directory` said as what the caller
    gave: `src (the list given)` for a list's file, the returned table for the output (was: the
    paths of a directory deleted on return, and the sha256 of a file in it)."""
    if isinstance(value, dict):
        return {k: _in_caller_terms(v, directory) for k, v in value.items() if k != "output_files"}
    if isinstance(value, list):
        return [_in_caller_terms(v, directory) for v in value]
    if isinstance(value, str) and Path(value).parent == directory:
        name = Path(value)
        return f"{name.stem} (the list given)" if name.suffix == ".txt" else "(the returned table)"
    return value


def _table(path: Path, summary: dict, lists: dict[str, bool]):
    """The result file as a pyarrow Table with the summary in its metadata; positions for list inputs."""
    import pyarrow.compute as pc  # (a submodule: `import pyarrow` alone does not load it)
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    for side, was_list in lists.items():
        if was_list and f"{side}_record" in table.column_names:
            index = pc.subtract(table[f"{side}_record"], 1)
            at = table.column_names.index(f"{side}_file")
            table = table.drop_columns([f"{side}_file", f"{side}_record"]).add_column(at, f"{side}_index", index)
    summary = _in_caller_terms(summary, path.parent)
    meta = {**(table.schema.metadata or {}), SUMMARY_KEY: json.dumps(summary, default=str).encode()}
    return table.replace_schema_metadata(meta)


def summary(table) -> dict[str, Any]:
    """The summary `mine` or `score` attached to their result (what the command writes to OUT.json).
    Read it from the table they return: `datasets.Dataset(table)` keeps no schema metadata."""
    metadata = getattr(getattr(table, "schema", None), "metadata", None) or {}
    if SUMMARY_KEY not in metadata:
        raise ConfigError("summary: not a table xmine.mine or xmine.score returned (no xmine summary in its "
                          "schema metadata; a datasets.Dataset made from one drops it)")
    return json.loads(metadata[SUMMARY_KEY])


def _given(threshold="default", **keywords) -> dict:
    """The plain keywords that were given: those not None, and a threshold other than "default"
    (None is a threshold: keep every pair)."""
    return {k: v for k, v in keywords.items() if v is not None} | (
        {} if isinstance(threshold, str) and threshold == "default" else {"threshold": threshold})


def _check_flags(**flags) -> None:
    """Each keyword True or False; given as (value, cls), also None or a `cls` (cls None: None only).
    A ConfigError otherwise (was: any object taken for its truth, `approximate="no"` for True)."""
    for name, value in flags.items():
        optional = isinstance(value, tuple)
        value, cls = value if optional else (value, None)
        if isinstance(value, bool) or (optional and (value is None or (cls is not None and isinstance(value, cls)))):
            continue
        other = f", None or a {cls.__name__}" if cls is not None else " or None" if optional else ""
        raise ConfigError(f"{name} must be True or False{other} (got {value!r})")


def _check_sequence(value, name: str) -> None:
    """A ConfigError unless `value` can be a sequence of sentences (bytes and dicts iterate, but not so)."""
    if isinstance(value, (bytes, dict)) or not hasattr(value, "__iter__"):
        raise ConfigError(f"{name}: expected a path or a sequence of strings, not {type(value).__name__}")
    if isinstance(value, (set, frozenset)):  # (was: mined in an order that changes from process to process)
        raise ConfigError(f"{name}: a set, whose order changes from one Python process to the next, so the "
                          f"result's indexes could not name its sentences; pass a list (sorted({name}))")
    if hasattr(value, "columns"):  # (was: a pandas DataFrame iterated as its column names, mined as such)
        raise ConfigError(f"{name}: a table ({type(value).__name__}), not a sequence of strings; pass the column "
                          f"of its sentences, e.g. {name}=df['text'], or a SideInput of its file")


def _listed(value, name: str) -> list:
    """A sequence of sentences as a list (an iterator read once); anything else a ConfigError."""
    _check_sequence(value, name)
    return list(value)


def _check_lang(name: str, lang: str | None) -> None:
    """A ConfigError naming the argument for a language code no language has (None: not given)."""
    if lang is not None and not is_known_lang(lang):
        raise ConfigError(f"{name}={lang!r}: not a known language code")


@contextlib.contextmanager
def _lists_named(directory: Path):
    """An InputError about a file the API wrote from a list names the list (`src`, `tgt`), not the
    temporary file (was: "/tmp/xmine-api-.../src.txt: no sentence in the file"); so do the warnings."""
    try:
        with lists_written_in(directory):
            yield
    except InputError as e:
        if e.path.parent != directory or e.path.suffix != ".txt":
            raise  # (a list the pair's other side goes on after is named so by the bitext's reader)
        # (the file's line n is item n - 1; none where the list ended before it)
        item = f"item {e.line - 1}: " if e.line is not None and "ends at line" not in e.problem else ""
        problem = re.sub(r"ends at line (\d+)", r"ends after \1 items", e.problem)  # (was: items and lines mixed)
        problem = problem.replace("in the file", "in the list").replace("line(s)", "item(s)")
        raise InputError(f"{e.path.stem} (the list given)", item + problem) from None


def _built(name: str, config, cls, given: dict):
    """`config` (a `cls` given as `name=`), or a `cls` made of the plain keywords `given`; both at
    once is a ConfigError naming the keywords."""
    if config is None:
        return cls(**given)
    if not isinstance(config, cls):
        raise ConfigError(f"{name}: expected an xmine.mining.config.{cls.__name__}, not {type(config).__name__}")
    if given:
        raise ConfigError(f"give {', '.join(given)} inside {name}={cls.__name__}(...) or as keywords, not both")
    return config


def _side(value, directory: Path, role: str, lang: str | None, keep_fields: Sequence[str]):
    """The SideInput of one side (a list written to a file first), and whether it was a list."""
    from xmine.mining.config import SideInput

    if isinstance(value, SideInput):
        if lang is not None or keep_fields:
            raise ConfigError(f"give the {role} side's language and fields inside its SideInput or as "
                              f"{role}_lang= / keep_fields=, not both")
        return value, False
    keep_fields = () if keep_fields is None else keep_fields  # (was: a TypeError from tuple(None))
    if isinstance(keep_fields, str):  # (was: "id" taken as the fields "i" and "d")
        raise ConfigError(f"keep_fields must be a list of field names, not the string {keep_fields!r}; "
                          f"pass [{keep_fields!r}]")
    if not hasattr(keep_fields, "__iter__"):  # (was: a TypeError from tuple(5))
        raise ConfigError(f"keep_fields must be a list of field names, not {keep_fields!r}")
    if not _is_path(value):  # a list: its language checked under its own name
        if keep_fields:  # (was: an error naming --keep-field and the temporary file written from the list)
            raise ConfigError(f"keep_fields: {role} is a list of sentences, which has no fields; keep_fields "
                              "takes the fields of records read from a file (JSON Lines, CSV, TSV, Parquet)")
        _check_lang(f"{role}_lang", lang)  # (was: named "src (the list given)", not the argument)
    path, was_list = _corpus(value, directory, role)
    return SideInput(path=path, lang=lang, keep_fields=tuple(keep_fields)), was_list


@in_python_terms
def mine(src: Source | SideInput, tgt: Source | SideInput, *, src_lang: str | None = None,
         tgt_lang: str | None = None, threshold: float | str | None = "default", k: int | None = None,
         margin: str | None = None, retrieval: str | None = None, encoder: str | None = None,
         projection: str | Path | None = None, filters: bool | FilterConfig | None = None,
         lang_filter: bool | None = None, pre_clean: bool | None = None, approximate: bool | None = None,
         keep_fields: Sequence[str] | None = (), search: SearchConfig | None = None,
         selection: SelectionConfig | None = None, encoding: EncodingConfig | None = None,
         operating_point: str | None = None, calibration: str | Path | None = None, allow_same_input: bool = False,
         show_progress: bool = False):
    """Mine `src` against `tgt` as `xmine mine` does; a pyarrow Table, best pair first.

    `src`, `tgt`: lists of sentences, what the command takes (a corpus file or its fsspec URL, a
    dataset folder, an embedding store, an index), or a `SideInput` (path, language, input format, fields). The
    settings are the command's configs (`xmine.mining.config`): `search` (SearchConfig: k,
    exact or approximate, ...), `selection` (SelectionConfig: margin, retrieval, threshold,
    operating point, calibration), `filters` (a FilterConfig; or True/False: the pair filters on
    or off), `encoding` (EncodingConfig: encoder, precision, projection). Or, for short, plain
    keywords that build them: `threshold` ("default": the calibrated threshold of the space, None
    to keep every pair, or a number), `operating_point` ("balanced" or "precision": which
    calibrated threshold "default" means), `calibration` (a record of `xmine calibrate`), `k`, `margin`, `retrieval`, `approximate`, `encoder`,
    `projection`, `lang_filter`, `pre_clean`; a keyword together with the config that holds it is
    a ConfigError. Left out, each is the command's default. `keep_fields`: record fields to carry
    (files with fields only, as --keep-field). `allow_same_input`: mine a corpus against itself
    (as --allow-same-input). Columns: `translation` (a dict keyed by the two
    language codes), `score`, `direction`, where each sentence came from (`src_index` for a list,
    else `src_file` and `src_record`; the same for tgt), and the language filter's `*_lid` columns.
    """
    from xmine.mining.config import (EncodingConfig, FilterConfig, MineConfig, OutputConfig, SearchConfig,
                                     SelectionConfig)
    from xmine.mining.pipeline import mine as run_mine

    search = _built("search", search, SearchConfig, _given(k=k, approximate=approximate))
    selection = _built("selection", selection, SelectionConfig,
                       _given(margin=margin, retrieval=retrieval, threshold=threshold,
                              operating_point=operating_point, calibration=calibration))
    encoding = _built("encoding", encoding, EncodingConfig, _given(encoder=encoder, projection=projection))
    _check_flags(filters=(filters, FilterConfig), pre_clean=(pre_clean, None), show_progress=show_progress,
                 allow_same_input=allow_same_input)
    if isinstance(filters, FilterConfig):
        filters = _built("filters", filters, FilterConfig, _given(lang_filter=lang_filter, pre_clean=pre_clean))
    else:
        filters = FilterConfig(pairs=PairFilterConfig(enabled=filters is not False), lang_filter=lang_filter,
                               pre_clean=PreSearchConfig(enabled=pre_clean is not False))
    with temporary_directory("api") as tmp:
        d = Path(tmp)
        src_side, src_list = _side(src, d, "src", src_lang, keep_fields)
        tgt_side, tgt_list = _side(tgt, d, "tgt", tgt_lang, keep_fields)
        config = MineConfig(src=src_side, tgt=tgt_side, output=OutputConfig(path=d / "mined.parquet", format="parquet"),
                            encoding=encoding, search=search, selection=selection, filters=filters,
                            allow_same_input=allow_same_input)
        lists = {"src": src_list, "tgt": tgt_list}
        with _lists_named(d):
            # what reading a list's file finds is said of the list and its 0-based items (was: the
            # temporary file and its lines, one more than the result's `src_index`)
            result = run_mine(config, show_progress=show_progress, reported_as={
                role: functools.partial(CorpusStats.as_list, name=role)
                for role, was_list in lists.items() if was_list})
        return _table(d / "mined.parquet", result, lists)


@in_python_terms
def score(src: Source, tgt: Source | None = None, *, src_lang: str | None = None, tgt_lang: str | None = None,
          threshold: float | str | None = "default", k: int | None = None, margin: str | None = None,
          encoder: str | None = None, projection: str | Path | None = None,
          filters: bool | PairFilterConfig = True, kept_only: bool = False, search: SearchConfig | None = None,
          selection: SelectionConfig | None = None, encoding: EncodingConfig | None = None,
          operating_point: str | None = None, calibration: str | Path | None = None,
          src_corpus: Source | None = None, tgt_corpus: Source | None = None, approximate: bool | None = None,
          bitext_format: BitextFormat | None = None, show_progress: bool = False):
    """Score the pairs (src[i], tgt[i]) as `xmine score` does; a pyarrow Table in their order.

    `src`, `tgt`: two lists of sentences of the same length, or two line-aligned files (a Moses
    pair); or `src` alone: a bitext file or dataset folder `xmine score` reads (TSV, CSV, JSON
    Lines, Parquet, dataset), read as `bitext_format` says (an xmine.mining.bitext.BitextFormat:
    format, src_field, tgt_field, header, split, the command's --pairs-format, --src-field, ...;
    default: by its name). The settings are `mine`'s configs or keywords (the search's k and
    approximate, the selection's margin, threshold, operating point and
    calibration, the encoding; `filters` True/False or a
    PairFilterConfig). `src_corpus`, `tgt_corpus`: monolingual text (a list or what `xmine score
    --src-corpus` takes) of each language forming the pairs' neighbourhoods, as the command's
    options (default: the bitext's own sides). Columns: the pair's `src` and `tgt` (a bitext file: its own fields),
    `cosine`, `margin`, `keep` and `rule` (the rule that dropped the pair, "" if kept).
    """
    from xmine.mining.config import EncodingConfig, SearchConfig, SelectionConfig
    from xmine.mining.score import score_bitext

    _check_flags(filters=(filters, PairFilterConfig), kept_only=kept_only, show_progress=show_progress)
    _check_lang("src_lang", src_lang)  # (as mine's SideInput checks them)
    _check_lang("tgt_lang", tgt_lang)
    if tgt is None and not _is_path(src):
        raise ConfigError("score: a list of sources needs its targets (tgt=); src alone is a bitext file or folder")
    if bitext_format is not None and not isinstance(bitext_format, BitextFormat):
        raise ConfigError(f"bitext_format: expected an xmine.mining.bitext.BitextFormat, not "
                          f"{type(bitext_format).__name__}")
    if bitext_format is not None and tgt is not None:  # (two files or lists: their lines are the sentences)
        raise ConfigError("bitext_format: reads a bitext file or folder given as src alone, not src and tgt")
    if tgt is not None:  # (a generator is read once, as in mine)
        src, tgt = (v if _is_path(v) else _listed(v, name) for v, name in ((src, "src"), (tgt, "tgt")))
        if isinstance(src, list) and isinstance(tgt, list) and len(src) != len(tgt):
            raise ConfigError(f"{len(src)} source and {len(tgt)} target sentences: pairs need as many of each")
    search = _built("search", search, SearchConfig, _given(k=k, approximate=approximate))
    selection = _built("selection", selection, SelectionConfig,
                       _given(margin=margin, threshold=threshold, operating_point=operating_point,
                              calibration=calibration))
    encoding = _built("encoding", encoding, EncodingConfig, _given(encoder=encoder, projection=projection))
    if not isinstance(filters, PairFilterConfig):
        filters = PairFilterConfig(enabled=filters is not False)
    with temporary_directory("api") as tmp:
        d = Path(tmp)
        paths = (Path(src),) if tgt is None else (_corpus(src, d, "src")[0], _corpus(tgt, d, "tgt")[0])
        corpora = [None if c is None else _corpus(c, d, name)[0]
                   for c, name in ((src_corpus, "src_corpus"), (tgt_corpus, "tgt_corpus"))]
        with _lists_named(d):
            listed = (False, False) if tgt is None else (not _is_path(src), not _is_path(tgt))
            result = score_bitext(Bitext(paths, bitext_format or BitextFormat(), langs=(src_lang, tgt_lang),
                                         listed=listed), out=d / "scored.parquet",
                                  src_lang=src_lang, tgt_lang=tgt_lang, encoding=encoding, search=search,
                                  selection=selection, filters=filters, kept_only=kept_only,
                                  src_corpus=corpora[0], tgt_corpus=corpora[1], output_format="parquet",
                                  show_progress=show_progress)
        return _table(d / "scored.parquet", result, {})


@in_python_terms
def embed(texts: Sequence[str], *, lang: str | None = None, encoder: str | None = None,
          projection: str | Path | None = None, precision: str = "auto", batch_size: int = 64,
          prompt: str | None = None, prompt_name: str | None = None, runtime: str | None = None,
          device: str | None = None):
    """The vectors `mine` compares for `texts`: a float32 numpy array (len(texts), dim), rows of
    unit length. By default the meaning part of the shipped projection of the default encoder
    (the space `xmine mine` searches); `projection="none"`: the encoder's raw embeddings; a
    projection directory without `encoder`: its meaning part, with the encoder it was made for.
    `prompt`: the text put before every sentence (None: the encoder's default), or `prompt_name`: one
    of the encoder's named prompts; a projection trained with another refuses the embeddings
    (EncoderMismatchError), as `xmine embed` does. `runtime` (torch, openvino; None: auto) and
    `device` (cpu, cuda, ...; None: auto) as `xmine embed --runtime/--device`."""

    if isinstance(texts, os.PathLike):  # (was: "expected a path or a sequence of strings, not PosixPath")
        raise ConfigError(f"texts: a path ({os.fspath(texts)}); xmine.embed returns the vectors of a list of "
                          "sentences in memory: embed a file with `xmine embed FILE -o STORE` (read a shard at a "
                          "time), or pass its lines")
    if isinstance(texts, (str, bytes)):  # (was: each character embedded as a sentence)
        raise ConfigError(f"texts: one string ({str(texts)[:40]!r}), not a sequence of sentences; pass [text]")
    _check_lang("lang", lang)  # (was: accepted, and ignored by most projections)
    texts = _listed(texts, "texts")
    for i, text in enumerate(texts):
        if not isinstance(text, str):  # (was: a TypeError from the tokenizer's prompt)
            raise ConfigError(f"texts: item {i} is a {type(text).__name__}, not a string")
        if (why := text_problem(text)) is not None:  # (was: the tokenizer's TypeError, or a NUL embedded)
            raise ConfigError(f"texts: item {i} holds {why}")
        if is_blank(text):  # (was: the vector of the prompt alone, near every short sentence's)
            raise ConfigError(f"texts: item {i} is empty: it has no meaning to embed (mine and embed skip it); leave it out")
    for name, value in (("prompt", prompt), ("prompt_name", prompt_name), ("runtime", runtime), ("device", device),
                        ("precision", precision), ("encoder", encoder), ("projection", projection)):
        # (runtime, prompt_name, device: was not taken; encoder, projection: a TypeError from pathlib)
        if value is not None and not isinstance(value, (str, os.PathLike) if name == "projection" else str):
            raise ConfigError(f"{name} must be a string or None (got {value!r})")
    precision = "auto" if precision is None else precision  # (was: None let through, then refused as "not None")
    EncoderConfig(precision=precision, runtime=runtime)  # checks both: a ConfigError, as EncodingConfig's
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ConfigError(f"batch_size must be an integer >= 1 (got {batch_size!r})")
    batch_size = int(batch_size)
    name = encoder or projection_encoder(projection) or DEFAULT_ENCODER  # (a projection names its own, as in `mine`)
    prompt = encoding_prompt(prompt, prompt_name, (projection,), name)  # as `xmine embed`
    model = load_encoder(name, precision=precision, prefix=prompt, prompt_name=prompt_name, runtime=runtime,
                         device=device)
    choice = choose_projection(projection, encoder_name=name, encoder_fp=model.fingerprint)
    if choice.how == "default-unavailable" and shipped_dir(name) is not None:
        # (was: raw embeddings without a word): the shipped projection does not take this prompt or these
        # weights (stacklevel: past in_python_terms' wrapper, to the caller's line; was this module's)
        warnings.warn(f"{choice.reason}; pass projection='none' to ask for raw embeddings", stacklevel=3)
    proj = resolve_projection(choice.path) if choice.path is not None else None
    if proj is not None:  # (was: a projection of another prompt applied without a word)
        proj.check_encoder(model.fingerprint())
    # read and cut as a corpus's line, the vectors `mine` compares (was: " X " with its spaces; then whole)
    lines = [one_line(t).strip() for t in texts]
    if cut := [i for i, t in enumerate(lines) if len(t) > DEFAULT_MAX_CHARS]:
        shown = ", ".join(map(str, cut[:5])) + " ..." * (len(cut) > 5)
        log.warning(f"texts: {len(cut)} item(s) longer than {DEFAULT_MAX_CHARS} characters are cut to that length "
                    f"for encoding, as mine cuts a corpus's lines (items {shown})")
    emb = np.asarray(model.encode(truncate_for_encoding(lines), batch_size=batch_size), dtype=np.float32)
    check_finite_output(emb, model, lambda i: f"texts[{i}] {texts[i][:60]!r}")  # (was: returned as NaN rows)
    if proj is not None:
        emb = proj.transform(emb, "meaning", lang=lang)
    return emb


__all__ = ["SUMMARY_KEY", "embed", "mine", "score", "summary"]
