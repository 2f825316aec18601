"""click parameter types and options shared by xmine's commands, checked at the CLI boundary.

`Finite(...)` is a float option that refuses NaN and infinities (click's FloatRange lets NaN
through: every comparison with NaN is false); `LANG` a language code; `input_format_options`
the options saying how to read a corpus.
"""

from __future__ import annotations

import functools
import math

import click


class FiniteFloat(click.FloatRange):
    """A finite float, optionally within [min, max] (or open bounds); NaN and +-inf are refused."""

    name = "number"

    def convert(self, value, param, ctx):
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)


def Finite(min: float | None = None, max: float | None = None, *, min_open: bool = False,
           max_open: bool = False) -> FiniteFloat:
    """A finite float option type with optional bounds, e.g. `Finite(0, min_open=True)` for > 0."""
    return FiniteFloat(min=min, max=max, min_open=min_open, max_open=max_open)


class LangCode(click.ParamType):
    """A language code in any form xmine.langs understands (ISO 639-1 de, ISO 639-3 deu, NLLB/FLORES
    deu_Latn, a locale de-DE), given to the command in one form: the canonical ISO 639-3 code of
    `normalize_lang` (deu), so stores, indexes and outputs record one name per language. Unknown
    codes are refused rather than silently becoming a language of their own."""

    name = "lang"

    def convert(self, value, param, ctx):
        from xmine.langs import is_known_lang, normalize_lang

        if not isinstance(value, str) or not is_known_lang(value):
            self.fail(f"{value!r} is not a known language code (ISO 639-1 such as de, ISO 639-3 such as "
                      "deu, optionally with script or region: deu_Latn, de-DE)", param, ctx)
        return normalize_lang(value)


LANG = LangCode()


def input_format_options(f):
    """--input-format, --text-field/--text-column, --id-field, --split and --split-sentences, handed to the command
    as one `input_format` (an `xmine.reader_base.InputFormat`)."""
    from xmine.reader_base import FORMATS

    @click.option("--input-format", type=click.Choice(("auto",) + FORMATS), default="auto", show_default=True,
                  help="How to read a corpus: auto = by extension (.jsonl/.ndjson/.json: jsonl; .parquet: parquet; "
                       "a compression suffix .gz/.xz/.zst/.bz2 is looked through) or folder (a Hugging Face "
                       "save_to_disk folder: hf), else text (one sentence a line, plain or compressed). "
                       "hf also reads data files (.parquet/.jsonl/.csv/.txt, or a folder of them) through "
                       "the datasets library, streaming.")
    @click.option("--text-field", "--text-column", "text_field", default=None,
                  help="jsonl/hf: the field holding the text, dotted for nested objects (meta.text); parquet: "
                       "the column (dotted: a field of a struct column). [default: text]")
    @click.option("--id-field", default=None,
                  help="A field (dotted) holding each record's own id, kept with each sentence as provenance "
                       "(mined outputs carry it). Default: records are named by their line/row number.")
    @click.option("--split", "hf_split", default=None,
                  help="hf: the split to read (default: the only one; a saved DatasetDict of several splits "
                       "needs it; data files: train).")
    @click.option("--split-sentences", is_flag=True,
                  help="Each record or line is a document or paragraph: split it into sentences with the "
                       "splitter chosen for the corpus language (needs --lang, --src-lang/--tgt-lang). Every "
                       "sentence is a row that keeps its record number (or --id-field id) and its 1-based "
                       "index in the record; mined outputs carry both.")
    @functools.wraps(f)
    def wrapper(*args, input_format, text_field, id_field, hf_split, split_sentences, **kwargs):
        from xmine.reader_base import InputFormat

        given = {"--text-field": text_field, "--id-field": id_field, "--split": hf_split}
        spec = InputFormat(format=input_format, text_field="text" if text_field is None else text_field,
                           id_field=id_field, split=hf_split, split_sentences=split_sentences,
                           given=frozenset(name for name, value in given.items() if value is not None))
        return f(*args, input_format=spec, **kwargs)

    return wrapper


__all__ = ["Finite", "FiniteFloat", "LANG", "LangCode", "input_format_options"]
