"""What the lab's measurements share: a process's peak memory, installed versions, their result files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xmine.fileio import atomic_write_json


def rss_mb(pid: int | str = "self", *, peak: bool = True) -> float:
    """A process's peak resident memory in MB (VmHWM; `peak=False`: its current one, VmRSS), from
    /proc; NaN where /proc has no such process. Not getrusage's ru_maxrss: Linux keeps that across
    exec, so a child started by a large parent would report the parent's peak."""
    field = "VmHWM:" if peak else "VmRSS:"
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return float("nan")


def installed_version(dist: str) -> str | None:
    """The installed version of distribution `dist`, None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


#: the `kind` of a lab measurement's result JSON (what lets a rerun replace it)
SPEED_KIND = "speed-benchmark-result"


def write_speed_result(out: str | Path, result: dict[str, Any], *, benchmark: str) -> None:
    """Write a lab measurement's JSON (`python benchmarks/lab/run.py <benchmark>`) atomically.

    These scripts exist to regenerate their own result file, so an earlier result of the same
    kind is replaced; anything else at `out` is refused (xmine.outputs).
    """
    from xmine.outputs import claim_output

    with claim_output(out, kind=SPEED_KIND, form="json", overwrite=True):
        atomic_write_json(out, {"kind": SPEED_KIND, "benchmark": benchmark, **result})
