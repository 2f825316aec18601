"""Mining from stores costs memory by the block and the per-row state, never by a copy of a side
(issue #38): the peak RSS of `xmine mine` in a child process, with one side 10x larger, may grow
by no more than the per-row state (top-k lists, norms, ids) documented in docs/scaling.md."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xmine.store import StoreWriter

# Slow tier (`pytest -m "not slow"` is the fast one): child processes mining stores of 80k rows.
pytestmark = pytest.mark.slow

DIM = 384
SMALL, LARGE, OTHER = 8_000, 80_000, 2_000
#: The most a mined row may add to the peak, in bytes: the per-row state (top-k lists, the exact
#: search's per-worker candidate lists, norms, ids; docs/scaling.md) measured 140-780 bytes a row
#: here; a float32 copy of a side is 4 * DIM = 1,536 bytes a row, and the approximate search's
#: FAISS calls over whole query blocks cost 4.5 KB a row.
BYTES_PER_ROW = 1000

# The child mines and prints its own peak (VmHWM: getrusage would report the parent's after exec).
_CHILD = """
import sys
from xmine.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    print([l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1])
"""


def _words(i: int, lead: str) -> str:
    """A distinct letters-only sentence per i (the pre-search cleaning keys texts by their letters,
    and drops a text found on both sides)."""
    word = ""
    while True:
        i, d = divmod(i, 26)
        word += chr(97 + d)
        if i == 0:
            return f"{lead} {word} here"


def _store(path: Path, n: int, seed: int, lang: str) -> Path:
    rng = np.random.default_rng(seed)
    with StoreWriter(path, encoder={"name": "toy-384", "dim": DIM, "id": "toy-384-v1"}, lang=lang, dim=DIM,
                     shard_rows=20_000) as w:
        for lo in range(0, n, 10_000):
            v = rng.standard_normal((min(10_000, n - lo), DIM)).astype(np.float32)
            w.add(v / np.linalg.norm(v, axis=1, keepdims=True), [_words(i, lang) for i in range(lo, lo + len(v))])
    return path


def _peak_mb(src: Path, tgt: Path, out: Path, *options: str) -> float:
    # glibc's malloc keeps freed blocks of up to 32 MB for reuse (its mmap threshold rises with
    # each one freed), tens of MB of noise in RSS; a fixed threshold returns them at once, so the
    # peak is what the code holds. The per-row state includes a candidate list per worker thread, so
    # the child runs on two threads (BLAS's and FAISS's), the margin measured on any machine's cores.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(1 << 20), "OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, "mine", str(src), str(tgt), "-o", str(out), "-q",
                           "--threshold", "none", *options], capture_output=True, text=True, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.strip().splitlines()[-1]) / 1024


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("memory")
    return {"other": _store(d / "other", OTHER, 0, "xx"), "small": _store(d / "small", SMALL, 1, "yy"),
            "large": _store(d / "large", LARGE, 2, "yy"), "dir": d}


@pytest.mark.parametrize("search", [[], ["--approximate"]], ids=["exact", "approximate"])
@pytest.mark.parametrize("large_side", ["tgt", "src"])
def test_peak_memory_grows_by_the_row_state_only(stores, search, large_side):
    peaks = {}
    for size in ("small", "large"):
        pair = (stores["other"], stores[size]) if large_side == "tgt" else (stores[size], stores["other"])
        peaks[size] = _peak_mb(*pair, stores["dir"] / f"{size}-{large_side}-{len(search)}.tsv", *search)
    per_row = (peaks["large"] - peaks["small"]) * 2**20 / (LARGE - SMALL)
    assert per_row <= BYTES_PER_ROW, (
        f"peak RSS {peaks['small']:.0f} MB with {SMALL:,} rows, {peaks['large']:.0f} MB with {LARGE:,}: "
        f"{per_row:.0f} bytes a row (at most {BYTES_PER_ROW})")
