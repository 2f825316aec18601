"""ShardRows: any row selection read from the shard files equals the same rows of the whole array."""

import numpy as np
import pytest

from xmine.errors import ArtefactError
from xmine.store.rows import ShardRows


@pytest.fixture
def shards(tmp_path):
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((n, 6)).astype(np.float16) for n in (700, 1, 1300, 500)]
    paths = []
    for i, p in enumerate(parts):
        np.save(tmp_path / f"emb-{i}.npy", p)
        paths.append(tmp_path / f"emb-{i}.npy")
    return paths, np.concatenate(parts)


@pytest.mark.parametrize("pick", ["scattered", "runs and repeats", "one span", "shard edges"])
def test_rows_equal_the_whole_array(shards, pick):
    paths, whole = shards
    rows = ShardRows(paths)
    rng = np.random.default_rng(1)
    idx = {"scattered": rng.choice(len(whole), 40, replace=False),  # far apart: one read per row
           "runs and repeats": np.concatenate([np.arange(690, 712), [5, 5, 2499, 701, 0], np.arange(2001, 1990, -1)]),
           "one span": np.arange(100, 180)[::-1],
           "shard edges": np.array([699, 700, 701, 2000, 2001, 2499, 0])}[pick]
    assert np.array_equal(rows[idx], whole[idx])
    assert np.array_equal(rows[3:2010], whole[3:2010])


def test_a_truncated_shard_is_a_short_read(shards):
    paths, whole = shards
    rows = ShardRows(paths)
    data = paths[2].read_bytes()
    paths[2].write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtefactError, match="short read"):
        rows[np.array([0, 2400, 1900, 5])]  # row 1900: shard 2, past its cut
