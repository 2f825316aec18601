"""The `--precision` option, the same on every command that encodes text."""

from __future__ import annotations

from typing import Callable

import click

from xmine.encoders import DEFAULT_PRECISION, PRECISIONS

PRECISION_HELP = (
    "Precision of a transformer encoder: auto = bf16 on CPUs with native bf16 (avx512_bf16/amx_bf16 "
    "in /proc/cpuinfo) and on CUDA GPUs that support it (fp16 on other GPUs), else fp32; fp32 = the "
    "weights as trained; bf16 = much faster on such CPUs, cosine to fp32 >= 0.999 (benchmarks/embed_speed.py); "
    "fp16 for GPUs. Part of the encoder's fingerprint: stores, indexes and the cache of one precision "
    "refuse another (projections accept both). use-m3 is fp32 only."
)


def precision_option(*, default_from: str | None = None) -> Callable:
    """`--precision` as a click option (value: "auto", "fp32", "bf16", "fp16"; bad values exit 2).

    `default_from`: for commands that meet artefacts made earlier (stores, indexes): the default
    is None, which the command turns into the precision of those artefacts, else "auto", so that
    what it encodes matches them; the text says which artefacts, for --help.
    """
    if default_from:
        return click.option("--precision", type=click.Choice(PRECISIONS), default=None,
                            help=f"{PRECISION_HELP} [default: {default_from}, else auto]")
    return click.option("--precision", type=click.Choice(PRECISIONS), default=DEFAULT_PRECISION,
                        show_default=True, help=PRECISION_HELP)
