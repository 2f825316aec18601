"""A NaN row is reported by side and by its row in the whole side, also from a tile of the product."""

import pickle

import numpy as np
import pytest

from xmine.errors import NonFiniteRowError
from xmine.mining.knn import exact_knn_both
from xmine.mining.knn import tile_knn

# (was: "RuntimeWarning: invalid value encountered in subtract" from the bf16 product's row terms, a
# line before the one-line refusal of a NaN row)
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def _unit(n, seed):
    x = np.random.default_rng(seed).standard_normal((n, 16)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("side,row", [("src", 5), ("tgt", 33)])
def test_exact_search_names_the_side_and_row(side, row):
    x, y = _unit(20, 0), _unit(40, 1)
    (x if side == "src" else y)[row, 2] = np.inf
    with pytest.raises(NonFiniteRowError) as e:
        exact_knn_both(x, y, 3)
    assert (e.value.side, e.value.row) == (side, row)


def test_a_tile_reports_the_row_of_the_whole_side():
    x, y = _unit(20, 0), _unit(40, 1)
    y[33, 0] = np.nan
    with pytest.raises(NonFiniteRowError) as e:
        tile_knn(x, y, 10, 20, 30, 40, 3, 8, 8)
    assert (e.value.side, e.value.row) == ("tgt", 33)
    again = pickle.loads(pickle.dumps(e.value))  # how it crosses from a Ray worker to the driver
    assert (again.side, again.row, str(again)) == ("tgt", 33, str(e.value))
