"""The worst-case read set on which pymap.slack measures a filter's threshold allowance (Numba).

For read length L and e edits: reads with k = 1..e indel bases (insertions, deletions or both, in
one or several gaps, at the left end, in the middle or at the right end of the read, REPS variants
each), the remaining edits as substitutions (next to the gaps half of the time, where they shorten
the filters' runs of matches), each read paired with the equal-length reference segment at its
alignment's first diagonal and at its last. Random choices come from splitmix64 seeded with (L, e):
the set depends on nothing else. Built in milliseconds (the Python version took 0.07-0.15 s per
(L, e), tens of seconds on a first run over trimmed reads of every length).
"""
import numpy as np
from numba import njit

from pymap.kernels.select import mix64

_ASCII = np.frombuffer(b"ACGT", np.uint8).copy()
#: variants per (indel bases, place, kind); the first of each has one gap and no substitution. 24:
#: against 6 (the set of pymap's Python version, 2026-11), the allowances measured on 124 (L, e) of
#: 30-300 bp and e = L / 10 for four filters rose where they differed (18 of 20), as a fuller search
#: of the worst cases should make them
REPS = 24
#: the set's version, part of the key of the measured allowances kept in the user's cache
VERSION = 2


@njit(cache=True, nogil=True)
def _below(state, n):
    """(next state, a pseudo-random integer in [0, n))."""
    state = state + np.uint64(1)
    return state, np.int64(mix64(state) % np.uint64(n))


@njit(cache=True, nogil=True)
def _cases(length, e, reps, ascii):
    """(reads uint8[n, length], refs uint8[n, length]): the worst-case pairs of (length, e), ASCII."""
    per_case = 2
    most = e * 3 * 3 * reps * per_case
    reads = np.empty((most, length), np.uint8)
    refs = np.empty((most, length), np.uint8)
    n = 0
    state = np.uint64(length) * np.uint64(1009) + np.uint64(e) + np.uint64(0x5DEECE66D)
    span = max(8, length // 6)
    read = np.empty(length + e + 1, np.uint8)
    for k in range(1, e + 1):
        wlen = length + 3 * k + 8
        window = np.empty(wlen, np.uint8)
        sizes = np.empty(k, np.int64)
        kinds = np.empty(k, np.int64)
        at = np.empty(k, np.int64)
        cuts = np.arange(1, max(k, 1))
        for where in range(3):
            lo = 0 if where == 0 else (length // 2 - span // 2 if where == 1 else length - span)
            for kind in range(3):                       # 0 insertions, 1 deletions, 2 mixed
                for rep in range(reps):
                    for i in range(wlen):
                        state, b = _below(state, 4)
                        window[i] = ascii[b]
                    ngaps, subs = 1, 0
                    if rep > 0:
                        state, ngaps = _below(state, k)
                        ngaps += 1
                        state, subs = _below(state, e - k + 1)
                    # gap sizes summing to k: ngaps - 1 distinct cut points of 1..k-1 (partial shuffle)
                    for i in range(ngaps - 1):
                        state, j = _below(state, k - 1 - i)
                        cuts[i], cuts[i + j] = cuts[i + j], cuts[i]
                    chosen = np.sort(cuts[:ngaps - 1])
                    prev = 0
                    for g in range(ngaps):
                        nxt = chosen[g] if g < ngaps - 1 else k
                        sizes[g] = nxt - prev
                        prev = nxt
                        t = kind
                        if kind == 2:
                            state, t = _below(state, 2)
                        kinds[g] = t
                        state, t = _below(state, span)
                        at[g] = lo + t
                    at[:ngaps].sort()
                    # the read, left to right: runs of the window between the gaps (a gap whose place
                    # an earlier insertion jumped over is dropped)
                    w = k + 4
                    start = w
                    r = 0
                    g = 0
                    while r < length:
                        if g < ngaps and r == at[g]:
                            if kinds[g] == 0:
                                for i in range(sizes[g]):
                                    state, b = _below(state, 4)
                                    read[r + i] = ascii[b]
                                r += sizes[g]
                            else:
                                w += sizes[g]
                            g += 1
                            continue
                        stop = at[g] if g < ngaps and at[g] > r else length
                        for i in range(stop - r):
                            read[r + i] = window[w + i]
                        w += stop - r
                        r = stop
                    end = w
                    # substitutions, next to the gaps half of the time
                    state, coin = _below(state, 2)
                    near = np.empty(2 * ngaps, np.int64)
                    for g in range(ngaps):
                        state, d = _below(state, 3)
                        near[2 * g] = min(max(at[g] - 1 - d, 0), length - 1)
                        state, d = _below(state, 3)
                        near[2 * g + 1] = min(max(at[g] + 1 + d, 0), length - 1)
                    near = np.unique(near)
                    pool = near if coin == 0 and subs <= near.size else np.arange(length)
                    pool = pool.copy()
                    for i in range(subs):
                        state, j = _below(state, pool.size - i)
                        pool[i], pool[i + j] = pool[i + j], pool[i]
                        p = pool[i]
                        code = 0
                        while ascii[code] != read[p]:
                            code += 1
                        state, d = _below(state, 3)
                        read[p] = ascii[(code + 1 + d) % 4]
                    reads[n] = read[:length]
                    refs[n] = window[start:start + length]
                    n += 1
                    if end - length >= 0:
                        reads[n] = read[:length]
                        refs[n] = window[end - length:end]
                        n += 1
    return reads[:n], refs[:n]


def worst_case_pairs(length, e, reps=REPS):
    """(reads, refs) uint8 ASCII arrays (n, length): reads within e edits (semi-global) of a
    reference stretch, each paired with the equal-length segment at its first or last diagonal;
    none where e is 0 or the read too short for e indel bases at either end (length < 4e + 8)."""
    if e == 0 or length < 4 * e + 8:
        return np.empty((0, length), np.uint8), np.empty((0, length), np.uint8)
    return _cases(np.int64(length), np.int64(e), np.int64(reps), _ASCII)
