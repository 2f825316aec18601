"""How an `xmine bench` task command runs: its shared options, its result JSON claimed first, every
variant (raw, then each projection's parts) evaluated, then the table printed and the JSON written.

A command declares its own options under `task_options` (the shared ones reach `evaluate_variants`
and `finish`, not the command), computes its settings, calls `evaluate_variants` with one evaluation
function of its task module and builds its table; `finish` prints it and writes the result with
provenance.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from pathlib import Path
from typing import Callable

import click

from xmine.benchmarks import common
from xmine.benchmarks.report import TASK_TITLES
from xmine.encoders import load_encoder
from xmine.encoders.loader import untrained_languages
from xmine.encoders.projection import DEFAULT, NONE, open_projection
from xmine.encoders.options import precision_option
from xmine.options import NAME, GivenPath, given_on_command_line, projection_option, quiet_option
from xmine.artefacts.input_artefacts import encoding_prompt, projection_encoder
from xmine.artefacts.outputs import claim_output
from xmine.paths import data_root

log = logging.getLogger(__name__)

ENCODER_HELP = ("Encoder: me5-small, use-m3, or any sentence-transformers name/path; with --projection DIR, the "
                "encoder that projection was made for unless given.")
DATA_HELP = (
    "The data root (holding tatoeba/, mlqe/, sts2017/, parallel/, massive/) or the data set's own "
    "folder. Default: $XMINE_DATA, else ../shared/data beside the checkout."
)


#: where a command's claimed output, --quick, start time, encoder options and (once evaluated) its
#: encoder and variants wait for `evaluate_variants` and `finish` (click's context meta)
_RUN = "xmine.bench.run"
#: the options of `task_options` that only `evaluate_variants` reads
_ENCODER_OPTIONS = ("encoder_name", "projections", "device", "precision", "runtime", "prompt", "prompt_name")


#: options that change what is printed, where inputs or side outputs live, or the task's own name
#: (`--noisy`), not which result it is: they leave the default result name alone
_NOT_VARIANTS = {"out", "overwrite", "quick", "quiet", "data_dir", "encoder_name", "device", "noisy",
                 "per_lang", "per_locale", "spearman", "write_pairs", "sets_dir"}


def variant_tag(*, exclude: tuple[str, ...] = ()) -> str:
    """The running bench command's options given on its command line (or environment), at other
    than their defaults, that make its result a variant of the default run:
    "-bf16-langsdeu_fra-maxpairs300" for `--precision bf16 --langs deu,fra --max-pairs 300` (a flag
    by its name, a choice by its value, projection directories as "proj" and their names, the rest
    name and value; over 60 characters, a hash). "" for the default run. ("default" and "none" as
    --projection choose rows of the default run's table, which say which they are.) `exclude`: more
    options that leave the name alone (a command's own naming of them, or its required inputs)."""
    ctx = click.get_current_context()
    tags = []
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if (param.name in _NOT_VARIANTS or param.name in exclude or value == param.default
                or ctx.get_parameter_source(param.name) in (None, click.core.ParameterSource.DEFAULT,
                                                            click.core.ParameterSource.DEFAULT_MAP)):
            continue
        if param.name == "projections":
            dirs = [Path(v).name for v in value if v not in ("default", "none")]
            if dirs:
                tags.append("proj" + "_".join(dirs))
            continue
        if isinstance(value, (list, tuple)):
            value = "_".join(map(str, value))
        if getattr(param, "is_flag", False):
            tags.append(param.name.replace("_", "") if value else f"no{param.name.replace('_', '')}")
        elif isinstance(param.type, click.Choice):
            tags.append(str(value))
        else:
            tags.append(param.name.replace("_", "") + str(value).replace(",", "_"))
    tag = common.safe_name("-".join(tags)) if tags else ""
    if len(tag) > 60:
        tag = hashlib.sha256(tag.encode()).hexdigest()[:12]
    return f"-{tag}" if tag else ""


def encoder_of(encoder_name: str, projections, *, param: str = "encoder_name") -> str:
    """The encoder to load: --encoder (the command's parameter `param`) where given on the command
    line, else the one the first projection directory was made for (as `xmine embed --projection
    DIR` takes it), else the default."""
    if given_on_command_line(param):
        return encoder_name
    return next((made for p in projections if (made := projection_encoder(p)) is not None), encoder_name)


def _claimed_out(fn: Callable) -> Callable:
    """Claim the result JSON (--out, or the default path) before the benchmark runs, so a refused
    output costs nothing: never an input, never a foreign file, replaced only with --overwrite."""
    name = fn.__name__.removesuffix("_cmd")

    @functools.wraps(fn)
    def run(*args, **kw):
        task = name + ("_noisy" if kw.get("noisy") else "")  # `bench mining --noisy` has its own result
        kw["encoder_name"] = encoder_of(kw["encoder_name"], kw["projections"])
        # a subset or another setting of a task is not its default result: it gets a name of its own
        out = Path(kw["out"]) if kw["out"] else common.default_out(task, kw["encoder_name"] + variant_tag(),
                                                                   quick=kw["quick"])
        with claim_output(out, kind=common.RESULT_KIND, form="json", overwrite=kw.pop("overwrite"),
                          inputs=[data_root(kw["data_dir"]), *kw["projections"]]):
            for spec in kw["projections"]:  # a damaged projection refused before any data is read or built
                if str(spec).lower() not in (DEFAULT, NONE):  # (was: `bench mining` built its sets first)
                    open_projection(spec)
            del kw["out"]
            click.get_current_context().meta[_RUN] = {"out": out, "quick": kw["quick"], "started": time.time(),
                                                      "quiet": kw.pop("quiet"),
                                                      **{k: kw.pop(k) for k in _ENCODER_OPTIONS}}
            return fn(*args, **kw)

    return run


def task_options(fn: Callable) -> Callable:
    """The options every task command has (encoder, projections, data, result JSON, --quick, -q,
    device, precision, runtime); the result JSON is claimed before the command runs."""
    task = fn.__name__.removesuffix("_cmd")
    fn = _claimed_out(fn)
    options = [
        click.option("--encoder", "encoder_name", type=NAME, default="me5-small", show_default=True, help=ENCODER_HELP),
        projection_option("to compare", multiple=True,
                          default="Repeat to compare several in one table; the raw encoder output is always the "
                                  "first row." + (" The default projection is added by itself unless a projection "
                                                  "(or 'none') is named." if task == "mining" else
                                                  " Default: none, the raw encoder output alone.")),
        click.option("--data-dir", type=GivenPath(file_okay=False), default=None, help=DATA_HELP),
        click.option("--out", type=GivenPath(dir_okay=False), default=None,
                     help=f"Result JSON. Default: benchmarks/results/{task}-<encoder>[-<options given>][-quick].json, "
                          f"e.g. {task}-me5-small-bf16-quick.json for --precision bf16 --quick."),
        click.option("--overwrite", is_flag=True, help="Replace the result JSON if it is an earlier xmine result."),
        click.option("--quick", is_flag=True, help="A small fixed subset, for smoke runs (seconds, not minutes)."),
        quiet_option(help="No progress bars (the result table is still printed)."),
        precision_option(),
    ]
    return functools.reduce(lambda f, option: option(f), reversed(options), fn)


def setup(encoder_name: str, projections: tuple[str, ...], device: str | None, precision: str,
          runtime: str | None = None, prompt: str | None = None, prompt_name: str | None = None,
          parts=("meaning", "language"), add_default: bool = False, show_progress: bool = True):
    """The encoder and its variants: raw, then each projection's `parts`, encoding with progress
    bars where `show_progress`. No prompt given: the first projection directory's, as `xmine embed
    --projection` takes it."""
    prompt = encoding_prompt(prompt, prompt_name, projections, encoder_name)
    encoder = load_encoder(encoder_name, device=device, precision=precision, runtime=runtime, prefix=prompt,
                           prompt_name=prompt_name)
    return encoder, common.make_variants(encoder, projections, parts=parts, add_default=add_default,
                                         show_progress=show_progress)


def evaluate_variants(evaluate: Callable, *, parts=("meaning", "language"), add_default: bool = False) -> dict:
    """Load the command's encoder and evaluate each variant (raw, then each projection's parts) with
    `evaluate(variant)`: {variant name: result}, in variant order."""
    run = click.get_current_context().meta[_RUN]
    run["encoder"], run["variants"] = setup(*(run[k] for k in _ENCODER_OPTIONS), parts=parts, add_default=add_default,
                                            show_progress=not run["quiet"])
    return {v.name: evaluate(v) for v in run["variants"]}


def current_encoder():
    """The encoder `evaluate_variants` loaded for the running command."""
    return click.get_current_context().meta[_RUN]["encoder"]


def _languages_read(parameters: dict) -> list[str]:
    """The languages a task's `parameters` name: its langs or locales (with a pivot), or the two
    sides of its language pairs ("en-de")."""
    langs = list(parameters.get("langs") or parameters.get("locales") or [])
    langs += [side for pair in parameters.get("pairs") or [] for side in str(pair).split("-")[:2]]
    if parameters.get("pivot"):
        langs.append(parameters["pivot"])
    return list(dict.fromkeys(langs))


def note_untrained_languages(encoder_name: str, parameters: dict) -> dict:
    """`parameters` with the languages the task read that the encoder was not trained on (use-m3
    lists 15), said as a warning: its rows for them measure an encoder outside its languages."""
    langs = _languages_read(parameters)
    untrained = untrained_languages(encoder_name, langs)
    if not untrained:
        return parameters
    log.warning(f"{encoder_name} was not trained on {', '.join(untrained)} ({len(untrained)} of the {len(langs)} "
                "languages read): its numbers there measure an encoder outside its languages")
    return parameters | {"encoder_untrained_languages": untrained}


def finish(task, details, *, parameters, columns, rows, files=None, digits: int = 1, extra_tables=None) -> None:
    """Print the table and write the result JSON the command claimed (files: the data read, by
    default the first variant's `files`)."""
    run = click.get_current_context().meta[_RUN]
    parameters = note_untrained_languages(run["encoder"].name, parameters)
    # what the numbers are (their unit, the metric) and what measured them (was: the title alone, the
    # precision and runtime that --precision auto chose unsaid)
    fp = run["encoder"].fingerprint()
    click.echo(f"{TASK_TITLES.get(task, task)}: {fp['name']} at {common.run_at(fp)}"
               + ", a --quick subset" * bool(run["quick"]), err=True)
    click.echo(common.format_table(columns, rows, digits=digits))
    common.write_result(run["out"], task=task, encoder=run["encoder"], variants=run["variants"],
                        data_files=next(iter(details.values()))["files"] if files is None else files,
                        # --projection as given: `none` (raw alone) is told from no option (the default rows)
                        parameters=parameters | {"quick": run["quick"], "projection": list(run["projections"])},
                        columns=columns, rows=rows, details=details,
                        seconds=time.time() - run["started"], extra_tables=extra_tables)
    click.echo(f"wrote {run['out']}", err=True)
