"""click parameter types and options shared by xmine's commands, checked at the CLI boundary.

`Finite(...)` is a float option that refuses NaN and infinities (click's FloatRange lets NaN
through: every comparison with NaN is false); `LANG` a language code; `InputPath` a corpus
argument (a path, '-' or a URL); `input_format_options` the options saying how to read a corpus;
`projection_option` the `--projection` of every command that embeds or compares in a projection's
space; `ray_option` the `--ray` of every command that can run on a Ray cluster; `quiet_option` the
`-q/--quiet` of every command that shows progress bars.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

import click

from xmine.langs import is_known_lang
from xmine.io.reader_base import FORMATS, InputFormat
from xmine.io.stdin import is_url
from xmine.artefacts.fileio import missing
from xmine.errors import InputError


class Finite(click.FloatRange):
    """A finite float, optionally within [min, max] (or open bounds, e.g. `Finite(0, min_open=True)` for
    > 0); NaN and +-inf are refused."""

    name = "number"

    def convert(self, value, param, ctx):
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)

    def _describe_range(self) -> str:
        # click describes an unbounded range as "x<=None" in --help; an unbounded one says nothing
        return "" if self.min is None and self.max is None else super()._describe_range()


class Name(click.ParamType):
    """A name (an encoder, a field, a column) or path that is not empty: an empty `--encoder` was
    read as no option at all, an empty `--src-text-column` blamed on `--text-field`, an empty
    `--keep-field` on the input file. A blank one may name something (a JSON key " ")."""

    name = "text"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value:
            self.fail(f"{value!r} is empty", param, ctx)
        return value


NAME = Name()

#: a seed numpy's and torch's generators both take (was: -1 and 2**64 were tracebacks from either)
SEED = click.IntRange(0, 2**32 - 1)


class LangCode(click.ParamType):
    """A language code in any form xmine.langs understands (ISO 639-1 de, ISO 639-3 deu, NLLB/FLORES
    zho_Hant, BCP-47 zh-Hant or de-DE), given to the command as the user wrote it (white space
    stripped): stores, indexes and outputs record the user's code, script included, and what needs
    a canonical code (language filters, projections, splitters) maps it with `normalize_lang`.
    Unknown codes are refused rather than silently becoming a language of their own."""

    name = "lang"

    def convert(self, value, param, ctx):
        if not isinstance(value, str) or not is_known_lang(value):
            self.fail(f"{value!r} is not a known language code (ISO 639-1 such as de, ISO 639-3 such as "
                      "deu, optionally with script or region: deu_Latn, zh-Hant, de-DE)", param, ctx)
        return value.strip()


LANG = LangCode()


class GivenPath(click.Path):
    """`click.Path` refusing an empty value: Path("") is ".", the working directory, and an optional
    output read as `out or its default` took the default's place (`bench mining --out ''` named the
    repository's result file). Keyword arguments are click.Path's."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value:
            self.fail("'' is an empty path", param, ctx)
        return super().convert(value, param, ctx)


#: where `OutputPath` notes, in the click context, the outputs written with a trailing slash
_DIRECTORY_OUTPUTS = "xmine.directory_outputs"


class OutputPath(GivenPath):
    """`GivenPath` of an output that may be a directory: a value written with a trailing slash
    (`-o mined/`) is marked as naming one (`directory_outputs`), as Path() drops the slash and with
    it what was meant (was: a TSV file written as `mined`)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.endswith(("/", os.sep)) and ctx is not None and param is not None:
            ctx.meta.setdefault(_DIRECTORY_OUTPUTS, set()).add(param.name)
        return super().convert(value, param, ctx)


def directory_outputs() -> set[str]:
    """The names of the `OutputPath` parameters of the running command written with a trailing slash."""
    ctx = click.get_current_context(silent=True)
    return set(ctx.meta.get(_DIRECTORY_OUTPUTS, ())) if ctx is not None else set()


class ExistingPath(GivenPath):
    """`click.Path(exists=True, ...)` whose error for a symbolic link that loops or names nothing
    says so (`xmine.artefacts.fileio.missing`; was: click's "does not exist" for a link that is
    there). Keyword arguments are click.Path's; `path_type` defaults to `pathlib.Path`."""

    def __init__(self, **kwargs):
        kwargs.setdefault("path_type", Path)
        super().__init__(exists=True, **kwargs)

    def convert(self, value, param, ctx):
        why = missing(value) if isinstance(value, (str, Path)) and str(value) != "-" else None
        if why is not None and why.startswith("a symbolic link"):
            raise InputError(value, why)
        return super().convert(value, param, ctx)


class InputPath(ExistingPath):
    """An existing local path, '-' (standard input) or an fsspec URL (`s3://...`, `memory://...`),
    which is given to the command as the string it is (a pathlib.Path would drop one of its
    slashes) and opened when the input is read (`xmine.io.stdin.spool_url`: an unknown protocol or a
    missing file is one error line there)."""

    def __init__(self):
        super().__init__(allow_dash=True)

    def convert(self, value, param, ctx):
        if is_url(value):
            return value
        return super().convert(value, param, ctx)


#: what the values of `--projection` mean (`xmine.encoders.projection.choose_projection`)
PROJECTION_VALUES = ("'default' (the projection shipped with xmine for the encoder; me5-small has one), 'none' "
                     "(raw encoder embeddings) or a projection directory (xmine train)")
#: what no `--projection` means where the command chooses as `xmine mine` does
PROJECTION_CHOSEN = ("Default: the shipped projection for me5-small once its SHIPPED.json says is_default; any other "
                     "encoder gets raw embeddings, said in a log line.")


#: `-q/--quiet`, handed to the command as `quiet`; each command gives its own help= (what it silences)
quiet_option = functools.partial(click.option, "-q", "--quiet", is_flag=True)


def comma_list(ctx, param, value: str | None) -> str | None:
    """A click callback checking a comma-separated list option while parsing, before any output is
    claimed: no item, or an item listed twice, is a usage error naming the option (was: `--langs ""`
    ran every language, and `--langs deu,deu` counted German twice in the averages). The value is
    returned as given."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",")]
    if not any(items):
        raise click.BadParameter(f"an empty list ({value!r}); leave the option out for its default")
    if not all(items):  # 'deu,' or 'deu,,fra': an item left out by mistake, not a list of one or two
        raise click.BadParameter(f"an empty item in {value!r}")
    folded = [item.casefold() for item in items]  # codes and names are read case-blind: deu,DEU is deu twice
    twice = sorted({item for item, f in zip(items, folded) if folded.count(f) > 1})
    if twice:
        raise click.BadParameter(f"{', '.join(twice)} listed twice")
    return value


def given_on_command_line(*params: str) -> list[str]:
    """The options among `params` (parameter names) that the user gave on the command line, as
    `--option-name`: for refusing options that the rest of the command makes meaningless."""
    ctx = click.get_current_context()
    return [f"--{name.replace('_', '-')}" for name in params
            if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]


def refuse_overwrite_without_output(overwrite: bool, out) -> None:
    """--overwrite given to a command that writes standard output without -o: a UsageError (was:
    accepted and unused, as if a file had been replaced)."""
    if overwrite and out is None:
        raise click.UsageError("--overwrite replaces an earlier -o OUTPUT; without -o nothing is replaced (the "
                               "answers go to standard output)")


def ray_option(what: str):
    """The `--ray [auto|ADDRESS]` click option; `what` says what runs on the cluster."""
    return click.option(
        "--ray", "ray_address", type=NAME, is_flag=False, flag_value="auto", default=None, metavar="[auto|ADDRESS]",
        help=f"Run {what} on a Ray cluster (needs the ray extra). `--ray` or `--ray auto`: the cluster "
             "this machine belongs to (`ray start`, RAY_ADDRESS), else a local one with this machine's "
             "CPUs; `--ray HOST:6379`: that cluster. Workers must see the same paths.")


def projection_option(what: str, *, default: str = PROJECTION_CHOSEN, multiple: bool = False):
    """`--projection default|none|DIR`, handed to the command as `projection` (a string or None),
    or with `multiple` as `projections` (a tuple, repeatable). `what` completes "Projection ..."
    (e.g. "to mine in"); `default` says what leaving it out does."""
    return click.option("--projection", "projections" if multiple else "projection", default=() if multiple else None,
                        type=NAME, multiple=multiple, metavar="default|none|DIR",
                        callback=_named_once if multiple else None,
                        help=f"Projection {what}: {PROJECTION_VALUES}. {default}")


def _named_once(ctx, param, values: tuple[str, ...]) -> tuple[str, ...]:
    """A repeatable --projection names each projection once (was: `--projection p --projection p/`
    measured p twice, as two numbered rows of one table). default/none in any case, a folder by
    where it resolves."""
    seen: dict[str, str] = {}
    if {v.lower() == "none" for v in values} == {True, False}:  # (was: 'none' dropped without a word)
        raise click.BadParameter("'none' (the raw encoder output alone) beside a projection: the raw output is "
                                 "measured anyway; leave 'none' out")
    for value in values:
        # (realpath: a link that loops is said where the projection is opened; resolve() raised)
        key = value.lower() if value.lower() in ("default", "none") else os.path.realpath(value)
        if key in seen:
            # (the same value twice: was "'default' names the projection 'default' names again")
            raise click.BadParameter(f"{value!r} is given twice" if value == seen[key] else
                                     f"{value!r} names the projection {seen[key]!r} names again")
        seen[key] = value
    return values


def _when(condition: bool, decorator):
    """`decorator` where `condition` holds, else one that leaves the function as it is."""
    return decorator if condition else (lambda f: f)


def input_format_options(f=None, *, per_side: bool = False, ids: bool = True):
    """--input-format, --text-field/--text-column, --id-field, --header, --split and
    --split-sentences, handed to the command as one `input_format` (an
    `xmine.io.reader_base.InputFormat`). `ids=False`: no --id-field (an index keeps each
    sentence's text and line number, not record ids: was offered by build-index and search, then
    refused). `per_side` (commands reading a SRC and a TGT): also
    --src-input-format/--tgt-input-format, --src-text-field/--tgt-text-field (--*-text-column),
    --src-id-field/--tgt-id-field, --src-header/--tgt-header and --src-split/--tgt-split, each
    overriding the shared option for its side (was: no per-side header, so a JSON Lines side beside
    a TSV side with a header line could not be read); `input_format` is then a (source, target)
    pair of InputFormats."""
    if f is None:
        return functools.partial(input_format_options, per_side=per_side, ids=ids)

    @click.option("--input-format", type=click.Choice(("auto",) + FORMATS), default="auto", show_default=True,
                  help="How to read a corpus: auto = by extension (.jsonl/.ndjson/.json: jsonl; .parquet: parquet; "
                       ".csv: csv; a compression suffix .gz/.xz/.zst/.bz2 is looked through) or folder (a Hugging "
                       "Face save_to_disk folder: hf), else text (one sentence a line, plain or compressed). "
                       "hf also reads data files (.parquet/.jsonl/.csv/.txt, or a folder of them) through "
                       "the datasets library, streaming. csv: RFC 4180, quotes honoured; tsv: tab-separated, "
                       "no quoting.")
    @click.option("--text-field", "--text-column", "text_field", type=NAME, default=None,
                  help="jsonl/hf: the field holding the text, dotted for nested objects (meta.text); parquet: "
                       "the column (dotted: a field of a struct column); csv/tsv: the column's name in the "
                       "header line or its 1-based number. [default: text]")
    @_when(ids, click.option("--id-field", type=NAME, default=None,
                             help="A field (dotted) holding each record's own id, kept with each sentence as "
                                  "provenance (mined outputs carry it). Default: records are named by their "
                                  "line/row number."))
    @click.option("--header/--no-header", default=None,
                  help="csv/tsv: whether the first line names the columns [default: csv yes, tsv no].")
    @click.option("--split", "hf_split", type=NAME, default=None,
                  help="hf: the split to read (default: the only one; a saved DatasetDict of several splits "
                       "needs it; data files: train).")
    @click.option("--split-sentences", is_flag=True,
                  help="Each record or line is a document or paragraph: split it into sentences with the "
                       "splitter chosen for the corpus language (needs "
                       f"{'--src-lang/--tgt-lang' if per_side else '--lang'}). Every sentence is a row that "
                       f"keeps its record number{' (or --id-field id)' if ids else ''} and its 1-based index in "
                       "the record; mined outputs carry both.")
    @functools.wraps(f)
    def wrapper(*args, input_format, text_field, header, hf_split, split_sentences, id_field=None, **kwargs):
        given = {"--text-field": text_field, "--id-field": id_field, "--header": header, "--split": hf_split}
        shared = dict(format=input_format, text_field="text" if text_field is None else text_field, id_field=id_field,
                      header=header, split=hf_split, split_sentences=split_sentences,
                      given=frozenset(name for name, value in given.items() if value is not None))
        if not per_side:
            return f(*args, input_format=InputFormat(**shared), **kwargs)
        specs = []
        for side in ("src", "tgt"):
            own = {name: kwargs.pop(f"{side}_{name}")
                   for name in ("format", "text_field", "id_field", "split", "header")}
            own_given = frozenset(f"--{side}-{name.replace('_', '-')}" for name, value in own.items()
                                  if value is not None and name != "format")
            format_option = "--input-format" if own["format"] is None else f"--{side}-input-format"
            specs.append(InputFormat(**{**shared, **{k: v for k, v in own.items() if v is not None},
                                        "given": shared["given"] | own_given, "format_option": format_option}))
        return f(*args, input_format=tuple(specs), **kwargs)

    if per_side:
        for side, name in (("tgt", "TGT"), ("src", "SRC")):
            wrapper = click.option(f"--{side}-split", f"{side}_split", type=NAME, default=None,
                                   help=f"--split for {name} only.")(wrapper)
            wrapper = click.option(f"--{side}-header/--{side}-no-header", f"{side}_header", default=None,
                                   help=f"--header for {name} only.")(wrapper)
            wrapper = click.option(f"--{side}-id-field", f"{side}_id_field", type=NAME, default=None,
                                   help=f"--id-field for {name} only.")(wrapper)
            wrapper = click.option(f"--{side}-text-field", f"--{side}-text-column", f"{side}_text_field",
                                   type=NAME, default=None,
                                   help=f"--text-field for {name} only (default: --text-field).")(wrapper)
            wrapper = click.option(f"--{side}-input-format", f"{side}_format",
                                   type=click.Choice(("auto",) + FORMATS), default=None,
                                   help=f"--input-format for {name} only (default: --input-format).")(wrapper)
    return wrapper


def repeated_options(ctx: click.Context, command: click.Command, args: list[str]) -> list[str]:
    """One line for each single-valued option of `command` (and of the subcommand a group's `args`
    name, and so on down) that `args` give more than once with different values: click keeps the
    last one without a word (was: `mine ... --src-lang de ... --src-lang fr` mined as French, and
    `--filters --no-filters` ran without filters, silently). Repeating an option is not refused, so
    that a shell alias's option can be overridden by giving it again; the user is told."""
    lines: list[str] = []
    while True:
        # a throwaway context that parses without reporting: the command's own parse says what is wrong
        scratch = click.Context(command, info_name=command.name, parent=ctx,
                                **{**command.context_settings, "resilient_parsing": True})
        _, rest, order = command.make_parser(scratch).parse_args(args=list(args))
        given = [p for p in order if isinstance(p, click.Option) and not p.multiple and not p.count]
        # a group's own options only: what follows its subcommand's name is the subcommand's
        own = list(args)[:len(args) - len(rest)] if isinstance(command, click.Group) else list(args)
        written = _values_given([p for p in command.get_params(scratch) if isinstance(p, click.Option)], own)
        for option in dict.fromkeys(p for p in given if given.count(p) > 1):
            values = written.get(option, [])
            if len(values) != given.count(option) or len(set(values)) > 1:  # the same value twice says nothing new
                shown = f" ({', then '.join(values)}): the last is used" if len(values) == given.count(option) else \
                    "; the last is used"
                name = "/".join((option.opts[-1], *option.secondary_opts[-1:]))
                lines.append(f"{name} given {given.count(option)} times{shown}")
        if not isinstance(command, click.Group) or not rest:
            return lines
        sub = command.get_command(scratch, rest[0])
        if sub is None:
            return lines
        ctx, command, args = scratch, sub, rest[1:]


def _values_given(options: list[click.Option], args: list[str]) -> dict[click.Option, list[str]]:
    """Each of `options`' values in `args`, in order, as written (a flag: the flag itself; an
    option of several values: them joined by a space). Every option's value is read as its value,
    so a value that looks like an option (`-o --k`) is not taken for one."""
    by_name = {name: o for o in options for name in (*o.opts, *o.secondary_opts)}
    values: dict[click.Option, list[str]] = {}
    i = 0
    while i < len(args) and args[i] != "--":
        word, joined = args[i], None
        if word.startswith("--") and "=" in word:
            word, joined = word.split("=", 1)
        elif word[:1] == "-" and word[1:2] != "-" and len(word) > 2 and word[:2] in by_name:
            # short options together (`-qo OUT`, `-k4`): flags, then at most one that takes the rest as its value
            for j in range(1, len(word)):
                short = by_name.get(f"-{word[j]}")
                if short is None or not short.is_flag:
                    word, joined = f"-{word[j]}", word[j + 1:] or None
                    break
                values.setdefault(short, []).append(f"-{word[j]}")
            else:
                i += 1
                continue
        option = by_name.get(word)
        if option is not None:
            if joined is not None:
                value = joined
            elif option.is_flag:
                value = word
            elif getattr(option, "_flag_needs_value", False) and (i + 1 == len(args) or args[i + 1].startswith("-")):
                value = str(option.flag_value)  # an option whose value may be left out (`--ray`)
            else:
                value = " ".join(args[i + 1:i + 1 + option.nargs])
                i += option.nargs
            values.setdefault(option, []).append(value)
        i += 1
    return values


__all__ = ["ExistingPath", "Finite", "InputPath", "LANG", "LangCode", "PROJECTION_CHOSEN", "PROJECTION_VALUES",
           "input_format_options", "projection_option", "quiet_option", "ray_option", "repeated_options"]
