"""What the lab's measurements share: a process's peak memory, installed versions, child processes,
their result files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from xmine.benchmarks.common import RESULT_KIND
from xmine.artefacts.fileio import atomic_write_manifest


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


def blas_info() -> dict:
    """The BLAS numpy uses here (threadpoolctl): library, kernel (architecture), threads, version."""
    from threadpoolctl import threadpool_info

    for p in threadpool_info():
        if p.get("user_api") == "blas":
            return {k: p.get(k) for k in ("internal_api", "architecture", "num_threads", "version")}
    return {}


def lab_command(*args) -> list[str]:
    """The command line running `benchmarks/lab/run.py ARGS` in a fresh Python process."""
    return [sys.executable, str(Path(__file__).with_name("run.py")), *map(str, args)]


def child_json(cmd: list[str], **kw) -> Any:
    """Run `cmd` in a fresh process (so its peak memory is its own) and parse the last line of its
    stdout as JSON; its stderr is the error when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: the `kind` of a lab measurement's result JSON (what lets a rerun replace it)
SPEED_KIND = "speed-benchmark-result"


def write_result_json(out: str | Path, result: dict[str, Any], *, kind: str = RESULT_KIND) -> None:
    """Write a lab result JSON ({"kind": kind, **result}) atomically.

    These scripts exist to regenerate their own result file, so an earlier result of the same
    kind is replaced; anything else at `out` is refused (xmine.artefacts.outputs).
    """
    from xmine.artefacts.outputs import claim_output

    with claim_output(out, kind=kind, form="json", overwrite=True):
        atomic_write_manifest(out, {"kind": kind, **result})


def write_speed_result(out: str | Path, result: dict[str, Any], *, benchmark: str) -> None:
    """Write a speed measurement's JSON (`python benchmarks/lab/run.py <benchmark>`), as `write_result_json`."""
    write_result_json(out, {"benchmark": benchmark, **result}, kind=SPEED_KIND)
