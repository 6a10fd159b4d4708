"""kernels.sorting.order_by_group: the permutation np.lexsort gives, by a counting sort and per-group sorts."""
import numba
import numpy as np
import pytest

from pymap.kernels.sorting import order_by_group


@pytest.mark.parametrize("threads", [1, 2])
def test_order_by_group_equals_lexsort(threads):
    """Random groups (empty ones, one huge one, unsorted input), keys with many ties, negative keys;
    with two keys and with one: the same permutation as np.lexsort, which is stable."""
    rng = np.random.default_rng(3)
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        for trial in range(40):
            n = int(rng.integers(0, 3000))
            groups = int(rng.integers(1, 400))
            g = rng.integers(0, groups, n)
            if trial % 5 == 0 and n:
                g[: n // 2] = groups - 1                   # one group holding half the items
            k1 = rng.integers(-4, 4, n).astype(np.int8)
            k2 = rng.integers(-10**12, 10**12, n) if trial % 2 else rng.integers(0, 3, n)
            assert np.array_equal(order_by_group(g, groups, k1, k2), np.lexsort((k2, k1, g)))
            assert np.array_equal(order_by_group(g, groups, k2), np.lexsort((k2, g)))
    finally:
        numba.set_num_threads(old)
    assert order_by_group(np.zeros(0, np.int64), 5, np.zeros(0, np.int64)).shape == (0,)
    with pytest.raises(ValueError):
        order_by_group(np.array([0, 5]), 5, np.zeros(2, np.int64))
