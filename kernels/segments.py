"""Per-segment values spread over their segments (np.repeat), as kernels that run outside Python's
lock: NumPy's repeat holds it, and on the GPU path the batch threads side by side share that lock
(py-spy: np.repeat in about 15 % of their samples holding it)."""
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _repeat(values, counts):
    total = 0
    for c in counts:
        if c < 0:
            raise ValueError("repeat: a negative count")
        total += c
    out = np.empty(total, np.int64)
    k = 0
    for i in range(counts.shape[0]):
        out[k:k + counts[i]] = values[i]
        k += counts[i]
    return out


@njit(cache=True, nogil=True)
def _segment_of(counts):
    total = 0
    for c in counts:
        if c < 0:
            raise ValueError("segment_of: a negative count")
        total += c
    out = np.empty(total, np.int64)
    k = 0
    for i in range(counts.shape[0]):
        out[k:k + counts[i]] = i
        k += counts[i]
    return out


def repeat(values, counts):
    """np.repeat(values, counts) as int64, values and counts of the same length, counts >= 0."""
    values, counts = np.ascontiguousarray(values, np.int64), np.ascontiguousarray(counts, np.int64)
    if values.shape != counts.shape:
        raise ValueError(f"repeat: {values.shape[0]} values against {counts.shape[0]} counts")
    return _repeat(values, counts)


def segment_of(counts):
    """np.repeat(np.arange(len(counts)), counts) as int64: each item's segment, counts >= 0."""
    return _segment_of(np.ascontiguousarray(counts, np.int64))
