"""kernels.borrow.borrowed: views without memory records, for the kernels' hot loops."""
import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from pymap.kernels.borrow import borrowed


@njit
def _sums(a, b, scale):
    """Slices of borrowed views in a loop and through a helper, a scalar passed through the tuple."""
    a, b, scale = borrowed((a, b, scale))
    one = borrowed(a)
    total = 0.0
    for i in range(a.shape[0] - 1):
        total += _head(a[i:i + 2]) * scale + one[i + 1]
    b[:] = 7
    return total


@njit
def _head(x):
    return x[0]


@njit
def _listed(items):
    return borrowed((items,))


def test_borrowed_views_read_and_write_the_arrays():
    a = np.arange(10, dtype=np.float64)
    b = np.zeros(4, np.int32)
    want = sum(a[i] * 3 + a[i + 1] for i in range(9))
    for _ in range(3):                              # repeated calls: nothing freed under the views
        assert _sums(a, b, 3) == want
    assert b.tolist() == [7] * 4 and a.tolist() == list(range(10))


def test_borrowed_takes_only_arrays_and_plain_values():
    from numba.typed import List
    with pytest.raises(TypingError):
        _listed(List([1, 2]))
