"""The comparison layouts of the neighborhood index (MAROSE Figure 8), derived from the phf index arrays
(kernels/nbindex_build.py) without the reference:

    'bsearch': blk_d int64[nblk+1] and dist idx[D, 3] = (neighborhood, start, end): each block's distinct
               neighborhoods sorted, with the range of their positions in `pos` (binary search).
    'list':    pos_nb uint32[P], the neighborhood of every entry of `pos` (scanned block by block).

Their lookups are in nbindex_query.py.
"""
import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True, nogil=True)
def _count_used(blk, slots, cnt):
    nblk = blk.shape[0] - 1
    for s in prange(nblk):
        c = 0
        for v in range(np.int64(blk[s, 0]), np.int64(blk[s + 1, 0])):
            if slots[v + 1, 1] > slots[v, 1]:
                c += 1
        cnt[s + 1] = c


@njit(cache=True, nogil=True)
def _fill_dist_block(s, blk, slots, blk_d, dist):
    d0 = blk_d[s]
    d = d0
    for v in range(np.int64(blk[s, 0]), np.int64(blk[s + 1, 0])):
        if slots[v + 1, 1] > slots[v, 1]:
            dist[d, 0] = slots[v, 0]
            dist[d, 1] = slots[v, 1]
            dist[d, 2] = slots[v + 1, 1]
            d += 1
    n = d - d0
    if n > 32:
        order = np.argsort(dist[d0:d, 0].copy())
        tmp = dist[d0:d].copy()
        for i in range(n):
            dist[d0 + i, 0] = tmp[order[i], 0]
            dist[d0 + i, 1] = tmp[order[i], 1]
            dist[d0 + i, 2] = tmp[order[i], 2]
    else:
        for i in range(d0 + 1, d):
            x0 = dist[i, 0]
            x1 = dist[i, 1]
            x2 = dist[i, 2]
            j = i - 1
            while j >= d0 and dist[j, 0] > x0:
                dist[j + 1, 0] = dist[j, 0]
                dist[j + 1, 1] = dist[j, 1]
                dist[j + 1, 2] = dist[j, 2]
                j -= 1
            dist[j + 1, 0] = x0
            dist[j + 1, 1] = x1
            dist[j + 1, 2] = x2


@njit(parallel=True, cache=True, nogil=True)
def _fill_dist(blk, slots, blk_d, dist):
    for s in prange(blk.shape[0] - 1):
        _fill_dist_block(s, blk, slots, blk_d, dist)


def bsearch_layout(blk, slots):
    """(blk_d int64[nblk+1], dist idx[D, 3]): each block's distinct neighborhoods sorted, with the
    range of their positions in `pos`."""
    nblk = blk.shape[0] - 1
    cnt = np.zeros(nblk + 1, np.int64)
    _count_used(blk, slots, cnt)
    blk_d = np.cumsum(cnt)
    dist = np.empty((int(blk_d[-1]), 3), slots.dtype)
    _fill_dist(blk, slots, blk_d, dist)
    return blk_d, dist


@njit(parallel=True, cache=True, nogil=True)
def list_layout(slots, P):
    """pos_nb uint32[P]: the neighborhood of every entry of the positions table."""
    out = np.empty(P, np.uint32)
    V = slots.shape[0] - 1
    for v in prange(V):
        for i in range(np.int64(slots[v, 1]), np.int64(slots[v + 1, 1])):
            out[i] = slots[v, 0]
    return out
