"""A raw store's rows through a projection, written once beside the work that needs them (mining
reads a side many times) and reused while the store and projection are the same."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from xmine.fileio import atomic_path, atomic_write_json
from xmine.input_artefacts import manifest_hash
from xmine.projection import ProjectionLike
from xmine.store.rows import ShardRows


# Rows projected at once: the projection's float32 input and output (2 x 64k x dim x 4 bytes).
PROJECT_BLOCK = 65_536


def project_rows(store, projection: ProjectionLike, out: Path, *, lang: str | None = None,
                 show_progress: bool = True) -> ShardRows:
    """The store's rows through `projection` ("meaning"), written block by block to `out` (.npy,
    the store's dtype) once; a marker beside it records what was projected, so a later call with
    the same store and projection reuses the file."""
    from tqdm.auto import tqdm

    marker = out.with_suffix(".json")
    want = {"store": manifest_hash(store.directory), "projection": projection.fingerprint()["id"],
            "rows": len(store), "lang": lang}
    if marker.is_file() and out.is_file():
        try:
            if json.loads(marker.read_text(encoding="utf-8")) == want:
                return ShardRows([out])
        except ValueError:
            pass
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = store.rows()
    first = projection.transform(rows[0:1].astype(np.float32), "meaning", lang=lang)
    with atomic_path(out) as tmp:
        dst = np.lib.format.open_memmap(tmp, mode="w+", dtype=rows.dtype, shape=(len(store), first.shape[1]))
        bar = tqdm(total=len(store), desc=f"projecting {store.directory.name}", unit="rows",
                   disable=not show_progress, leave=False)
        for start in range(0, len(store), PROJECT_BLOCK):
            block = rows[start: start + PROJECT_BLOCK].astype(np.float32)
            dst[start: start + len(block)] = projection.transform(block, "meaning", lang=lang)
            bar.update(len(block))
        bar.close()
        dst.flush()
        del dst
    rows.close()
    atomic_write_json(marker, want)
    return ShardRows([out])
