"""Sorts of int64 arrays for kernels: insertion sort of short runs, then bottom-up merges. Plain
loops compile in a fraction of the time of Numba's np.sort / np.argsort (which carry NaN and
complex handling), give the same results (sort_pairs is stable, like kind="mergesort") and are as
fast on the short arrays the kernels sort.
"""
import numpy as np
from numba import njit

from pymap.kernels.segments import group_order
from pymap.kernels.threads import range_bounds, run_ranges

RUN = 32        # runs sorted by insertion before merging


@njit(cache=True, nogil=True)
def sort_int64(a, n):
    """Sort a[:n] ascending, in place."""
    sort_int64_buf(a, n, np.empty(n if n > RUN else 0, np.int64))


@njit(cache=True, nogil=True)
def sort_int64_buf(a, n, tmp):
    """sort_int64 with the caller's scratch (tmp: at least n elements when n > RUN); allocates
    nothing, so CUDA kernels can call it too."""
    for lo in range(0, n, RUN):
        hi = min(lo + RUN, n)
        for i in range(lo + 1, hi):
            x = a[i]
            j = i - 1
            while j >= lo and a[j] > x:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = x
    if n <= RUN:
        return
    src = a
    dst = tmp
    in_a = True
    width = RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            for k in range(lo, hi):
                if j >= hi or (i < mid and src[i] <= src[j]):
                    dst[k] = src[i]
                    i += 1
                else:
                    dst[k] = src[j]
                    j += 1
        src, dst = dst, src
        in_a = not in_a
        width *= 2
    if not in_a:
        for k in range(n):
            a[k] = src[k]


@njit(cache=True, nogil=True)
def sort_pairs(keys, vals, n):
    """Stable sort of (keys, vals)[:n] by keys, in place: entries of equal key keep their order."""
    m = n if n > RUN else 0
    sort_pairs_buf(keys, vals, n, np.empty(m, np.int64), np.empty(m, np.int64))


@njit(cache=True, nogil=True)
def sort_pairs_buf(keys, vals, n, tk, tv):
    """sort_pairs with the caller's scratch (tk, tv: at least n elements when n > RUN)."""
    for lo in range(0, n, RUN):
        hi = min(lo + RUN, n)
        for i in range(lo + 1, hi):
            x = keys[i]
            y = vals[i]
            j = i - 1
            while j >= lo and keys[j] > x:
                keys[j + 1] = keys[j]
                vals[j + 1] = vals[j]
                j -= 1
            keys[j + 1] = x
            vals[j + 1] = y
    if n <= RUN:
        return
    sk = keys
    sv = vals
    dk = tk
    dv = tv
    in_place = True
    width = RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            for k in range(lo, hi):
                if j >= hi or (i < mid and sk[i] <= sk[j]):
                    dk[k] = sk[i]
                    dv[k] = sv[i]
                    i += 1
                else:
                    dk[k] = sk[j]
                    dv[k] = sv[j]
                    j += 1
        sk, dk = dk, sk
        sv, dv = dv, sv
        in_place = not in_place
        width *= 2
    if not in_place:
        for k in range(n):
            keys[k] = sk[k]
            vals[k] = sv[k]


@njit(cache=True, nogil=True)
def _sort_segments(s0, s1, bounds, order, k1, k2):
    """Stable insertion sort of order[bounds[s]:bounds[s + 1]] by (k1, k2) for segments s0..s1-1."""
    for s in range(s0, s1):
        a = bounds[s]
        for j in range(a + 1, bounds[s + 1]):
            x = order[j]
            x1 = k1[x]
            x2 = k2[x]
            t = j
            while t > a and (k1[order[t - 1]] > x1 or (k1[order[t - 1]] == x1 and k2[order[t - 1]] > x2)):
                order[t] = order[t - 1]
                t -= 1
            order[t] = x


def order_by_group(group, n_groups, k1, k2=None):
    """The permutation np.lexsort((k2, k1, group)) gives (stable; k2 None: lexsort((k1, group))) for
    group values in [0, n_groups) with few items each (the candidates or hits of a read): a counting
    sort by group, then each group's items sorted on threads. Linear where lexsort is n log n."""
    group = np.ascontiguousarray(group, np.int64)
    n = group.shape[0]
    bounds, order, ok = group_order(group, n_groups)
    if not ok:
        raise ValueError(f"group values must lie in [0, {n_groups})")
    k1 = np.ascontiguousarray(k1, np.int64)
    k2 = np.zeros(n, np.int64) if k2 is None else np.ascontiguousarray(k2, np.int64)
    run_ranges(_sort_segments, range_bounds(n_groups, 1024), bounds, order, k1, k2)
    return order
