"""kernels.segments: the nogil loops that replace np.repeat, ufunc.at and np.unique on the batch glue
give NumPy's results."""
import numpy as np
import pytest

from pymap.kernels import segments


def test_repeat_index_and_concat_ranges_equal_numpy():
    rng = np.random.default_rng(1)
    for n in (0, 1, 7, 500):
        counts = rng.integers(0, 4, n).astype(np.int64)
        first = rng.integers(0, 1000, n).astype(np.int64)
        assert np.array_equal(segments.repeat_index(counts), np.repeat(np.arange(n), counts))
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        assert np.array_equal(segments.concat_ranges(first, counts), np.repeat(first, counts) + within)


def test_group_order_and_ranks():
    rng = np.random.default_rng(2)
    group = rng.integers(0, 50, 2000).astype(np.int64)
    bounds, order, ok = segments.group_order(group, 50)
    assert ok and np.array_equal(order, np.argsort(group, kind="stable"))
    assert np.array_equal(bounds, np.searchsorted(group[order], np.arange(51)))
    rank = segments.group_ranks(group, order)
    for g in (0, 17, 49):
        assert np.array_equal(rank[order[bounds[g]:bounds[g + 1]]], np.arange(bounds[g + 1] - bounds[g]))
    assert not segments.group_order(np.array([3, 50], np.int64), 50)[2]
    assert not segments.group_order(np.array([-1], np.int64), 50)[2]


def test_group_starts_equal_searchsorted():
    """Sorted groups of int32 and int64 keys, with empty groups first, inside and last."""
    rng = np.random.default_rng(3)
    for n_groups, n in ((1, 0), (5, 0), (40, 1), (40, 300), (2000, 900)):
        for dtype in (np.int32, np.int64):
            group = np.sort(rng.integers(1, max(n_groups - 1, 2), n)).astype(dtype) if n_groups > 1 else \
                np.zeros(n, dtype)
            assert np.array_equal(segments.group_starts(group, n_groups),
                                  np.searchsorted(group, np.arange(n_groups + 1)))


def test_swap_groups_equal_a_stable_sort():
    """Groups taken from the new list where asked, else from the old (empty groups on either side),
    equal the NumPy way: the kept old items and the new ones sorted stably by group."""
    rng = np.random.default_rng(4)
    for n_groups, n_old, n_new in ((1, 0, 0), (30, 80, 0), (30, 0, 50), (200, 500, 300)):
        old_g = np.sort(rng.integers(0, n_groups, n_old))
        new_g = np.sort(rng.integers(0, n_groups, n_new))
        take = rng.random(n_groups) < 0.4
        old_v = rng.integers(-1000, 1000, n_old).astype(np.int32)
        new_v = rng.integers(-1000, 1000, n_new).astype(np.int32)
        starts, moved, placed, runs = segments.swap_plan(segments.group_starts(old_g, n_groups),
                                                         segments.group_starts(new_g, n_groups), take)
        kept, used = np.flatnonzero(~take[old_g]), np.flatnonzero(take[new_g])
        group = np.concatenate([old_g[kept], new_g[used]])
        order = np.argsort(group, kind="stable")
        at = np.empty(order.size, np.int64)
        at[order] = np.arange(order.size)
        assert np.array_equal(starts, np.searchsorted(group[order], np.arange(n_groups + 1)))
        expect_moved, expect_placed = np.full(n_old + 1, -1), np.full(n_new + 1, -1)
        expect_moved[kept], expect_placed[used] = at[:kept.size], at[kept.size:]
        assert np.array_equal(moved, expect_moved) and np.array_equal(placed, expect_placed)
        merged = segments.swap_groups(old_v, new_v, runs, starts[n_groups])
        assert runs.shape[0] <= 2 * take.sum() + 1      # the kept stretches between taken groups, and those
        assert merged.dtype == np.int32
        assert np.array_equal(merged, np.concatenate([old_v[kept], new_v[used]])[order])


@pytest.mark.parametrize("limit", [segments.PAIR_TABLE_LIMIT, 1])
def test_distinct_pairs_equal_np_unique(monkeypatch, limit):
    """The dense table and the np.unique fallback (a limit of one cell) give np.unique's pairs."""
    monkeypatch.setattr(segments, "PAIR_TABLE_LIMIT", limit)
    rng = np.random.default_rng(3)
    a = rng.choice([36, 100, 150, 151, 250], 3000).astype(np.int64)
    b = rng.integers(0, 9, a.size).astype(np.int32)
    first, second, index = segments.distinct_pairs(a, b)
    pairs, inverse = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
    assert np.array_equal(first, pairs[:, 0]) and np.array_equal(second, pairs[:, 1])
    assert np.array_equal(index, inverse.reshape(-1))
    empty = segments.distinct_pairs(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert all(x.size == 0 for x in empty)
