"""Neighborhood index kernels (MAROSE, Sections II-IV): seed blocks addressed by BDZ perfect hashing.

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

The comparison layouts of Figure 8 are derived from these arrays (no reference needed):
    'bsearch': blk_d int64[nblk+1] and dist idx[D, 3] = (neighborhood, start, end), sorted per block.
    'list':    pos_nb uint32[P], the neighborhood of every entry of `pos` (scanned block by block).
"""
import math

import numpy as np
from numba import njit, prange

M32 = 0xFFFFFFFF
GOLDEN = 0x9E3779B9
EMPTY_NB = 0xFFFFFFFF
HIT_SHIFT = 20          # hits are packed as ((diag + HIT_BIAS) << HIT_SHIFT) | pattern index
HIT_BIAS = 1 << 20      # reads shorter than 2**20 bases
MODE_PHF, MODE_BSEARCH, MODE_LIST = 0, 1, 2
MODES = {"phf": MODE_PHF, "bsearch": MODE_BSEARCH, "list": MODE_LIST}


# ----------------------------------------------------------------------------------------- hashing

@njit(cache=True, nogil=True, inline="always")
def jenkins_mix(a, b, c):
    """Bob Jenkins' lookup2 mix(a, b, c) on 32-bit values held in int64 (paper Figure 6)."""
    a = (a - b - c) & M32
    a ^= c >> 13
    b = (b - c - a) & M32
    b ^= (a << 8) & M32
    c = (c - a - b) & M32
    c ^= b >> 13
    a = (a - b - c) & M32
    a ^= c >> 12
    b = (b - c - a) & M32
    b ^= (a << 16) & M32
    c = (c - a - b) & M32
    c ^= b >> 5
    a = (a - b - c) & M32
    a ^= c >> 3
    b = (b - c - a) & M32
    b ^= (a << 10) & M32
    c = (c - a - b) & M32
    c ^= b >> 15
    return a, b, c


@njit(cache=True, nogil=True, inline="always")
def jenkins_hash3(key, seed):
    """lookup2 hash of a 4-byte little-endian key with initval `seed`; returns all three words
    (BDZ uses them as the three hash functions h_x, h_y, h_z of the family indexed by J = seed)."""
    a = GOLDEN + (np.int64(key) & M32)
    b = np.int64(GOLDEN)
    c = (np.int64(seed) + 4) & M32
    return jenkins_mix(a & M32, b, c)


@njit(cache=True, nogil=True, inline="always")
def _seed_j(block, attempt):
    """The deterministic sequence of Jenkins seeds J tried for one block."""
    a, b, c = jenkins_mix(np.int64(GOLDEN), (np.int64(block) * 2654435761) & M32,
                          (np.int64(attempt) * 0x85EBCA77 + 0x165667B1) & M32)
    return c


@njit(cache=True, nogil=True, inline="always")
def _vertices(key, seed, r):
    a, b, c = jenkins_hash3(key, seed)
    return a % r, r + b % r, 2 * r + c % r


@njit(cache=True, nogil=True, inline="always")
def _gget(g, v):
    return (np.int64(g[v >> 2]) >> ((v & 3) * 2)) & 3


def part_size(n, ratio=1.23, extra=1):
    """Vertices per part r for n keys: 3 r >= ceil(ratio n) + extra (used by tests and docs)."""
    return max(1, (math.ceil(ratio * n) + extra + 2) // 3)


@njit(cache=True, nogil=True)
def _part_size(n, ratio, extra):
    r = (np.int64(math.ceil(ratio * n)) + extra + 2) // 3
    return max(np.int64(1), r)


# -------------------------------------------------------------------------- hypergraph peeling

@njit(cache=True, nogil=True)
def _edges(keys, n, r, seed, ev):
    for e in range(n):
        v0, v1, v2 = _vertices(keys[e], seed, r)
        ev[e, 0] = v0
        ev[e, 1] = v1
        ev[e, 2] = v2


@njit(cache=True, nogil=True)
def peel(ev, n, m, deg, xr, stack, order_e, order_v):
    """Peel the 3-hypergraph with edges ev[:n] on m vertices (XOR trick, no adjacency lists).
    Returns how many edges were peeled (== n iff the hypergraph is acyclic); order_e/order_v
    hold the edges in peeling order and the degree-1 vertex each was peeled from."""
    for v in range(m):
        deg[v] = 0
        xr[v] = 0
    for e in range(n):
        for q in range(3):
            v = ev[e, q]
            deg[v] += 1
            xr[v] ^= e
    top = 0
    for v in range(m):
        if deg[v] == 1:
            stack[top] = v
            top += 1
    k = 0
    while top > 0:
        top -= 1
        v = stack[top]
        if deg[v] != 1:
            continue
        e = xr[v]
        order_e[k] = e
        order_v[k] = v
        k += 1
        for q in range(3):
            u = ev[e, q]
            deg[u] -= 1
            xr[u] ^= e
            if deg[u] == 1:
                stack[top] = u
                top += 1
    return k


@njit(cache=True, nogil=True)
def assign(ev, n, order_e, order_v, gt):
    """BDZ assignment in reverse peeling order: g[v] = (j - g[others]) mod 3 for the peeled vertex
    v = the edge's j-th vertex, so that (g[v0] + g[v1] + g[v2]) mod 3 == j. gt must start at 0."""
    for i in range(n - 1, -1, -1):
        e = order_e[i]
        v = order_v[i]
        j = 0 if ev[e, 0] == v else (1 if ev[e, 1] == v else 2)
        s = np.int64(gt[ev[e, 0]]) + gt[ev[e, 1]] + gt[ev[e, 2]] - gt[v]
        gt[v] = (j - s) % 3


@njit(cache=True, nogil=True)
def build_phf(keys, n, block, ratio, extra, max_tries):
    """Find (J, r) such that the hypergraph of keys[:n] (distinct) peels; returns J, r, g (uint8[3r],
    unpacked) and slot (int64[n], the vertex of each key). Deterministic in (keys, block)."""
    r = _part_size(n, ratio, extra)
    attempt = 0
    ev = np.empty((max(n, 1), 3), np.int64)
    while True:
        m = 3 * r
        deg = np.empty(m, np.int64)
        xr = np.empty(m, np.int64)
        stack = np.empty(m, np.int64)
        oe = np.empty(max(n, 1), np.int64)
        ov = np.empty(max(n, 1), np.int64)
        for t in range(max_tries):
            seed = _seed_j(block, attempt)
            attempt += 1
            _edges(keys, n, r, seed, ev)
            if peel(ev, n, m, deg, xr, stack, oe, ov) == n:
                gt = np.zeros(m, np.uint8)
                assign(ev, n, oe, ov, gt)
                slot = np.empty(n, np.int64)
                for e in range(n):
                    j = (np.int64(gt[ev[e, 0]]) + gt[ev[e, 1]] + gt[ev[e, 2]]) % 3
                    slot[e] = ev[e, j]
                return seed, r, gt, slot
        r += 1


@njit(cache=True, nogil=True)
def phf_eval(keys, seed, r, g_unpacked):
    """phf of each key for an unpacked g (tests)."""
    out = np.empty(keys.shape[0], np.int64)
    for i in range(keys.shape[0]):
        v0, v1, v2 = _vertices(keys[i], seed, r)
        j = (np.int64(g_unpacked[v0]) + g_unpacked[v1] + g_unpacked[v2]) % 3
        out[i] = v0 if j == 0 else (v1 if j == 1 else v2)
    return out


# ------------------------------------------------------------------------------- index build

@njit(cache=True, nogil=True, inline="always")
def _pack_nb(codes, a, ln):
    x = np.int64(0)
    for i in range(ln):
        x = (x << 2) | codes[a + i]
    return x


@njit(parallel=True, cache=True, nogil=True)
def seed_keys(codes, offsets, care, span, ln):
    """int32 seed key of every reference position, -1 where span + neighborhood touches an N or
    leaves the contig."""
    G = codes.shape[0]
    W = span + ln
    keys = np.full(G, -1, np.int32)
    CH = 1 << 16
    nch = (G + CH - 1) // CH
    ncare = care.shape[0]
    for ci in prange(nch):
        a = ci * CH
        b = min(G, a + CH)
        c = np.searchsorted(offsets, a, side="right") - 1
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
                continue
            k = np.int64(0)
            for i in range(ncare):
                k = (k << 2) | codes[p + care[i]]
            keys[p] = k
    return keys


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


@njit(cache=True, nogil=True)
def chunk_bounds(starts, nchunks):
    """Split blocks into about nchunks contiguous ranges of similar total size."""
    nblk = starts.shape[0] - 1
    total = starts[nblk]
    out = np.empty(nchunks + 1, np.int64)
    out[0] = 0
    k = 1
    b = 0
    for i in range(1, nchunks):
        target = total * i // nchunks
        while b < nblk and starts[b] < target:
            b += 1
        if b > out[k - 1]:
            out[k] = b
            k += 1
    out[k] = nblk
    return out[:k + 1]


@njit(cache=True, nogil=True)
def _sort_block(nbv, pv, n):
    """Stable sort of (nbv, pv)[:n] by nbv (pv ascending within equal nbv since pv arrives sorted)."""
    if n <= 24:
        for i in range(1, n):
            x = nbv[i]
            y = pv[i]
            j = i - 1
            while j >= 0 and nbv[j] > x:
                nbv[j + 1] = nbv[j]
                pv[j + 1] = pv[j]
                j -= 1
            nbv[j + 1] = x
            pv[j + 1] = y
    else:
        order = np.argsort(nbv[:n], kind="mergesort")
        a = nbv[:n].copy()
        b = pv[:n].copy()
        for i in range(n):
            nbv[i] = a[order[i]]
            pv[i] = b[order[i]]


@njit(cache=True, nogil=True)
def _sort_and_solve_chunk(b0, b1, codes, span, ln, blk_pos, pos, ratio, extra, max_tries, nbs, seeds, rs):
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
            nbv[i] = _pack_nb(codes, p + span, ln)
        _sort_block(nbv, pv, n)
        d = 0
        for i in range(n):
            nbs[a + i] = nbv[i]
            pos[a + i] = pv[i]
            if i == 0 or nbv[i] != nbv[i - 1]:
                keys[d] = nbv[i]
                d += 1
        seed, r, gt, slot = build_phf(keys, d, s, ratio, extra, max_tries)
        seeds[s] = seed
        rs[s] = r


@njit(parallel=True, cache=True, nogil=True)
def sort_and_solve(codes, span, ln, blk_pos, pos, chunks, ratio, extra, max_tries, nbs, seeds, rs):
    """Per block: sort entries by neighborhood (into nbs/pos), find the PHF (seeds, rs).
    (Chunk bodies are separate functions: no parfor transformation of their allocations.)"""
    for ci in prange(chunks.shape[0] - 1):
        _sort_and_solve_chunk(chunks[ci], chunks[ci + 1], codes, span, ln, blk_pos, pos, ratio, extra, max_tries,
                              nbs, seeds, rs)


@njit(cache=True, nogil=True)
def _fill_chunk(b0, b1, blk_pos, pos_sorted, nbs, seeds, rs, vstart, gt_all, slots, pos_out):
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
        d = 0
        for i in range(n):
            if i == 0 or nbs[a + i] != nbs[a + i - 1]:
                keys[d] = nbs[a + i]
                kstart[d] = a + i
                d += 1
        kstart[d] = a + n
        _edges(keys, d, rs[s], seeds[s], ev)
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


@njit(parallel=True, cache=True, nogil=True)
def fill_tables(blk_pos, pos_sorted, nbs, chunks, seeds, rs, vstart, gt_all, slots, pos_out):
    """Per block: rebuild the PHF with the J found, write g (unpacked), the first-level slots and the
    positions in slot order."""
    for ci in prange(chunks.shape[0] - 1):
        _fill_chunk(chunks[ci], chunks[ci + 1], blk_pos, pos_sorted, nbs, seeds, rs, vstart, gt_all, slots,
                    pos_out)


@njit(parallel=True, cache=True, nogil=True)
def pack_g(gt):
    n = gt.shape[0]
    out = np.zeros((n + 3) // 4, np.uint8)
    for i in prange(out.shape[0]):
        x = 0
        for q in range(4):
            v = 4 * i + q
            if v < n:
                x |= np.int64(gt[v]) << (2 * q)
        out[i] = x
    return out


def build(codes, offsets, care, span, ln, ratio=1.23, extra=1, max_tries=64, nchunks=None):
    """Build the index arrays {blk, g, slots, pos} for reference codes with contig offsets.

    care: int64 offsets of the care positions inside the seed span (contiguous seed: arange(ls)).
    """
    care = np.ascontiguousarray(care, dtype=np.int64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    k = care.shape[0]
    nblk = 4 ** k
    keys = seed_keys(codes, offsets, care, span, ln)
    blk_pos, pos = counting_sort(keys, nblk)
    del keys
    P = pos.shape[0]
    if nchunks is None:
        nchunks = int(min(max(nblk, 1), 8192))
    chunks = chunk_bounds(blk_pos, nchunks)
    nbs = np.empty(P, np.int64)
    seeds = np.zeros(nblk, np.int64)
    rs = np.zeros(nblk, np.int64)
    sort_and_solve(codes, span, ln, blk_pos, pos, chunks, float(ratio), int(extra), int(max_tries),
                   nbs, seeds, rs)
    vstart = np.zeros(nblk + 1, np.int64)
    np.cumsum(3 * rs, out=vstart[1:])
    V = int(vstart[-1])
    big = max(V + 1, P + 1, codes.shape[0] + 1) >= 2 ** 32
    idx = np.uint64 if big else np.uint32
    gt = np.zeros(V, np.uint8)
    slots = np.empty((V + 1, 2), idx)
    pos_out = np.empty(P, idx)
    fill_tables(blk_pos, pos, nbs, chunks, seeds, rs, vstart, gt, slots, pos_out)
    slots[V, 0] = EMPTY_NB
    slots[V, 1] = P
    blk = np.empty((nblk + 1, 2), idx)
    blk[:, 0] = vstart
    blk[:nblk, 1] = seeds
    blk[nblk, 1] = 0
    return {"blk": blk, "g": pack_g(gt), "slots": slots, "pos": pos_out}


# -------------------------------------------------------------------- comparison layouts

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


# ------------------------------------------------------------------------------- lookups

@njit(cache=True, nogil=True, inline="always")
def lookup_phf(blk, g, slots, key, nb):
    """Range [start, end) in `pos` of neighborhood nb in block key (start == end: absent)."""
    vs = np.int64(blk[key, 0])
    m = np.int64(blk[key + 1, 0]) - vs
    if m == 0:
        return np.int64(0), np.int64(0)
    r = m // 3
    v0, v1, v2 = _vertices(nb, blk[key, 1], r)
    v0 += vs
    v1 += vs
    v2 += vs
    j = (_gget(g, v0) + _gget(g, v1) + _gget(g, v2)) % 3
    v = v0 if j == 0 else (v1 if j == 1 else v2)
    if np.int64(slots[v, 0]) != nb:
        return np.int64(0), np.int64(0)
    return np.int64(slots[v, 1]), np.int64(slots[v + 1, 1])


@njit(cache=True, nogil=True, inline="always")
def lookup_bsearch(blk_d, dist, key, nb):
    lo = blk_d[key]
    hi = blk_d[key + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        x = np.int64(dist[mid, 0])
        if x < nb:
            lo = mid + 1
        elif x > nb:
            hi = mid
        else:
            return np.int64(dist[mid, 1]), np.int64(dist[mid, 2])
    return np.int64(0), np.int64(0)


@njit(cache=True, nogil=True, inline="always")
def hamming2(a, b, e):
    """True when 2-bit packed a and b differ in at most e bases."""
    x = a ^ b
    y = (x | (x >> 1)) & 0x5555555555555555
    c = 0
    while y != 0:
        y &= y - 1
        c += 1
        if c > e:
            return False
    return True


# ---------------------------------------------------------------- degenerated neighborhoods

def n_variants(ln, e):
    """|Pi_e(b)|: strings within e substitutions of a length-ln neighborhood."""
    return sum(math.comb(ln, d) * 3 ** d for d in range(e + 1))


@njit(cache=True, nogil=True)
def degenerate(nb, ln, e, out, combo):
    """All neighborhoods within e substitutions of nb (nb first, each exactly once). Returns count."""
    n = 0
    out[n] = nb
    n += 1
    for d in range(1, e + 1):
        for q in range(d):
            combo[q] = q
        while True:
            t3 = 1
            for q in range(d):
                t3 *= 3
            for t in range(t3):
                x = nb
                tt = t
                for q in range(d):
                    x ^= ((tt % 3) + 1) << (2 * combo[q])
                    tt //= 3
                out[n] = x
                n += 1
            i = d - 1
            while i >= 0 and combo[i] == ln - d + i:
                i -= 1
            if i < 0:
                break
            combo[i] += 1
            for q in range(i + 1, d):
                combo[q] = combo[q - 1] + 1
    return n


# ---------------------------------------------------------------------------------- queries

@njit(cache=True, nogil=True)
def _push(hits, nh, x):
    if nh == hits.shape[0]:
        bigger = np.empty(2 * hits.shape[0], np.int64)
        bigger[:nh] = hits[:nh]
        hits = bigger
    hits[nh] = x
    return hits


@njit(cache=True, nogil=True)
def _grow(work, need):
    if need <= work.shape[0]:
        return work
    bigger = np.empty((max(need, 2 * work.shape[0]), work.shape[1]), np.int64)
    bigger[:work.shape[0]] = work
    return bigger


@njit(cache=True, nogil=True)
def phf_stages(blk, g, slots, work, ni):
    """Perfect-hash lookups of work[:ni] (column 1: seed key, 2: neighborhood) stage by stage: block
    rows, then g, then slots, so that the memory accesses within a stage are independent and overlap
    (memory-level parallelism) instead of forming one chain of cache misses per lookup. Writes the
    position range to columns 5, 6 (equal when absent); uses column 4 as scratch."""
    for t in range(ni):                      # stage 1: block rows (vertex start, size, J)
        key = work[t, 1]
        vs = np.int64(blk[key, 0])
        work[t, 4] = vs
        work[t, 5] = np.int64(blk[key + 1, 0]) - vs
        work[t, 6] = np.int64(blk[key, 1])
    for t in range(ni):                      # stage 2: hypergraph edge, g, phf
        m = work[t, 5]
        if m == 0:
            work[t, 4] = -1
            continue
        vs = work[t, 4]
        r = m // 3
        v0, v1, v2 = _vertices(work[t, 2], work[t, 6], r)
        v0 += vs
        v1 += vs
        v2 += vs
        j = (_gget(g, v0) + _gget(g, v1) + _gget(g, v2)) % 3
        work[t, 4] = v0 if j == 0 else (v1 if j == 1 else v2)
    for t in range(ni):                      # stage 3: first-level slot (verify, offsets)
        v = work[t, 4]
        a = np.int64(0)
        b = np.int64(0)
        if v >= 0 and np.int64(slots[v, 0]) == work[t, 2]:
            a = np.int64(slots[v, 1])
            b = np.int64(slots[v + 1, 1])
        work[t, 5] = a
        work[t, 6] = b


@njit(cache=True, nogil=True)
def collect_hits(seq, care, span, ln, step, e_nb, max_occ, mode, blk, g, slots, pos, blk_d, dist, pos_nb,
                 hits, work, var, combo):
    """Hits of one oriented read: packed (diag, pattern index) for every pattern s_i b_i at offsets
    0, step, 2 step, ... and the last one, every degenerated b within e_nb substitutions, every
    position of a neighborhood with at most max_occ positions. Returns (hits, count, npatterns, work).

    The perfect-hash lookups of all the read's (degenerated) patterns are done together, stage by
    stage (phf_stages, then the positions)."""
    L = seq.shape[0]
    W = span + ln
    nh = 0
    if L < W:
        return hits, 0, 0, work
    last = L - W
    npat = last // step + 1
    if last % step != 0:
        npat += 1
    ncare = care.shape[0]
    ni = 0
    for i in range(npat):
        o = i * step if i * step <= last else last
        bad = False
        for q in range(W):
            if seq[o + q] > 3:
                bad = True
                break
        if bad:
            continue
        key = np.int64(0)
        for q in range(ncare):
            key = (key << 2) | seq[o + care[q]]
        nb = _pack_nb(seq, o + span, ln)
        if mode == MODE_LIST:
            a = np.int64(slots[np.int64(blk[key, 0]), 1])
            b = np.int64(slots[np.int64(blk[key + 1, 0]), 1])
            j = a
            while j < b:
                x = np.int64(pos_nb[j])
                k = j + 1
                if e_nb == 0:
                    if x != nb:
                        j = k
                        continue
                elif not hamming2(x, nb, e_nb):
                    j = k
                    continue
                while k < b and pos_nb[k] == pos_nb[j]:
                    k += 1
                if k - j <= max_occ:
                    for t in range(j, k):
                        hits = _push(hits, nh, ((np.int64(pos[t]) - o + HIT_BIAS) << HIT_SHIFT) | i)
                        nh += 1
                j = k
            continue
        nv = 1
        var[0] = nb
        if e_nb > 0:
            nv = degenerate(nb, ln, e_nb, var, combo)
        work = _grow(work, ni + nv)
        for t in range(nv):
            work[ni, 0] = i
            work[ni, 1] = key
            work[ni, 2] = var[t]
            work[ni, 3] = o
            ni += 1
    if mode == MODE_PHF:
        phf_stages(blk, g, slots, work, ni)
    elif mode == MODE_BSEARCH:
        for t in range(ni):
            a, b = lookup_bsearch(blk_d, dist, work[t, 1], work[t, 2])
            work[t, 5] = a
            work[t, 6] = b
    for t in range(ni):                          # stage 4: second-level positions
        a = work[t, 5]
        b = work[t, 6]
        if b > a and b - a <= max_occ:
            o = work[t, 3]
            i = work[t, 0]
            for u in range(a, b):
                hits = _push(hits, nh, ((np.int64(pos[u]) - o + HIT_BIAS) << HIT_SHIFT) | i)
                nh += 1
    return hits, nh, npat, work


@njit(cache=True, nogil=True)
def cluster_hits(hits, nh, max_e, min_hits, max_cands, stamp, stamp0, cpos, csup, out):
    """Sort hits, merge diagonals within max_e (single linkage), keep per cluster the diagonal hit by
    the most patterns (ties: smallest), drop clusters with fewer than min_hits distinct patterns,
    keep the max_cands best supported (ties: smallest pos). A cluster whose diagonals span more than
    max_e (a read inside a tandem array: the same alignment at several shifts of the unit, chained
    together) also yields its runner-up: the diagonal with the most hits among those more than max_e
    from the first one, supported by its hit count, so that selection sees a second locus. Writes
    positions ascending into out; returns (count, next stamp value)."""
    if nh == 0:
        return 0, stamp0
    h = np.sort(hits[:nh])
    mask = (np.int64(1) << HIT_SHIFT) - 1
    nc = 0
    st = stamp0
    i = 0
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
    order = np.argsort(-csup[:nc], kind="mergesort")
    keep = np.sort(order[:max_cands])
    for t in range(max_cands):
        out[t] = cpos[keep[t]]
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


@njit(cache=True, nogil=True)
def edits_to_break(length, width, step):
    """The fewest edits that leave none of a read's patterns (width bases at offsets 0, step,
    2 step, ... and length - width) error-free: greedy interval stabbing, optimal because the
    intervals, all of one width, come sorted by their ends. A read with fewer edits than this keeps
    an exact pattern whatever the edits are (an indel breaks no more patterns than a substitution)."""
    if length < width:
        return 0
    last = length - width
    count = 0
    covered = -1
    o = 0
    while True:
        off = min(o, last)
        if off > covered:
            covered = off + width - 1
            count += 1
        if o >= last:
            break
        o += step
    return count


@njit(cache=True, nogil=True)
def lossless_step(length, width, step, max_edits):
    """The largest step <= `step` at which max_edits edits cannot break every pattern; 1 when no
    step can (the read is then searched at step 1, best effort)."""
    for s in range(step, 0, -1):
        if edits_to_break(length, width, s) > max_edits:
            return s
    return 1


@njit(cache=True, nogil=True)
def _query_reads(r0, r1, codes, rc_codes, offsets, max_edits, care, span, ln, step, lossless, e_nb, max_occ,
                 max_cands, min_hits, mode, blk, g, slots, pos, blk_d, dist, pos_nb, nvar, out_pos, out_cnt):
    """query_batch for reads r0..r1-1 (one chunk, one thread; scratch buffers grow as needed)."""
    hits = np.empty(1024, np.int64)
    work = np.empty((256, 7), np.int64)
    var = np.empty(nvar, np.int64)
    combo = np.empty(max(e_nb, 1), np.int64)
    stamp = np.zeros(256, np.int64)
    st = np.int64(0)
    cpos = np.empty(1024, np.int64)
    csup = np.empty(1024, np.int64)
    for r in range(r0, r1):
        a = offsets[r]
        b = offsets[r + 1]
        st_r = lossless_step(b - a, span + ln, step, max_edits[r]) if lossless else step
        for s in range(2):
            seq = codes[a:b] if s == 0 else rc_codes[a:b]
            hits, nh, npat, work = collect_hits(seq, care, span, ln, st_r, e_nb, max_occ, mode, blk, g,
                                                slots, pos, blk_d, dist, pos_nb, hits, work, var, combo)
            if npat > stamp.shape[0]:
                stamp = np.zeros(2 * npat, np.int64)
                st = 0
            if nh > cpos.shape[0]:
                cpos = np.empty(2 * nh, np.int64)
                csup = np.empty(2 * nh, np.int64)
            base = (2 * r + s) * max_cands
            nc, st = cluster_hits(hits, nh, max_edits[r], min_hits, max_cands, stamp, st, cpos, csup,
                                  out_pos[base:base + max_cands])
            out_cnt[2 * r + s] = nc


@njit(parallel=True, cache=True, nogil=True)
def query_batch(codes, rc_codes, offsets, max_edits, care, span, ln, step, lossless, e_nb, max_occ, max_cands,
                min_hits, mode, blk, g, slots, pos, blk_d, dist, pos_nb, out_pos, out_cnt):
    """Candidates of every read and strand: out_pos[(2 r + s) * max_cands + k], k < out_cnt[2 r + s],
    ascending. With lossless, each read is cut at lossless_step(its length, ..., max_edits[r]) instead
    of step. Parallel over chunks of 64 reads; results do not depend on the thread count."""
    n = offsets.shape[0] - 1
    CH = 64
    nch = (n + CH - 1) // CH
    nvar = 1 if mode == MODE_LIST else n_variants_nb(ln, e_nb)
    for ci in prange(nch):
        _query_reads(ci * CH, min(n, ci * CH + CH), codes, rc_codes, offsets, max_edits, care, span, ln, step,
                     lossless, e_nb, max_occ, max_cands, min_hits, mode, blk, g, slots, pos, blk_d, dist, pos_nb, nvar,
                     out_pos, out_cnt)


@njit(cache=True, nogil=True)
def compact(out_pos, out_cnt, max_cands, first_read):
    """Flatten per read/strand buffers into sorted (read int32, strand int8, pos int64) arrays."""
    total = 0
    for i in range(out_cnt.shape[0]):
        total += out_cnt[i]
    cr = np.empty(total, np.int32)
    cs = np.empty(total, np.int8)
    cp = np.empty(total, np.int64)
    k = 0
    for i in range(out_cnt.shape[0]):
        base = i * max_cands
        for t in range(out_cnt[i]):
            cr[k] = first_read + i // 2
            cs[k] = i % 2
            cp[k] = out_pos[base + t]
            k += 1
    return cr, cs, cp


# ---------------------------------------------------------------- Figure 8 micro-benchmark

@njit(cache=True, nogil=True)
def bench_lookups(mode, qkeys, qnbs, ln, e_nb, blk, g, slots, blk_d, dist, pos_nb):
    """Membership test of each query neighborhood (with its degenerated set Pi_e) in its block, single
    thread. Returns (queries with a hit, exact lookups made, block entries scanned)."""
    nvar = n_variants_nb(ln, e_nb)
    var = np.empty(nvar, np.int64)
    combo = np.empty(max(e_nb, 1), np.int64)
    found = 0
    lookups = 0
    scanned = 0
    for i in range(qkeys.shape[0]):
        key = qkeys[i]
        nb = qnbs[i]
        hit = False
        if mode == MODE_LIST:
            a = np.int64(slots[np.int64(blk[key, 0]), 1])
            b = np.int64(slots[np.int64(blk[key + 1, 0]), 1])
            for j in range(a, b):
                if hamming2(np.int64(pos_nb[j]), nb, e_nb):
                    hit = True
            scanned += b - a
        else:
            nv = degenerate(nb, ln, e_nb, var, combo)
            lookups += nv
            for t in range(nv):
                if mode == MODE_PHF:
                    a, b = lookup_phf(blk, g, slots, key, var[t])
                else:
                    a, b = lookup_bsearch(blk_d, dist, key, var[t])
                if b > a:
                    hit = True
        if hit:
            found += 1
    return found, lookups, scanned


@njit(cache=True, nogil=True)
def n_variants_nb(ln, e):
    total = 1
    for d in range(1, e + 1):
        c = 1
        for q in range(d):
            c = c * (ln - q) // (q + 1)
        for q in range(d):
            c *= 3
        total += c
    return total


@njit(cache=True, nogil=True)
def bench_lookups_staged(qkeys, qnbs, ln, e_nb, blk, g, slots, batch):
    """bench_lookups for 'phf' with the lookups of `batch` queries done stage by stage (phf_stages),
    as the mapper's query kernel does."""
    nvar = n_variants_nb(ln, e_nb)
    var = np.empty(nvar, np.int64)
    combo = np.empty(max(e_nb, 1), np.int64)
    work = np.empty((batch * nvar, 7), np.int64)
    found = 0
    lookups = 0
    n = qkeys.shape[0]
    for q0 in range(0, n, batch):
        q1 = min(n, q0 + batch)
        ni = 0
        for i in range(q0, q1):
            nv = degenerate(qnbs[i], ln, e_nb, var, combo)
            for t in range(nv):
                work[ni, 0] = i
                work[ni, 1] = qkeys[i]
                work[ni, 2] = var[t]
                ni += 1
        lookups += ni
        phf_stages(blk, g, slots, work, ni)
        last = -1
        for t in range(ni):
            if work[t, 6] > work[t, 5] and work[t, 0] != last:
                last = work[t, 0]
                found += 1
    return found, lookups, 0
