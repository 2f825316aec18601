"""An error raised, or a warning logged, through the Python API (`xmine.mine`, `xmine.score`,
`xmine.embed`) in the caller's terms: the checks the configs and the pipeline share with the
command line name the command's options (`--threshold 0.5 is below ...`, `give --threshold or
--operating-point, not both`); a Python caller passed keywords, so each option it names is said as
the keyword that sets it (`threshold=0.5 is below ...`, `give threshold= or operating_point=, not
both`). The error keeps its type and fields, the log record its level and logger; only the message
changes.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import re
from typing import Callable, Iterator

from xmine.errors import XmineError

#: option -> the keyword of `xmine.mine`/`score`/`embed` (or the config field) that sets it
KEYWORDS = {
    "--threshold": "threshold", "--operating-point": "operating_point", "-k": "k", "--k": "k",
    "--margin": "margin", "--retrieval": "retrieval", "--calibration": "calibration",
    "--src-lang": "src_lang", "--tgt-lang": "tgt_lang", "--lang": "lang",
    "--encoder": "encoder", "--projection": "projection", "--precision": "precision", "--runtime": "runtime",
    "--device": "device", "--prompt": "prompt", "--prompt-name": "prompt_name", "--batch-size": "batch_size",
    "--keep-field": "keep_fields", "--src-corpus": "src_corpus", "--tgt-corpus": "tgt_corpus",
    "--nlist": "SearchConfig(nlist=)", "--nprobe": "SearchConfig(nprobe=)", "--product": "SearchConfig(product=)",
    "--index-type": "SearchConfig(index_type=)", "--pq-m": "SearchConfig(pq_m=)", "--workers": "SearchConfig(workers=)",
    "--block-rows": "SearchConfig(block_rows=)", "--block-cols": "SearchConfig(block_cols=)",
    "--index-shard-rows": "SearchConfig(shard_rows=)",
    "--score-max": "PairFilterConfig(score_max=)",
    # a side's reading options: SideInput(input_format=InputFormat(...)) (xmine.io.reader_base)
    "--input-format": "InputFormat(format=)", "--src-input-format": "InputFormat(format=)",
    "--tgt-input-format": "InputFormat(format=)", "--text-field": "InputFormat(text_field=)",
    "--id-field": "InputFormat(id_field=)", "--text-column": "InputFormat(text_field=)",
    "--ray": "SearchConfig(ray=)", "--split": "InputFormat(split=)",
    # score's bitext: score(bitext_format=BitextFormat(...)) (xmine.mining.bitext)
    "--pairs-format": "BitextFormat(format=)", "--src-field": "BitextFormat(src_field=)",
    "--tgt-field": "BitextFormat(tgt_field=)", "--src-column": "BitextFormat(src_field=)",
    "--tgt-column": "BitextFormat(tgt_field=)",
    "--min-length": "FilterConfig(min_length=)", "--max-length": "FilterConfig(max_length=)",
}
#: options whose value is a rule's name, each said as the config field that switches it off
_SWITCHED_OFF = {"--no-pre-clean-step": "PreSearchConfig(disabled=frozenset({{'{}'}}))",
                 "--no-filter": "PairFilterConfig(disabled=frozenset({{'{}'}}))"}
#: flags -> the keyword and value that set them
FLAGS = {
    "--approximate": "approximate=True", "--lang-filter": "lang_filter=True", "--no-lang-filter": "lang_filter=False",
    "--no-filters": "filters=False", "--no-pre-clean": "pre_clean=False", "--kept-only": "kept_only=True",
    "--allow-same-input": "allow_same_input=True", "--header": "InputFormat(header=True)",
    "--no-header": "InputFormat(header=False)", "--split-sentences": "InputFormat(split_sentences=True)",
}
#: the words an option's value may be, read as its value where one follows the option
_CHOICES = ("none", "ratio", "distance", "absolute", "balanced", "precision", "max", "intersect", "fwd", "bwd",
            "auto", "fp32", "bf16", "fp16", "int8", "torch", "openvino", "cpu", "cuda", "default",
            "text", "jsonl", "parquet", "hf", "csv", "tsv", "moses", "flat", "ivf", "hnsw", "ivfpq", "ivfpqfs", "opq")
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*[a-z0-9]|-k)(?![\w-])(?:=(?P<given>[^\s,;)]+)|[ ](?P<value>"
                     r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:e-?\d+)?(?![\w.])|'[^'\s]*'"  # a number (1,000), a quoted value
                     rf"|(?:{'|'.join(_CHOICES)})(?![\w:-])|cuda:\d+(?![\w-])"  # a choice, a device
                     r"|\.{0,2}/[^\s,;)]+"  # a path
                     r"|(?<=-lang )(?!and\b|not\b|nor\b|or\b)[a-z]{2,3}(?:_[A-Z][a-z]{3})?(?![\w-])))?")  # a language
_SWITCH = re.compile(rf"(?<![\w-])({'|'.join(_SWITCHED_OFF)}) (\w+)")
#: what is said as it is: a command line to type (`xmine calibrate -k 8`, in backticks or not)
_COMMAND = re.compile(r"`xmine [^`]*`|\bxmine [a-z][a-z-]*(?: [^\s,;)`]+)*")


def python_terms(message: str) -> str:
    """`message` with each option it names said as the Python keyword that sets it; an option this
    module does not know is left as it is (`xmine verify`, `--help`)."""

    def keyword(m: re.Match) -> str:
        option, value = m.group(1), m.group("value") or m.group("given")  # (given: --option=value, any value)
        if option in FLAGS:
            return FLAGS[option] + (f" {value}" if value else "")
        name = KEYWORDS.get(option)
        if name is None:
            return m.group(0)
        if value is None:
            return name if name.endswith(")") else f"{name}="
        number = re.fullmatch(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:e-?\d+)?", value)
        shown = ("None" if value == "none" else value.replace(",", "") if number else
                 value if value[0] == "'" else repr(value))
        return name[:-1] + f"{shown})" if name.endswith(")") else f"{name}={shown}"

    def said(text: str) -> str:
        text = _SWITCH.sub(lambda m: _SWITCHED_OFF[m.group(1)].format(m.group(2)), text)
        return _OPTION.sub(keyword, text)

    # the text between command lines, each option of it said as its keyword
    parts, last = [], 0
    for command in _COMMAND.finditer(message):
        parts += [said(message[last:command.start()]), command.group(0)]
        last = command.end()
    return "".join(parts) + said(message[last:])


#: set while an API call runs in this context: xmine's log records made in it are in the caller's terms
_IN_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("xmine_api_call", default=False)
_made = logging.getLogRecordFactory()


#: the folder an API call writes its lists into, while it runs: a file of it is said as the list
_LISTS_IN: contextvars.ContextVar[str | None] = contextvars.ContextVar("xmine_api_lists", default=None)


@contextlib.contextmanager
def lists_written_in(directory) -> Iterator[None]:
    """Within the block, a log record naming a file of `directory` (`src.txt`, the list `src` written
    for the pipeline) names the list (`src (the list given)`; was: the temporary file, gone on return)."""
    token = _LISTS_IN.set(str(directory))
    try:
        yield
    finally:
        _LISTS_IN.reset(token)


def _lists_named(message: str) -> str:
    directory = _LISTS_IN.get()
    if directory is None:
        return message
    return re.sub(re.escape(directory + "/") + r"(\w+)\.txt\b", r"\1 (the list given)", message)


def _record(*args, **kwargs) -> logging.LogRecord:
    """A log record as logging makes it, said in Python terms where it is xmine's and an API call runs
    (was: a warning of `xmine.score` on lists named `--src-lang`). One factory for the process, set
    once: the context variable, not a swap of factories, decides, so calls in threads do not undo
    each other's."""
    record = _made(*args, **kwargs)
    if _IN_CALL.get() and record.name.startswith("xmine"):
        try:
            record.msg, record.args = _lists_named(python_terms(record.getMessage())), ()
        except (TypeError, ValueError):  # arguments that do not fit the message: logging reports it when emitted
            pass
    return record


def in_python_terms(function: Callable) -> Callable:
    """`function` (an API call) whose XmineError leaves it, and whose warnings are said, in the caller's terms."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        if logging.getLogRecordFactory() is _made:  # (another library may have set its own: left alone)
            logging.setLogRecordFactory(_record)
        token = _IN_CALL.set(True)
        try:
            return function(*args, **kwargs)
        except XmineError as e:
            if len(e.args) == 1 and isinstance(e.args[0], str):
                e.args = (python_terms(e.args[0]),)
            raise
        finally:
            _IN_CALL.reset(token)

    return call


__all__ = ["in_python_terms", "lists_written_in", "python_terms"]
