"""Candidate locations from seed hits: hits packed as (diagonal, pattern index), clustered by diagonal
(single linkage within max_edits), one candidate per cluster plus a runner-up for clusters stretched
by tandem repeats.
"""
import numpy as np
from numba import njit

from pymap.kernels.sorting import sort_int64_buf, sort_pairs_buf

HIT_SHIFT = 20          # hits are packed as ((diag + HIT_BIAS) << HIT_SHIFT) | pattern index
HIT_BIAS = 1 << 20      # reads shorter than 2**20 bases


@njit(cache=True, nogil=True)
def cluster_hits(hits, nh, max_e, min_hits, max_cands, stamp, stamp0, cpos, csup, out, tmp):
    """Sort hits, merge diagonals within max_e (single linkage), keep per cluster the diagonal hit by
    the most patterns (ties: smallest), drop clusters with fewer than min_hits distinct patterns,
    keep the max_cands best supported (ties: smallest pos). A cluster whose diagonals span more than
    max_e (a read inside a tandem array: the same alignment at several shifts of the unit, chained
    together) also yields its runner-up: the diagonal with the most hits among those more than max_e
    from the first one, supported by its hit count, so that selection sees a second locus. Writes
    positions ascending into out; returns (count, next stamp value). Sorts hits[:nh] in place.
    Scratch: cpos, csup (nh elements), tmp (4 nh); nothing is allocated (CUDA kernels call it too)."""
    if nh == 0:
        return 0, stamp0
    sort_int64_buf(hits, nh, tmp)
    h = hits
    mask = (np.int64(1) << HIT_SHIFT) - 1
    nc = 0
    st = stamp0
    i = np.int64(0)
    while i < nh:
        st += 1
        sup = 0
        best_d = np.int64(0)
        best_c = -1
        d_first = (h[i] >> HIT_SHIFT) - HIT_BIAS
        d_prev = d_first
        j = i
        while j < nh:
            d = (h[j] >> HIT_SHIFT) - HIT_BIAS
            if j > i and d - d_prev > max_e:
                break
            # run of equal diagonals
            k = j
            c = 0
            while k < nh and (h[k] >> HIT_SHIFT) - HIT_BIAS == d:
                p = h[k] & mask
                if stamp[p] != st:
                    stamp[p] = st
                    sup += 1
                c += 1
                k += 1
            if c > best_c:
                best_c = c
                best_d = d
            d_prev = d
            j = k
        if sup >= min_hits:
            cpos[nc] = best_d
            csup[nc] = sup
            nc += 1
            if d_prev - d_first > max_e:
                run_d, run_c = _runner_up(h, i, j, best_d, max_e)
                if run_c >= min_hits:
                    cpos[nc] = run_d
                    csup[nc] = run_c
                    nc += 1
                    if run_d < best_d:      # keep cpos ascending (ties below: smallest pos)
                        cpos[nc - 2], cpos[nc - 1] = cpos[nc - 1], cpos[nc - 2]
                        csup[nc - 2], csup[nc - 1] = csup[nc - 1], csup[nc - 2]
        i = j
    if nc <= max_cands:
        for t in range(nc):
            out[t] = cpos[t]
        return nc, st
    neg = tmp[:nc]                          # the max_cands best supported (stable: ties keep pos order) ...
    order = tmp[nc:2 * nc]
    for t in range(nc):
        neg[t] = -csup[t]
        order[t] = t
    sort_pairs_buf(neg, order, nc, tmp[2 * nc:3 * nc], tmp[3 * nc:4 * nc])
    sort_int64_buf(order, max_cands, tmp[2 * nc:3 * nc])   # ... in pos order
    for t in range(max_cands):
        out[t] = cpos[order[t]]
    return max_cands, st


@njit(cache=True, nogil=True)
def _runner_up(h, i, j, best_d, max_e):
    """(diagonal, hit count) of the most hit diagonal of sorted hits h[i:j] lying more than max_e
    from best_d (ties: smallest diagonal); count 0 when there is none."""
    run_d = np.int64(0)
    run_c = 0
    k = i
    while k < j:
        d = (h[k] >> HIT_SHIFT) - HIT_BIAS
        c = 0
        while k < j and (h[k] >> HIT_SHIFT) - HIT_BIAS == d:
            c += 1
            k += 1
        if abs(d - best_d) > max_e and c > run_c:
            run_c = c
            run_d = d
    return run_d, run_c
