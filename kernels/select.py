"""Selection of hits per read: merge hits of one locus, pick the primary, secondaries, MAPQ."""
import numpy as np
from numba import njit

MAPQ_MAX = 60
#: the longest period of a read's aligned part that periodic_parts looks for (homopolymers to
#: tetranucleotide repeats)
MAX_PERIOD = 4
#: bwa mem's MAPQ takes a match of its minimum seed length (19 bases) as the runner-up any hit has by
#: chance, which keeps a short alignment's MAPQ low however unique it is (length_cap)
CHANCE_MATCH = 19


@njit(cache=True, nogil=True)
def mix64(x):
    """splitmix64 finaliser: deterministic pseudo-random tie-breaking."""
    x = (x + np.uint64(0x9E3779B97F4A7C15))
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


#: single reads two edits ahead of their runner-up (MAPQ 19 at an offset of 7) were placed wrongly 0 of
#: 6,052 times on a 201 Mbp human-like genome, 0 of 3,797 on a 30 Mbp one of human repeat families and
#: 3 of 1,367 (0.22 %) on a 12 Mbp one of repeat families (100,000 Mason reads each): at 6 they reach
#: MAPQ 20, as bwa mem's (21-32); one edit ahead, 0.15 %, 2.7 % and 1.65 % (MAPQ 7)
READ_OFFSET = 6


@njit(cache=True, nogil=True)
def mapq_from_scores(best, n_best, sub, has_sub, floor, unit):
    """Mapping quality of a best hit from its score, the count of equal bests, the second-best
    score (has_sub False: no other hit) and unit, what one edit costs in score (1 for the
    edit-distance extenders, match + mismatch for the scoring ones). Without a second hit the
    runner-up may hide where the seeder does not look, at a score of at most floor (a read with
    e + 1 edits). Calibrated on simulated reads (BENCHMARKS.md): each edit of margin to the
    runner-up is worth about 13 phred, less READ_OFFSET."""
    if n_best > 1:
        return 0
    if has_sub:
        q = (13 * (best - sub)) // unit - READ_OFFSET
    else:
        q = 20 + (13 * (best - floor)) // unit
    if q > MAPQ_MAX:
        q = MAPQ_MAX
    if q < 0:
        q = 0
    return q


@njit(cache=True, nogil=True)
def length_cap(best, part, match):
    """The highest MAPQ of a hit scoring best over `part` read bases: bwa mem's MAPQ of such a hit
    whose only runner-up is a chance match of CHANCE_MATCH bases, 30 (1 - CHANCE_MATCH match / best)
    ln(part). It binds only on short alignments (a 36-base read matching exactly: 50; 150 bases with
    10 edits: 129, no limit)."""
    if best <= CHANCE_MATCH * match or part < 2:
        return 0
    return int(30.0 * (1.0 - CHANCE_MATCH * match / best) * np.log(part) + 0.499)


@njit(cache=True, nogil=True)
def part_mapq(best, n_best, sub, has_sub, part, read_len, read_maxe, match, unit):
    """MAPQ of a hit scoring best over `part` bases of a read (read_len bases, threshold read_maxe):
    mapq_from_scores against the floor of a part that long (its share of read_maxe plus one edit),
    for a scoring extender (match > 0; an edit-distance one scores -edits) at most length_cap."""
    edits = -(-read_maxe * part // max(read_len, 1))
    q = mapq_from_scores(best, n_best, sub, has_sub, part * match - (edits + 1) * unit, unit)
    if match > 0:
        q = min(q, length_cap(best, part, match))
    return q


@njit(cache=True, nogil=True)
def _has_period(codes, lo, hi, d):
    """Whether codes[lo:hi] are bases (no N) repeating with period d."""
    for i in range(lo, hi):
        if codes[i] > 3 or (i + d < hi and codes[i] != codes[i + d]):
            return False
    return True


@njit(cache=True, nogil=True)
def periodic_parts(codes, offsets, h_read, h_qbeg, h_qend):
    """Per hit: whether the read's aligned part [h_qbeg, h_qend) (read orientation) stays periodic,
    with a period d <= MAX_PERIOD, when d bases of a clip next to it are added: the same read
    bases then also align d bases further along the read, to the same reference, at the same
    score (a clipped poly-A or microsatellite part: bwa mem reports that alignment as XS and
    gives MAPQ 0). Unclipped and N-containing parts are not."""
    n = h_read.shape[0]
    out = np.zeros(n, np.bool_)
    for k in range(n):
        a = offsets[h_read[k]]
        length = offsets[h_read[k] + 1] - a
        qb, qe = h_qbeg[k], h_qend[k]
        if qe - qb < 2 * MAX_PERIOD or (qb == 0 and qe == length):
            continue
        for d in range(1, MAX_PERIOD + 1):
            if (qb >= d and _has_period(codes, a + qb - d, a + qe, d)) or \
                    (qe + d <= length and _has_period(codes, a + qb, a + qe + d, d)):
                out[k] = True
                break
    return out


@njit(cache=True, nogil=True)
def _same_part(h_qbeg, h_qend, k, p):
    """Do hits k and p cover mostly the same part of the read: their read intervals overlapping by
    more than half of the shorter (bwa-mem's rule; else one is the other part of a chimeric read)?"""
    overlap = min(h_qend[k], h_qend[p]) - max(h_qbeg[k], h_qbeg[p])
    return 2 * overlap > min(h_qend[k] - h_qbeg[k], h_qend[p] - h_qbeg[p])


@njit(cache=True, nogil=True)
def _rivals(h_score, keep, shadow, h_qbeg, h_qend, lo, hi, p):
    """(best score, how many kept hits share it, second-best score, whether there is one) over the
    kept hits lo..hi-1, or only those covering the same part of the read as hit p (p >= 0). A kept
    hit's shadow (select_hits) counts as a runner-up."""
    nolow = np.iinfo(np.int64).min
    b = np.int64(0)
    nb = 0
    s = np.int64(0)
    hs = False
    for k in range(lo, hi):
        if not keep[k] or (p >= 0 and not _same_part(h_qbeg, h_qend, k, p)):
            continue
        d = np.int64(h_score[k])
        if nb == 0 or d > b:
            if nb > 0 and (not hs or b > s):
                s = b
                hs = True
            b = d
            nb = 1
        elif d == b:
            nb += 1
        elif not hs or d > s:
            s = d
            hs = True
        if shadow[k] != nolow and (not hs or shadow[k] > s):
            s = shadow[k]
            hs = True
    if nb > 1:
        s = b
        hs = True
    return b, nb, s, hs


@njit(cache=True, nogil=True)
def select_hits(h_read, h_strand, h_start, h_score, h_qbeg, h_qend, h_periodic, n_reads, read_len, read_maxe, match,
                unit, global_first, seed):
    """Hits sorted by (read, strand, start), h_score larger is better, [h_qbeg, h_qend) the part of
    the read each aligns; per read its length and most edits; match, unit: the score of a match
    and the cost of an edit. Per read: the best score, how many hits share it, the second-best
    score, MAPQ and the primary hit.

    Hits of one read and strand whose starts lie within read_maxe of a better (or equal, earlier)
    one are the same locus and are merged: keep[k] is False for the merged-away ones. Returns
    (best, n_best, sub, has_sub, mapq, primary, keep, shadow); primary[r] = -1 for a read without
    hits, else one of its n_best equal bests, chosen by a hash of (seed, read number); shadow[k] of
    a kept hit: the best score merged into it from another start (int64 min: none), or its own
    score where h_periodic[k] (periodic_parts: the part also aligns shifted along the read), which
    counts as a runner-up. A hit aligning another part of the read than the primary (_same_part: the
    other part of a chimeric read) is no rival of it: n_best, sub and MAPQ then count the hits
    covering the primary's part. The MAPQ's floor is that of a part as long as the primary's aligned
    part (its clips left out: a read clipped by an adapter or a contig end is no less unique), and
    the MAPQ at most length_cap of that part."""
    nh = h_read.shape[0]
    keep = np.empty(nh, np.bool_)           # every entry is set below
    # shadow[k] of a kept hit: the best score of the hits merged into it at another start. Distinct
    # starts within one locus mean the read also aligns shifted (a tandem repeat): a runner-up
    shadow = np.empty(nh, np.int64)
    nolow = np.iinfo(np.int64).min
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
                if h_score[b] > h_score[bi]:
                    bi = b
            shadow[bi] = h_score[bi] if h_periodic[bi] else nolow
            for k in range(a, b + 1):
                keep[k] = k == bi
                if h_start[k] != h_start[bi] and h_score[k] > shadow[bi]:
                    shadow[bi] = h_score[k]
            a = b + 1
        i = j + 1
    # np.empty and loops rather than np.full / np.ones: fewer implementations to compile
    best = np.empty(n_reads, np.int32)
    n_best = np.zeros(n_reads, np.int32)
    sub = np.empty(n_reads, np.int32)
    has_sub = np.zeros(n_reads, np.bool_)
    mapq = np.zeros(n_reads, np.int32)
    primary = np.empty(n_reads, np.int64)
    first = np.empty(n_reads + 1, np.int64)
    for r in range(n_reads + 1):
        first[r] = nh
    for k in range(nh - 1, -1, -1):
        first[h_read[k]] = k
    for r in range(n_reads - 1, -1, -1):
        if first[r] > first[r + 1]:
            first[r] = first[r + 1]
    for r in range(n_reads):
        primary[r] = -1
        lo, hi = first[r], first[r + 1]
        b, nb, s, hs = _rivals(h_score, keep, shadow, h_qbeg, h_qend, lo, hi, -1)
        if nb == 0:
            best[r] = b
            sub[r] = s
            continue
        pick = np.int64(mix64(np.uint64(seed) * np.uint64(1000003) + np.uint64(global_first + r))
                        % np.uint64(nb))
        seen = 0
        for k in range(lo, hi):
            if keep[k] and h_score[k] == b:
                if seen == pick:
                    primary[r] = k
                    break
                seen += 1
        p = primary[r]
        for k in range(lo, hi):
            if keep[k] and not _same_part(h_qbeg, h_qend, k, p):
                b, nb, s, hs = _rivals(h_score, keep, shadow, h_qbeg, h_qend, lo, hi, p)
                break
        best[r] = b
        n_best[r] = nb
        sub[r] = s
        has_sub[r] = hs
        mapq[r] = part_mapq(b, np.int64(nb), s, hs, h_qend[p] - h_qbeg[p], np.int64(read_len[r]),
                            np.int64(read_maxe[r]), match, unit)
    return best, n_best, sub, has_sub, mapq, primary, keep, shadow


def query_spans(cigar, cigar_offsets, which, strand, length):
    """Read interval [begin, end) of alignments `which` (strand and read length given per entry) in
    the read's own orientation (a reverse strand alignment's clips swap ends): its leading and
    trailing soft clips removed; an empty CIGAR clips nothing."""
    return _query_spans(np.ascontiguousarray(cigar, np.uint32), np.ascontiguousarray(cigar_offsets, np.int64),
                        np.ascontiguousarray(which, np.int64), np.ascontiguousarray(strand, np.int8),
                        np.ascontiguousarray(length, np.int64))


@njit(cache=True, nogil=True)
def _query_spans(cigar, cigar_offsets, which, strand, length):
    n = which.shape[0]
    begin = np.zeros(n, np.int64)
    end = np.empty(n, np.int64)
    for i in range(n):
        a, b = cigar_offsets[which[i]], cigar_offsets[which[i] + 1]
        lead = trail = np.int64(0)
        if b > a:
            if cigar[a] & 15 == 4:
                lead = np.int64(cigar[a] >> 4)
            if cigar[b - 1] & 15 == 4:
                trail = np.int64(cigar[b - 1] >> 4)
        if strand[i] == 1:
            lead, trail = trail, lead
        begin[i] = lead
        end[i] = length[i] - trail
    return begin, end


def pick_supplementary(h_read, h_qbeg, h_qend, h_score, keep, primary, n_reads):
    """Per read, the best kept hit other than the primary whose read interval overlaps the
    primary's by at most half of the shorter of the two (bwa-mem's rule): the other part of a
    chimeric read. Returns int64[n_reads], -1 where there is none."""
    cand = np.flatnonzero(keep)
    cand = cand[primary[h_read[cand]] != cand]
    p = primary[h_read[cand]]
    overlap = np.minimum(h_qend[cand], h_qend[p]) - np.maximum(h_qbeg[cand], h_qbeg[p])
    shorter = np.minimum(h_qend[cand] - h_qbeg[cand], h_qend[p] - h_qbeg[p])
    cand = cand[2 * overlap <= shorter]
    cand = cand[np.lexsort((-h_score[cand].astype(np.int64), h_read[cand]))]
    first = np.ones(cand.size, np.bool_)
    first[1:] = h_read[cand[1:]] != h_read[cand[:-1]]
    supp = np.full(n_reads, -1, np.int64)
    supp[h_read[cand[first]]] = cand[first]
    return supp


def supplementary_mapq(h_read, h_qbeg, h_qend, h_score, keep, shadow, primary, supp, match, unit, read_maxe,
                       read_len):
    """MAPQ of each read's supplementary hit (0 where none): part_mapq against the other kept hits
    covering mostly the same part of the read and its own shadow (select_hits)."""
    n_reads = supp.shape[0]
    has = np.flatnonzero(supp >= 0)
    mapq = np.zeros(n_reads, np.int64)
    if has.size == 0:
        return mapq
    s = supp[has]
    span = h_qend[s] - h_qbeg[s]
    best_other = np.full(n_reads, np.iinfo(np.int64).min, np.int64)
    other = np.flatnonzero(keep)
    t = supp[h_read[other]]
    other = other[(t >= 0) & (t != other) & (primary[h_read[other]] != other)]
    t = supp[h_read[other]]
    overlap = np.minimum(h_qend[other], h_qend[t]) - np.maximum(h_qbeg[other], h_qbeg[t])
    shorter = np.minimum(h_qend[other] - h_qbeg[other], h_qend[t] - h_qbeg[t])
    other = other[2 * overlap > shorter]
    np.maximum.at(best_other, h_read[other], h_score[other].astype(np.int64))
    best_other[has] = np.maximum(best_other[has], shadow[s])
    sub = best_other[has]
    has_sub = sub > np.iinfo(np.int64).min
    mapq[has] = _part_mapqs(h_score[s].astype(np.int64), np.where(has_sub, sub, 0), has_sub, span,
                            read_len[has].astype(np.int64), read_maxe[has].astype(np.int64), match, unit)
    return mapq


@njit(cache=True, nogil=True)
def _part_mapqs(score, sub, has_sub, part, read_len, read_maxe, match, unit):
    """part_mapq of each (single best) hit."""
    out = np.empty(score.shape[0], np.int64)
    for i in range(score.shape[0]):
        out[i] = part_mapq(score[i], 1, sub[i], has_sub[i], part[i], read_len[i], read_maxe[i], match, unit)
    return out


def report_order(h_read, h_score, keep, primary, supplementary, n_reads, max_hits, report_all):
    """The hits to report, per read: the primary first, then its supplementary hit (-1: none),
    then the other kept hits by decreasing score (ties in (strand, start) order), up to max_hits
    secondaries and primary in all (every one under report_all).
    Returns (rep_offsets int64[n_reads + 1], rep_hit int64[...])."""
    others = np.flatnonzero(keep)
    others = others[(primary[h_read[others]] != others) & (supplementary[h_read[others]] != others)]
    # lexsort is stable: equal scores keep (strand, start) order
    others = others[np.lexsort((-h_score[others].astype(np.int64), h_read[others]))]
    o_read = h_read[others]
    o_first = np.searchsorted(o_read, np.arange(n_reads + 1))
    rank = np.arange(others.size) - o_first[o_read]
    if not report_all:
        others, o_read = others[rank < max_hits - 1], o_read[rank < max_hits - 1]
    has = primary >= 0
    has_supp = supplementary >= 0
    per_read = has.astype(np.int64) + has_supp + np.bincount(o_read, minlength=n_reads)
    rep_offsets = np.zeros(n_reads + 1, np.int64)
    np.cumsum(per_read, out=rep_offsets[1:])
    rep_hit = np.empty(rep_offsets[-1], np.int64)
    rep_hit[rep_offsets[:-1][has]] = primary[has]
    rep_hit[rep_offsets[:-1][has_supp] + 1] = supplementary[has_supp]
    o_first = np.searchsorted(o_read, np.arange(n_reads + 1))
    rank = np.arange(others.size) - o_first[o_read]
    rep_hit[rep_offsets[o_read] + 1 + has_supp[o_read] + rank] = others
    return rep_offsets, rep_hit
