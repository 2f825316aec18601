"""The lab: measuring and release scripts, run from a checkout (they are not installed with xmine).

    .venv/bin/python benchmarks/lab/run.py COMMAND [OPTIONS]     (--help lists the commands)

Each command measures something (speed, memory, quality, a threshold rule) or rebuilds the
projection shipped inside xmine, and writes its result JSON under benchmarks/results/, which
`xmine bench report` turns into benchmarks/RESULTS.md. The product's benchmarks are `xmine bench`.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click

from xmine.artefacts.directory import register_readers
from xmine.disentangle.projection import load_projection
from xmine.index.faiss_index import IndexDir

# The lab calls the library directly, so it composes it as the command line does.
register_readers(projection=load_projection, index=IndexDir.open)
#: this folder: the commands' modules import each other by name
LAB = Path(__file__).resolve().parent
#: the modules whose `command` makes up the group, in the order --help lists them
MODULES = ("quality", "ship_projection", "embed_speed", "mining_speed", "ray_speed", "scale", "memory_per_row",
           "scaling_inputs", "approximate_agreement", "splitters_flores", "numbers_filter", "langid_flores", "langid_unknown",
           "lid_thresholds", "threshold_study", "calibrate_defaults", "threshold_rules", "heldout_news", "heldout_wiki",
           "heldout_short", "estimate_no_share", "language_shift", "planted", "target_bounds",
           "gpu_check")


class _LabGroup(click.Group):
    """An xmine error (bad input, refused output) or a bad option of a command is one line and exit
    status 2, not a traceback or a usage block."""

    def invoke(self, ctx: click.Context):
        from xmine.errors import XmineError

        try:
            return super().invoke(ctx)
        except XmineError as e:
            click.echo(f"lab: error: {e}", err=True)
            sys.exit(2)
        except click.UsageError as e:
            command = f"{e.ctx.command_path}: " if e.ctx is not None else ""
            click.echo(f"lab: error: {command}{e.format_message()} (see --help)", err=True)
            sys.exit(2)


@click.group(cls=_LabGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120, "terminal_width": 120})
def lab() -> None:
    """Measuring and release scripts of xmine (see benchmarks/RESULTS.md for what each measured)."""


if str(LAB) not in sys.path:
    sys.path.insert(0, str(LAB))
for _name in MODULES:
    lab.add_command(importlib.import_module(_name).command)

if __name__ == "__main__":
    lab()
