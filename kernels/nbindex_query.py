"""Neighborhood index queries (MAROSE, Section IV): the lookups of the three layouts (phf: the index
arrays of nbindex_build.py; bsearch, list: nbindex_layouts.py), degenerated neighborhoods, the hits of
a read's patterns, and the batch query that turns them into candidates (diagonal_clusters.py).

The layout is chosen by which arrays a query is given: pos_nb for 'list', blk_d and dist for
'bsearch', neither (None) for 'phf'. Numba prunes `is None` branches before typing, so each layout is
its own specialization and a run compiles only the code of the layout it uses.
"""
import math

import numpy as np
from numba import njit

from pymap.kernels.borrow import borrowed
from pymap.kernels.diagonal_clusters import HIT_BIAS, HIT_SHIFT, cluster_hits
from pymap.kernels.nbindex_build import pack_nb
from pymap.kernels.phf import edge_vertices, g_get
from pymap.kernels.segments import concat_ranges, repeat_index
from pymap.kernels.threads import range_bounds, run_ranges

LOOKUPS = ("phf", "bsearch", "list")


# ------------------------------------------------------------------------------- lookups

@njit(cache=True, nogil=True, inline="always")
def lookup_phf(blk, g, slots, key, nb):
    """Range [start, end) in `pos` of neighborhood nb in block key (start == end: absent).
    One lookup at a time (scripts/bench_nbindex.py, tests); the mapper uses phf_stages. Inlined at IR
    level and reading g in place rather than through g_get: each measured 25-40 % faster there."""
    vs = np.int64(blk[key, 0])
    m = np.int64(blk[key + 1, 0]) - vs
    if m == 0:
        return np.int64(0), np.int64(0)
    r = m // 3
    v0, v1, v2 = edge_vertices(np.int64(nb), np.int64(blk[key, 1]), r)
    v0 += vs
    v1 += vs
    v2 += vs
    j = (((np.int64(g[v0 >> 2]) >> ((v0 & 3) * 2)) & 3) + ((np.int64(g[v1 >> 2]) >> ((v1 & 3) * 2)) & 3)
         + ((np.int64(g[v2 >> 2]) >> ((v2 & 3) * 2)) & 3)) % 3
    v = v0 if j == 0 else (v1 if j == 1 else v2)
    if np.int64(slots[v, 0]) != nb:
        return np.int64(0), np.int64(0)
    return np.int64(slots[v, 1]), np.int64(slots[v + 1, 1])


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
        v0, v1, v2 = edge_vertices(work[t, 2], work[t, 6], r)
        v0 += vs
        v1 += vs
        v2 += vs
        j = (g_get(g, v0) + g_get(g, v1) + g_get(g, v2)) % 3
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
def lookup_bsearch(blk_d, dist, key, nb):
    """lookup_phf's range by binary search in the 'bsearch' layout."""
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


@njit(cache=True, nogil=True)
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
def n_variants_nb(ln, e):
    """n_variants in a kernel (scripts/bench_nbindex.py)."""
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
        for q in range(nh):
            bigger[q] = hits[q]
        hits = bigger
    hits[nh] = x
    return hits


@njit(cache=True, nogil=True, inline="always")
def _patterns(L, W, step):
    """(number of patterns, last offset) of a read of L bases: width W at offsets 0, step, 2 step, ...
    and L - W; (0, -1) when the read is shorter than a pattern."""
    if L < W:
        return 0, -1
    last = L - W
    npat = last // step + 1
    if last % step != 0:
        npat += 1
    return npat, last


@njit(cache=True, nogil=True, inline="always")
def _pattern(seq, i, step, last, care, span, ln):
    """(offset, seed key, neighborhood) of pattern i of an oriented read; offset -1 when the pattern
    holds a non-ACGT base."""
    o = i * step if i * step <= last else last
    for q in range(span + ln):
        if seq[o + q] > 3:
            return np.int64(-1), np.int64(0), np.int64(0)
    key = np.int64(0)
    for q in range(care.shape[0]):
        key = (key << 2) | seq[o + care[q]]
    return np.int64(o), key, np.int64(pack_nb(seq, o + span, ln))


@njit(cache=True, nogil=True)
def pattern_rows(seq, care, span, ln, step, e_nb, work, var, combo):
    """One work row per pattern s_i b_i of an oriented read (offsets 0, step, 2 step, ... and the
    last one; patterns with a non-ACGT base skipped) and per degenerated b within e_nb substitutions:
    columns 0 pattern index, 1 seed key, 2 neighborhood, 3 offset. Returns (rows, npatterns); rows
    is -1 when work has too few rows. Allocates nothing (the CUDA seeder calls it too).
    Patterns of up to 32 bases are read from a window packed 2 bits a base that slides over the read
    once (each base read once, not once per pattern covering it: 3x less work at step 6)."""
    W = span + ln
    npat, last = _patterns(seq.shape[0], W, step)
    ni = 0
    x = np.int64(0)                 # the last W bases before p, packed, first most significant
    clean = 0                       # how many of them are ACGT (since the last other base)
    p = 0
    low = (np.int64(1) << (2 * ln)) - 1
    mask = np.int64(-1) if W >= 32 else (np.int64(1) << (2 * W)) - 1
    for i in range(npat):
        if W > 32:
            o, key, nb = _pattern(seq, i, step, last, care, span, ln)
            if o < 0:
                continue
        else:
            o = np.int64(i * step if i * step <= last else last)
            while p < o + W:
                b = np.int64(seq[p])
                if b > 3:
                    clean = 0
                else:
                    clean += 1
                    x = ((x << 2) | b) & mask
                p += 1
            if clean < W:
                continue
            key = np.int64(0)
            for q in range(care.shape[0]):
                key = (key << 2) | ((x >> (2 * (W - 1 - care[q]))) & 3)
            nb = x & low
        nv = 1
        var[0] = nb
        if e_nb > 0:
            nv = degenerate(nb, ln, e_nb, var, combo)
        if ni + nv > work.shape[0]:
            return -1, npat
        for t in range(nv):
            work[ni, 0] = i
            work[ni, 1] = key
            work[ni, 2] = var[t]
            work[ni, 3] = o
            ni += 1
    return ni, npat


@njit(cache=True, nogil=True)
def push_positions(work, ni, pos, max_occ, sample, hits):
    """Hits packed (diag, pattern index) of every looked-up row of work (position range in columns
    5, 6) that has at most max_occ positions; with sample > 0, also `sample` positions evenly spaced
    over each row that has more. Returns the count, -1 when hits is too small."""
    nh = 0
    for t in range(ni):
        a = work[t, 5]
        b = work[t, 6]
        c = b - a
        if c <= 0 or (c > max_occ and sample == 0):
            continue
        take = c if c <= max_occ else min(c, np.int64(sample))
        if nh + take > hits.shape[0]:
            return -1
        o = work[t, 3]
        i = work[t, 0]
        if take == c:
            for u in range(a, b):
                hits[nh] = ((np.int64(pos[u]) - o + HIT_BIAS) << HIT_SHIFT) | i
                nh += 1
            continue
        for k in range(take):
            hits[nh] = ((np.int64(pos[a + k * c // take]) - o + HIT_BIAS) << HIT_SHIFT) | i
            nh += 1
    return nh


@njit(cache=True, nogil=True)
def collect_hits(seq, care, span, ln, step, e_nb, max_occ, sample, blk, g, slots, pos, blk_d, dist, pos_nb,
                 hits, work, var, combo):
    """Hits of one oriented read: packed (diag, pattern index) for every pattern s_i b_i at offsets
    0, step, 2 step, ... and the last one, every degenerated b within e_nb substitutions, every
    position of a neighborhood with at most max_occ positions (and `sample` evenly spaced ones of each
    neighborhood with more: push_positions). Returns (hits, count, npatterns, work),
    the buffers grown when they were too small.

    Layout: 'list' when pos_nb is given (the block is scanned under the Hamming distance), 'bsearch'
    when dist is, else 'phf' (the unused layouts' arrays are None; see the module docstring). The
    lookups of all the read's (degenerated) patterns are done together, stage by stage (phf_stages,
    then the positions)."""
    if pos_nb is not None:
        return _collect_list(seq, care, span, ln, step, e_nb, max_occ, sample, blk, slots, pos, pos_nb, hits, work)
    while True:
        ni, npat = pattern_rows(seq, care, span, ln, step, e_nb, work, var, combo)
        if ni < 0:
            work = np.empty((2 * work.shape[0], work.shape[1]), np.int64)
            continue
        if dist is not None:                     # 'bsearch'
            for t in range(ni):
                a, b = lookup_bsearch(blk_d, dist, work[t, 1], work[t, 2])
                work[t, 5] = a
                work[t, 6] = b
        else:                                    # 'phf'
            phf_stages(blk, g, slots, work, ni)
        nh = push_positions(work, ni, pos, max_occ, sample, hits)   # stage 4: second-level positions
        if nh >= 0:
            return hits, np.int64(nh), npat, work
        hits = np.empty(2 * hits.shape[0], np.int64)


@njit(cache=True, nogil=True)
def _collect_list(seq, care, span, ln, step, e_nb, max_occ, sample, blk, slots, pos, pos_nb, hits, work):
    """collect_hits for the 'list' layout: each pattern's block scanned under the Hamming distance."""
    nh = np.int64(0)
    npat, last = _patterns(seq.shape[0], span + ln, step)
    for i in range(npat):
        o, key, nb = _pattern(seq, i, step, last, care, span, ln)
        if o < 0:
            continue
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
            c = k - j
            take = c if c <= max_occ else min(c, np.int64(sample))
            for t in range(take):
                hits = _push(hits, nh, ((np.int64(pos[j + t * c // take]) - o + HIT_BIAS) << HIT_SHIFT) | i)
                nh += 1
            j = k
    return hits, nh, npat, work


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
def query_reads(r0, r1, codes, rc_codes, offsets, max_edits, care, span, ln, steps, e_nb, max_occ, sample,
                max_cands, min_hits, blk, g, slots, pos, blk_d, dist, pos_nb, nvar, out_pos, out_cnt):
    """query_batch for reads r0..r1-1, read r cut at steps[r] (one range, one thread; scratch buffers
    grow as needed)."""
    (codes, rc_codes, offsets, max_edits, care, steps, blk, g, slots, pos, out_pos, out_cnt) = borrowed((
        codes, rc_codes, offsets, max_edits, care, steps, blk, g, slots, pos, out_pos, out_cnt))
    hits = np.empty(1024, np.int64)
    work = np.empty((256, 7), np.int64)
    var = np.empty(nvar, np.int64)
    combo = np.empty(max(e_nb, 1), np.int64)
    stamp = np.zeros(256, np.int64)
    st = np.int64(0)
    cpos = np.empty(1024, np.int64)
    csup = np.empty(1024, np.int64)
    ctmp = np.empty(4096, np.int64)
    for r in range(r0, r1):
        a = offsets[r]
        b = offsets[r + 1]
        st_r = steps[r]
        for s in range(2):
            seq = codes[a:b] if s == 0 else rc_codes[a:b]
            hits, nh, npat, work = collect_hits(seq, care, span, ln, st_r, e_nb, max_occ, sample, blk, g, slots, pos,
                                                blk_d, dist, pos_nb, hits, work, var, combo)
            if npat > stamp.shape[0]:
                stamp = np.zeros(2 * npat, np.int64)
                st = 0
            if nh > cpos.shape[0]:
                cpos = np.empty(2 * nh, np.int64)
                csup = np.empty(2 * nh, np.int64)
                ctmp = np.empty(8 * nh, np.int64)
            base = (2 * r + s) * max_cands
            nc, st = cluster_hits(hits, nh, max_edits[r], min_hits, max_cands, stamp, st, cpos, csup,
                                  out_pos[base:base + max_cands], ctmp)
            out_cnt[2 * r + s] = nc


def query_batch(codes, rc_codes, offsets, max_edits, care, span, ln, step, lossless, e_nb, max_occ, max_cands,
                min_hits, blk, g, slots, pos, blk_d, dist, pos_nb, out_pos, out_cnt, sample=0):
    """Candidates of every read and strand: out_pos[(2 r + s) * max_cands + k], k < out_cnt[2 r + s],
    ascending. sample > 0: neighborhoods with more than max_occ positions give that many of them,
    evenly spaced, instead of none (push_positions). With lossless, each read is cut at
    lossless_step(its length, ..., max_edits[r]) instead of step (computed here, once per distinct
    (length, max_edits): the kernel gets a step per read and lossless_step compiles only for lossless
    runs). Layout as in collect_hits (blk_d, dist, pos_nb: None where unused). Parallel over ranges
    of reads (threads.py); results do not depend on the thread count."""
    n = offsets.shape[0] - 1
    steps = read_steps(offsets, max_edits, span + ln, step, lossless)
    nvar = 1 if pos_nb is not None else n_variants(ln, e_nb)
    run_ranges(query_reads, range_bounds(n, 64), codes, rc_codes, offsets, max_edits, care, span, ln, steps,
               e_nb, max_occ, np.int64(sample), max_cands, min_hits, blk, g, slots, pos, blk_d, dist, pos_nb, nvar,
               out_pos, out_cnt)


def read_steps(offsets, max_edits, width, step, lossless):
    """The step each read is cut at (query_batch)."""
    n = offsets.shape[0] - 1
    if not lossless or n == 0:
        return np.full(n, step, np.int64)
    pairs, inverse = np.unique(np.stack([np.diff(offsets), max_edits.astype(np.int64)], axis=1), axis=0,
                               return_inverse=True)
    per_pair = np.array([lossless_step(length, width, step, e) for length, e in pairs.tolist()], np.int64)
    return per_pair[inverse.reshape(-1)]


def compact(out_pos, out_cnt, max_cands, first_read):
    """Flatten per read/strand buffers (max_cands slots each) into sorted (read int32, strand int8,
    pos int64) arrays."""
    counts = np.ascontiguousarray(out_cnt, np.int64)
    taken = concat_ranges(np.arange(counts.shape[0], dtype=np.int64) * max_cands, counts)
    return from_counts(counts, out_pos[taken], first_read)


def from_counts(counts, positions, first_read):
    """(read int32, strand int8, pos int64) from the candidate count of each read/strand slot (2 read
    + strand) and their positions, slot after slot."""
    slot = repeat_index(np.ascontiguousarray(counts, np.int64))
    return (first_read + slot // 2).astype(np.int32), (slot % 2).astype(np.int8), positions
