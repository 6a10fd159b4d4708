"""Selection of hits per read: merge hits of one locus, pick the primary, secondaries, MAPQ."""
import numpy as np
from numba import njit

MAPQ_MAX = 60


@njit(cache=True, nogil=True)
def mix64(x):
    """splitmix64 finaliser: deterministic pseudo-random tie-breaking."""
    x = (x + np.uint64(0x9E3779B97F4A7C15))
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, nogil=True)
def mapq_from_hits(best, n_best, sub, max_e):
    """Mapping quality of a unique best hit from its edit distance, the count of equal bests and
    the second-best distance (sub = -1: no second hit within max_e). Calibrated on simulated
    reads (BENCHMARKS.md): each edit of margin to the runner-up is worth about 13 phred."""
    if n_best > 1:
        return 0
    if sub < 0:
        # a runner-up may hide just beyond the threshold; the margin is at least max_e+1-best
        margin = max_e + 1 - best
        q = 20 + 13 * margin
    else:
        margin = sub - best
        q = 13 * margin - 7
    if q > MAPQ_MAX:
        q = MAPQ_MAX
    if q < 0:
        q = 0
    return q


@njit(cache=True, nogil=True)
def select_hits(h_read, h_strand, h_start, h_dist, n_reads, read_maxe, read_len, global_first,
                seed, max_hits, report_all):
    """Hits must be sorted by (read, strand, start). Returns per-read summary and the hits to report.

    Hits of one read and strand whose starts lie within the read's e of a better (or equal,
    earlier) one are the same locus and are merged. Returns (best, n_best, sub, mapq,
    rep_offsets int64[n_reads+1], rep_hit int64[...]) where rep_hit lists, per read, the
    primary hit first and then secondaries by (distance, strand, start)."""
    nh = h_read.shape[0]
    keep = np.empty(nh, np.bool_)           # every entry is set below
    # merge hits of one locus: within a (read, strand) run, sorted by start
    i = 0
    while i < nh:
        j = i
        while j + 1 < nh and h_read[j + 1] == h_read[i] and h_strand[j + 1] == h_strand[i]:
            j += 1
        span = read_maxe[h_read[i]]
        a = i
        while a <= j:
            b = a
            bi = a
            while b + 1 <= j and h_start[b + 1] - h_start[b] <= span:
                b += 1
                if h_dist[b] < h_dist[bi]:
                    bi = b
            for k in range(a, b + 1):
                keep[k] = k == bi
            a = b + 1
        i = j + 1
    # np.empty and loops rather than np.full / np.ones: fewer implementations to compile
    best = np.empty(n_reads, np.int32)      # best, n_best, sub: set for every read below
    n_best = np.empty(n_reads, np.int32)
    sub = np.empty(n_reads, np.int32)
    mapq = np.zeros(n_reads, np.int32)
    first = np.empty(n_reads + 1, np.int64)
    for r in range(n_reads + 1):
        first[r] = nh
    for k in range(nh - 1, -1, -1):
        first[h_read[k]] = k
    for r in range(n_reads - 1, -1, -1):
        if first[r] > first[r + 1]:
            first[r] = first[r + 1]
    counts = np.zeros(n_reads, np.int64)
    for r in range(n_reads):
        b = -1
        nb = 0
        s = -1
        total = 0
        for k in range(first[r], first[r + 1]):
            if not keep[k]:
                continue
            total += 1
            d = h_dist[k]
            if b < 0 or d < b:
                if b >= 0:
                    s = b
                b = d
                nb = 1
            elif d == b:
                nb += 1
            elif s < 0 or d < s:
                s = d
        if nb > 1:
            s = b
        best[r] = b
        n_best[r] = nb
        sub[r] = s
        if b >= 0:
            # int64 arguments: with b, nb, s as they are, type inference would first compile a
            # variant for their initial literal values
            mapq[r] = mapq_from_hits(np.int64(b), np.int64(nb), np.int64(s), np.int64(read_maxe[r]))
            if report_all:
                counts[r] = total
            else:
                counts[r] = min(total, max_hits)
    rep_offsets = np.zeros(n_reads + 1, np.int64)
    for r in range(n_reads):
        rep_offsets[r + 1] = rep_offsets[r] + counts[r]
    rep_hit = np.empty(rep_offsets[n_reads], np.int64)
    for r in range(n_reads):
        if counts[r] == 0:
            continue
        # the primary: one of the n_best equal bests, chosen by a hash of (seed, read number)
        pick = np.int64(mix64(np.uint64(seed) * np.uint64(1000003) + np.uint64(global_first + r))
                        % np.uint64(n_best[r]))
        prim = -1
        seen = 0
        for k in range(first[r], first[r + 1]):
            if keep[k] and h_dist[k] == best[r]:
                if seen == pick:
                    prim = k
                    break
                seen += 1
        o = rep_offsets[r]
        rep_hit[o] = prim
        filled = 1
        # secondaries by increasing distance, then (strand, start) order
        d = best[r]
        while filled < counts[r]:
            for k in range(first[r], first[r + 1]):
                if filled >= counts[r]:
                    break
                if keep[k] and k != prim and h_dist[k] == d:
                    rep_hit[o + filled] = k
                    filled += 1
            d += 1
    return best, n_best, sub, mapq, rep_offsets, rep_hit
