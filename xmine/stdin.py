"""Standard input as a corpus (`-`): xmine reads an input more than once (checked, then embedded),
so standard input is first copied, block by block, into a file of the command's own work
directory, and read from there in any single-file format (--input-format; by default one
sentence a line)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from xmine.errors import InputError
from xmine.fileio import atomic_path

STDIN = "-"


def is_stdin(path) -> bool:
    return str(path) == STDIN


def spool_stdin(directory: str | Path, name: str = "stdin") -> Path:
    """Copy standard input into `directory/name` (replacing an earlier copy) and return that path."""
    target = Path(directory) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as tmp, open(tmp, "wb") as f:
        shutil.copyfileobj(sys.stdin.buffer, f, 1 << 20)
    if target.stat().st_size == 0:
        raise InputError(STDIN, "standard input is empty")
    return target


__all__ = ["STDIN", "is_stdin", "spool_stdin"]
