"""Index arithmetic over segments (a read's candidates, a record's CIGAR ops) as nogil kernels.

A batch's glue called np.repeat, np.maximum.at and np.unique on arrays of up to a million items, and
py-spy found the batches' threads holding Python's lock inside them (BENCHMARKS.md, twenty-seventh
session): with batches mapped side by side on threads, the others waited meanwhile. These loops
release it.
"""
import numpy as np
from numba import njit


def repeat_index(counts):
    """np.repeat(np.arange(counts.size), counts): each i, counts[i] times (counts: int64)."""
    return _runs(np.arange(counts.shape[0], dtype=np.int64), counts, 0)


def concat_ranges(first, counts):
    """first[i], first[i] + 1, ..., first[i] + counts[i] - 1 for each i, back to back (int64 arrays)."""
    return _runs(first, counts, 1)


@njit(cache=True, nogil=True)
def _runs(first, counts, step):
    """first[i] + step * j for j < counts[i], for each i, back to back."""
    total = 0
    for c in counts:
        total += c
    out = np.empty(total, np.int64)
    k = 0
    for i in range(counts.shape[0]):
        for j in range(counts[i]):
            out[k] = first[i] + step * j
            k += 1
    return out


@njit(cache=True, nogil=True)
def group_ranks(group, order):
    """rank[order[i]]: how many items before order[i] in `order` share its group (order lists each
    group's items together, as order_by_group gives)."""
    n = order.shape[0]
    rank = np.empty(n, np.int64)
    start = 0
    for i in range(n):
        if i > 0 and group[order[i]] != group[order[i - 1]]:
            start = i
        rank[order[i]] = i - start
    return rank


@njit(cache=True, nogil=True)
def group_starts(group, n_groups):
    """starts[g] for g in 0..n_groups: how many items lie in groups below g (group's values in
    [0, n_groups), which the caller guarantees). For group sorted ascending, group g is
    [starts[g], starts[g + 1]): np.searchsorted(group, np.arange(n_groups + 1)) in one pass."""
    starts = np.zeros(n_groups + 1, np.int64)
    for g in group:
        starts[g + 1] += 1
    for g in range(n_groups):
        starts[g + 1] += starts[g]
    return starts


@njit(cache=True, nogil=True)
def swap_plan(old_starts, new_starts, take_new):
    """Groups of two lists, each sorted by group (old_starts, new_starts: their group_starts), merged:
    group g from the new list where take_new[g], else from the old. Returns (starts: the merged
    list's group_starts, moved: where each old item went, -1 where its group was taken from the new
    list, placed: where each new item went, -1 likewise, runs: the merge as copies of contiguous
    items, rows (from the new list: 0 or 1, first item there, where it goes, items), for
    swap_groups); moved and placed end with an extra -1 (an index of -1 maps to -1)."""
    n = take_new.shape[0]
    starts = np.zeros(n + 1, np.int64)
    moved = np.full(old_starts[n] + 1, -1, np.int64)
    placed = np.full(new_starts[n] + 1, -1, np.int64)
    runs = np.empty((n + 1, 4), np.int64)
    m = 0
    for g in range(n):
        k = starts[g]
        src = new_starts if take_new[g] else old_starts
        a, b = src[g], src[g + 1]
        if b > a:
            if m > 0 and runs[m - 1, 0] == take_new[g] and runs[m - 1, 1] + runs[m - 1, 3] == a:
                runs[m - 1, 3] += b - a         # goes on where the last run ends (its items are next)
            else:
                runs[m, 0], runs[m, 1], runs[m, 2], runs[m, 3] = take_new[g], a, k, b - a
                m += 1
        dest = placed if take_new[g] else moved
        for i in range(a, b):
            dest[i] = k
            k += 1
        starts[g + 1] = k
    return starts, moved, placed, runs[:m]


@njit(cache=True, nogil=True)
def swap_groups(old, new, runs, size):
    """The merged list of swap_plan (size: its length, starts[-1]) as values, of new's dtype: its runs
    copied, mostly a few long stretches of the old list."""
    out = np.empty(size, new.dtype)
    for r in range(runs.shape[0]):
        a, d, c = runs[r, 1], runs[r, 2], runs[r, 3]
        if runs[r, 0]:
            out[d:d + c] = new[a:a + c]
        else:
            out[d:d + c] = old[a:a + c]
    return out


@njit(cache=True, nogil=True)
def group_order(group, n_groups):
    """(bounds, order, ok): the indices 0..n-1 placed stably by group (a counting sort), group g's at
    order[bounds[g]:bounds[g + 1]]; ok False (order empty) for a group outside [0, n_groups)."""
    bounds = np.zeros(n_groups + 1, np.int64)
    for g in group:
        if g < 0 or g >= n_groups:
            return bounds, np.empty(0, np.int64), False
        bounds[g + 1] += 1
    for g in range(n_groups):
        bounds[g + 1] += bounds[g]
    starts = bounds[:-1].copy()
    order = np.empty(group.shape[0], np.int64)
    for i in range(group.shape[0]):
        g = group[i]
        order[starts[g]] = i
        starts[g] += 1
    return bounds, order, True


#: the most cells of distinct_pairs' dense table (4 MB); arrays spanning more go through np.unique
PAIR_TABLE_LIMIT = 1 << 22


def distinct_pairs(a, b):
    """(first, second, index): the distinct pairs (a[k], b[k]) of two integer arrays in increasing
    order, and each item's pair. Through a dense table over the arrays' ranges (a batch's read
    lengths and edit thresholds span few values), else np.unique."""
    a = np.ascontiguousarray(a, np.int64)
    b = np.ascontiguousarray(b, np.int64)
    a0, b0, width, present = _pair_table(a, b, PAIR_TABLE_LIMIT)
    if present.size:
        cells = np.flatnonzero(present)
        ids = np.zeros(present.size, np.int64)
        ids[cells] = np.arange(cells.size)
        return a0 + cells // width, b0 + cells % width, _look_up_pairs(a, b, a0, b0, width, ids)
    pairs, index = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
    return pairs[:, 0].copy(), pairs[:, 1].copy(), index.reshape(-1).astype(np.int64)


@njit(cache=True, nogil=True)
def _pair_table(a, b, size_limit):
    """(a0, b0, width, present): present[(a[k] - a0) * width + b[k] - b0] True for each pair that
    occurs, over the arrays' ranges; `present` empty when that takes over size_limit cells."""
    a0 = a1 = b0 = b1 = np.int64(0)
    if a.shape[0]:
        a0 = a1 = a[0]
        b0 = b1 = b[0]
    for k in range(a.shape[0]):
        a0 = min(a0, a[k])
        a1 = max(a1, a[k])
        b0 = min(b0, b[k])
        b1 = max(b1, b[k])
    width = b1 - b0 + 1
    if (a1 - a0 + 1) * width > size_limit:
        return a0, b0, width, np.zeros(0, np.bool_)
    present = np.zeros((a1 - a0 + 1) * width, np.bool_)
    for k in range(a.shape[0]):
        present[(a[k] - a0) * width + b[k] - b0] = True
    return a0, b0, width, present


@njit(cache=True, nogil=True)
def _look_up_pairs(a, b, a0, b0, width, table):
    out = np.empty(a.shape[0], np.int64)
    for k in range(a.shape[0]):
        out[k] = table[(a[k] - a0) * width + b[k] - b0]
    return out
