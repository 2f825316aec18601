"""The `--precision`, `--runtime`, `--prompt`, `--prompt-name` and `--device` options, the same on
every command that encodes text."""

from __future__ import annotations

from typing import Any, Callable

import click

from xmine.encoders.base import DEFAULT_PRECISION, PRECISIONS
from xmine.encoders.loader import check_device
from xmine.encoders.runtime import RUNTIMES

PRECISION_HELP = (
    "Precision of a transformer encoder: auto = bf16 on CPUs with native bf16 (avx512_bf16/amx_bf16 "
    "in /proc/cpuinfo) and on CUDA GPUs that support it (fp16 on other GPUs), else fp32; fp32 = the "
    "weights as trained; bf16 = much faster on such CPUs, cosine to fp32 >= 0.999 (benchmarks/lab/embed_speed.py); "
    "fp16 for GPUs; int8 = OpenVINO only, NNCF-quantised, fastest, cosine to fp32 >= 0.995 (opt-in). "
    "Part of the encoder's fingerprint: stores, indexes and the cache of one precision "
    "refuse another (projections accept both). use-m3 is fp32 only."
)
RUNTIME_HELP = (
    "What runs a transformer encoder's forward pass: auto = openvino on x86 CPUs when the openvino package "
    "is installed (fused kernels, same tokens and pooling; the model is converted once and cached under "
    "$XMINE_HOME/models), torch on GPUs and elsewhere; torch = eager PyTorch; openvino = OpenVINO (CPU). "
    "Part of the fingerprint like --precision: stores, indexes and the cache of one runtime refuse another "
    "(projections accept both)."
)


PROMPT_HELP = (
    "Text put before every sentence a transformer encoder embeds (E5: 'query: ', the default of me5-small; "
    "'' = none). Default: the prompt of the store, index or projection given (where the command takes one), "
    "else the one the model's config names in default_prompt_name, as SentenceTransformer.encode uses it. Part of the "
    "fingerprint: stores and indexes of one prompt refuse another."
)
PROMPT_NAME_HELP = "A prompt of the model's config by name (its 'prompts', e.g. query or passage), instead of --prompt."


DEVICE_HELP = "Torch device that encodes text (cpu, cuda, cuda:1, mps). Default: cuda if present, else cpu."


#: `ctx.meta` key set by an option under which a command encodes nothing (`langid --lid`, `embed
#: --embeddings`, both eager): the command then refuses the encoding options by name
ENCODES_NOTHING = "xmine.encodes_nothing"


def encodes_nothing(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """The callback of such an option (give it `is_eager=True`: it is read before `--device`)."""
    if value is not None:
        ctx.meta[ENCODES_NOTHING] = True
    return value


def _present_device(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # A device that is not here: refused while the command line is read, before any work; where
    # nothing is encoded, --device is refused as such by the command (was: "CUDA is not available")
    if not ctx.meta.get(ENCODES_NOTHING):
        check_device(value)
    return value


def device_option() -> Callable:
    """`--device` as a click option: the command's `device` argument (None: auto), checked to be a
    device of this machine; `precision_option` adds it to every command that encodes text."""
    return click.option("--device", default=None, callback=_present_device, help=DEVICE_HELP)


def _one_prompt(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if param.name == "prompt_name" and value == "":  # (was: no option at all; `--prompt ''` is "no prompt")
        raise click.BadParameter("'' is empty (no prompt: --prompt '')", ctx, param)
    ctx.meta[f"xmine.{param.name}"] = value
    if ctx.meta.get("xmine.prompt") is not None and ctx.meta.get("xmine.prompt_name") is not None:
        raise click.UsageError("give --prompt TEXT or --prompt-name NAME, not both", ctx)
    return value


def prompt_options(f: Callable) -> Callable:
    """`--prompt TEXT` and `--prompt-name NAME`: the command's `prompt` and `prompt_name` arguments,
    which it passes on with the precision (`xmine.encoders.EncoderConfig`)."""
    f = click.option("--prompt-name", default=None, callback=_one_prompt, help=PROMPT_NAME_HELP)(f)
    return click.option("--prompt", default=None, callback=_one_prompt, help=PROMPT_HELP)(f)


def runtime_option(*, default_from: str | None = None) -> Callable:
    """`--runtime` as a click option: the command's `runtime` argument, which it passes on with the
    precision (`xmine.encoders.EncoderConfig`). Not given (None): the runtime of the artefacts the
    command meets, else auto."""
    default = f"{default_from}, else auto" if default_from else "auto"
    return click.option("--runtime", type=click.Choice(RUNTIMES), default=None,
                        help=f"{RUNTIME_HELP} [default: {default}]")


def precision_option(*, default_from: str | None = None) -> Callable:
    """`--precision` (value: "auto", "fp32", "bf16", "fp16", "int8"; bad values exit 2), with
    `--runtime` (`runtime_option`), `--prompt` and `--prompt-name` (`prompt_options`) and `--device`
    (`device_option`) beside it: the options of every command that encodes text, which receives
    `precision`, `runtime`, `prompt`, `prompt_name` and `device`.

    `default_from`: for commands that meet artefacts made earlier (stores, indexes): the default
    is None, which the command turns into the precision of those artefacts, else "auto", so that
    what it encodes matches them; the text says which artefacts, for --help.
    """
    if default_from:
        precision = click.option("--precision", type=click.Choice(PRECISIONS), default=None,
                                 help=f"{PRECISION_HELP} [default: {default_from}, else auto]")
    else:
        precision = click.option("--precision", type=click.Choice(PRECISIONS), default=DEFAULT_PRECISION,
                                 show_default=True, help=PRECISION_HELP)
    runtime = runtime_option(default_from=default_from.replace("precision", "runtime") if default_from else None)

    def together(f: Callable) -> Callable:
        return device_option()(precision(runtime(prompt_options(f))))

    return together
