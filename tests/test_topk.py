"""xmine.topk.merge_topk: the one merge of top-k lists, in the one canonical order."""

import numpy as np

from xmine.topk import merge_topk


def test_ties_go_to_the_lower_index_and_missing_entries_last():
    a = (np.array([[0.9, 0.5, -np.inf]], np.float32), np.array([[7, 3, -1]]))
    b = (np.array([[0.9, 0.8, 0.1]], np.float32), np.array([[2, 9, -1]]))  # -1 with a finite value: missing
    s, i = merge_topk([a[0], b[0]], [a[1], b[1]], 5)
    assert i.tolist() == [[2, 7, 9, 3, -1]]
    np.testing.assert_array_equal(s, np.array([[0.9, 0.9, 0.8, 0.5, -np.inf]], np.float32))
    assert s.dtype == np.float32 and i.dtype == np.int64


def test_one_wide_list_is_cut_to_k_and_a_short_one_padded():
    s, i = merge_topk([np.array([[0.2, 0.7, 0.7, 0.1]])], [np.array([[5, 4, 1, 0]])], 2)
    assert i.tolist() == [[1, 4]]
    s, i = merge_topk([np.array([[0.3]])], [np.array([[8]])], 3)
    assert i.tolist() == [[8, -1, -1]] and np.isneginf(s[0, 1:]).all()


def test_the_order_does_not_depend_on_how_the_lists_are_cut():
    rng = np.random.default_rng(0)
    sims = rng.integers(0, 5, size=(50, 40)).astype(np.float32) / 4  # many exact ties
    ids = np.stack([rng.permutation(1000)[:40] for _ in range(50)])
    whole = merge_topk([sims], [ids], 6)
    parts = merge_topk([sims[:, :13], sims[:, 13:29], sims[:, 29:]], [ids[:, :13], ids[:, 13:29], ids[:, 29:]], 6)
    np.testing.assert_array_equal(whole[1], parts[1])
    order = np.lexsort((ids, -sims), axis=1)[:, :6]
    np.testing.assert_array_equal(whole[1], np.take_along_axis(ids, order, 1))
