"""Neighborhood index build (MAROSE, Sections II-III): seed blocks addressed by BDZ perfect hashing
(kernels/phf.py). This module defines the index arrays; nbindex_query.py reads them.

Layout (all arrays plain NumPy; `idx` is uint32, or uint64 for references of 2**32 positions or more):

    blk    idx[nblk+1, 2]  blk[s, 0]: first vertex of nb_block(s)'s hypergraph; blk[s, 1]: its Jenkins seed J.
                           The block's vertex count is m = blk[s+1, 0] - blk[s, 0] = 3 r (0: empty block).
    g      uint8[ceil(V/4)] the BDZ assignment, 2 bits per vertex (vertex v: bits 2(v&3).. of byte v>>2).
    slots  idx[V+1, 2]     the first-level table, one slot per vertex: slots[v, 0] the stored neighborhood
                           (EMPTY_NB for a free slot), slots[v, 1] the offset of its positions in `pos`;
                           positions of slot v are pos[slots[v, 1]:slots[v+1, 1]] (empty for free slots).
    pos    idx[P]          the second-level table: reference positions (global coordinate of the first
                           base of the seed span), grouped by block, then by slot, ascending in a slot.

A seed s is the 2-bit codes of the care positions of the seed pattern (span `span`, k care positions,
key < 4**k); its neighborhood b is the `ln` bases after the span, packed 2 bits a base, first base most
significant (so numeric order is lexicographic order). Positions whose span + neighborhood touches an N
or a contig end are not indexed.

phf(b) for block s: (x, y, z) = Jenkins lookup2 of the 4-byte key b with initval J (a = b = golden ratio,
c = J + 4, a += b, mix); vertices v0 = x % r, v1 = r + y % r, v2 = 2r + z % r (one per part, as BDZ);
phf(b) = v_j with j = (g[v0] + g[v1] + g[v2]) mod 3. A lookup: blk row, 3 bits of g (usually one cache
line), one slot row, then the positions: a fixed number of memory accesses, no probing.

The build: seed key of every position (seed_keys), positions grouped by key (counting_sort), blocks cut
into chunks of similar size (chunk_bounds); per block, in parallel over chunks (threads.py), the entries
sorted by neighborhood and a Jenkins seed J found that peels (sort_and_solve), then the hypergraph
rebuilt with that J to write g and the tables (fill_tables).
"""
import numba
import numpy as np
from numba import njit

from pymap.kernels.phf import assign, build_phf, hyperedges, pack_g, peel
from pymap.kernels.sorting import sort_pairs
from pymap.kernels.threads import range_bounds, run_ranges

EMPTY_NB = 0xFFFFFFFF


@njit(cache=True, nogil=True)
def pack_nb(codes, a, ln):
    """The neighborhood codes[a:a+ln] packed 2 bits a base, first base most significant."""
    x = np.int64(0)
    for i in range(ln):
        x = (x << 2) | codes[a + i]
    return x


@njit(cache=True, nogil=True)
def seed_keys(a, b, codes, offsets, care, span, ln, keys):
    """keys[p] for positions a <= p < b: the int32 seed key, -1 where span + neighborhood touches an N
    or leaves the contig."""
    G = codes.shape[0]
    W = span + ln
    ncare = care.shape[0]
    lo = 0                           # c = the contig holding a: the last c with offsets[c] <= a
    hi = offsets.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if offsets[mid] <= a:
            lo = mid + 1
        else:
            hi = mid
    c = lo - 1
    end = offsets[c + 1]
    last_n = np.int64(-1)
    for q in range(a, min(G, a + W - 1)):
        if codes[q] > 3:
            last_n = q
    for p in range(a, b):
        while p >= end:
            c += 1
            end = offsets[c + 1]
        q = p + W - 1
        if q < G and codes[q] > 3:
            last_n = q
        if p + W > end or last_n >= p:
            keys[p] = -1
            continue
        k = np.int64(0)
        for i in range(ncare):
            k = (k << 2) | codes[p + care[i]]
        keys[p] = k


@njit(cache=True, nogil=True)
def counting_sort(keys, nblk):
    """Positions grouped by seed key (ascending within a block): (blk_pos int64[nblk+1], pos int64[P])."""
    counts = np.zeros(nblk + 1, np.int64)
    for p in range(keys.shape[0]):
        k = keys[p]
        if k >= 0:
            counts[k + 1] += 1
    for i in range(nblk):
        counts[i + 1] += counts[i]
    cur = counts[:-1].copy()
    pos = np.empty(counts[nblk], np.int64)
    for p in range(keys.shape[0]):
        k = keys[p]
        if k >= 0:
            pos[cur[k]] = p
            cur[k] += 1
    return counts, pos


def chunk_bounds(starts, nchunks):
    """Split blocks into about nchunks contiguous ranges of similar total size: boundaries 0, ..., nblk
    where the entries (starts: int64[nblk+1] cumulative) pass each multiple of total / nchunks."""
    nblk = starts.shape[0] - 1
    targets = int(starts[nblk]) * np.arange(1, nchunks, dtype=np.int64) // nchunks
    cuts = np.searchsorted(starts[:nblk], targets, side="left")
    return np.concatenate([[0], np.unique(cuts[cuts > 0]), [nblk]]).astype(np.int64)


@njit(cache=True, nogil=True)
def sort_and_solve(b0, b1, codes, span, ln, blk_pos, pos, ratio, extra, max_tries, nbs, seeds, rs):
    """Blocks b0..b1-1: sort entries by neighborhood (into nbs/pos), find the PHF (seeds, rs)."""
    nmax = 1
    for s in range(b0, b1):
        nmax = max(nmax, blk_pos[s + 1] - blk_pos[s])
    nbv = np.empty(nmax, np.int64)
    pv = np.empty(nmax, np.int64)
    keys = np.empty(nmax, np.int64)
    for s in range(b0, b1):
        a = blk_pos[s]
        n = blk_pos[s + 1] - a
        if n == 0:
            seeds[s] = 0
            rs[s] = 0
            continue
        for i in range(n):
            p = pos[a + i]
            pv[i] = p
            nbv[i] = pack_nb(codes, p + span, ln)
        sort_pairs(nbv, pv, n)              # by neighborhood; positions stay ascending within one
        d = np.int64(0)
        for i in range(n):
            nbs[a + i] = nbv[i]
            pos[a + i] = pv[i]
            if i == 0 or nbv[i] != nbv[i - 1]:
                keys[d] = nbv[i]
                d += 1
        seed, r, gt, slot = build_phf(keys, d, s, ratio, extra, max_tries)
        seeds[s] = seed
        rs[s] = r


@njit(cache=True, nogil=True)
def fill_tables(b0, b1, blk_pos, pos_sorted, nbs, seeds, rs, vstart, gt_all, slots, pos_out):
    """Blocks b0..b1-1: rebuild the PHF with the J found, write g (unpacked), the first-level slots and
    the positions in slot order."""
    nmax = 1
    mmax = 3
    for s in range(b0, b1):
        nmax = max(nmax, blk_pos[s + 1] - blk_pos[s])
        mmax = max(mmax, vstart[s + 1] - vstart[s])
    keys = np.empty(nmax, np.int64)
    kstart = np.empty(nmax + 1, np.int64)
    ev = np.empty((nmax, 3), np.int64)
    oe = np.empty(nmax, np.int64)
    ov = np.empty(nmax, np.int64)
    deg = np.empty(mmax, np.int64)
    xr = np.empty(mmax, np.int64)
    stack = np.empty(mmax, np.int64)
    vkey = np.empty(mmax, np.int64)
    for s in range(b0, b1):
        a = blk_pos[s]
        n = blk_pos[s + 1] - a
        vs = vstart[s]
        m = vstart[s + 1] - vs
        if m == 0:
            continue
        d = np.int64(0)
        for i in range(n):
            if i == 0 or nbs[a + i] != nbs[a + i - 1]:
                keys[d] = nbs[a + i]
                kstart[d] = a + i
                d += 1
        kstart[d] = a + n
        hyperedges(keys, d, rs[s], seeds[s], ev)
        peel(ev, d, m, deg, xr, stack, oe, ov)
        gt = gt_all[vs:vs + m]
        assign(ev, d, oe, ov, gt)
        for u in range(m):
            vkey[u] = -1
        for e in range(d):
            j = (np.int64(gt[ev[e, 0]]) + gt[ev[e, 1]] + gt[ev[e, 2]]) % 3
            vkey[ev[e, j]] = e
        off = a
        for u in range(m):
            v = vs + u
            e = vkey[u]
            slots[v, 1] = off
            if e < 0:
                slots[v, 0] = EMPTY_NB
            else:
                slots[v, 0] = keys[e]
                for i in range(kstart[e], kstart[e + 1]):
                    pos_out[off] = pos_sorted[i]
                    off += 1


def build(codes, offsets, care, span, ln, ratio=1.23, extra=1, max_tries=64, nchunks=None):
    """Build the index arrays {blk, g, slots, pos} for reference codes with contig offsets.

    care: int64 offsets of the care positions inside the seed span (contiguous seed: arange(ls)).
    nchunks: ranges of blocks of similar total size that the threads share (default: 8 per thread);
    the arrays do not depend on it.
    """
    care = np.ascontiguousarray(care, dtype=np.int64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    k = care.shape[0]
    nblk = 4 ** k
    G = codes.shape[0]
    keys = np.empty(G, np.int32)
    run_ranges(seed_keys, range_bounds(G, 1 << 16), codes, offsets, care, span, ln, keys)
    blk_pos, pos = counting_sort(keys, nblk)
    del keys
    P = pos.shape[0]
    if nchunks is None:
        nchunks = 8 * numba.get_num_threads()
    chunks = chunk_bounds(blk_pos, int(min(max(nblk, 1), nchunks)))
    nbs = np.empty(P, np.int64)
    seeds = np.zeros(nblk, np.int64)
    rs = np.zeros(nblk, np.int64)
    run_ranges(sort_and_solve, chunks, codes, span, ln, blk_pos, pos, float(ratio), int(extra),
               int(max_tries), nbs, seeds, rs)
    vstart = np.zeros(nblk + 1, np.int64)
    np.cumsum(3 * rs, out=vstart[1:])
    V = int(vstart[-1])
    big = max(V + 1, P + 1, G + 1) >= 2 ** 32
    idx = np.uint64 if big else np.uint32
    gt = np.zeros(V, np.uint8)
    slots = np.empty((V + 1, 2), idx)
    pos_out = np.empty(P, idx)
    run_ranges(fill_tables, chunks, blk_pos, pos, nbs, seeds, rs, vstart, gt, slots, pos_out)
    slots[V, 0] = EMPTY_NB
    slots[V, 1] = P
    blk = np.empty((nblk + 1, 2), idx)
    blk[:, 0] = vstart
    blk[:nblk, 1] = seeds
    blk[nblk, 1] = 0
    return {"blk": blk, "g": pack_g(gt), "slots": slots, "pos": pos_out}
