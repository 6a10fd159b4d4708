"""Selection of hits per read: merge hits of one locus, pick the primary, secondaries, MAPQ."""
import functools

import numpy as np
from numba import njit

from pymap.kernels.borrow import borrowed
from pymap.kernels.cigar import OP_D, OP_M, soft_clips
from pymap.kernels.contigs import contig_of
from pymap.kernels.segments import group_starts
from pymap.kernels.sorting import sort_int64_buf
from pymap.kernels.threads import range_bounds, run_ranges

MAPQ_MAX = 60
#: the longest period of a read's aligned part that periodic_part looks for (homopolymers to
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


#: length_cap's natural logarithms in fixed point (LN_ONE stands for 1.0), read from one table
#: (ln_table) on the CPU and on the GPU: the same integers on both, where their floating-point
#: logarithms and fused multiply-adds may differ in the last bit
LN_ONE = 1 << 20
#: a kept hit without a shadow (select_hits), and every merged-away hit
NO_SHADOW = np.int64(np.iinfo(np.int64).min)


@functools.lru_cache(maxsize=4)
def _ln_table(size):
    table = np.zeros(size, np.int64)
    table[1:] = np.round(np.log(np.arange(1, size)) * LN_ONE)
    return table


def ln_table(n):
    """round(ln(k) LN_ONE) for every k < n (and beyond, up to a power of two; 0 for k = 0), int64:
    one array per size, kept (a GPU keeps its copy resident)."""
    return _ln_table(1 << max(10, int(n - 1).bit_length()))


@njit(cache=True, nogil=True)
def length_cap(best, part, match, ln_q):
    """The highest MAPQ of a hit scoring best over `part` read bases: bwa mem's MAPQ of such a hit
    whose only runner-up is a chance match of CHANCE_MATCH bases, 30 (1 - CHANCE_MATCH match / best)
    ln(part), rounded up from .501, in integers (ln_q = ln_table). It binds only on short alignments
    (a 36-base read matching exactly: 51; 150 bases with 10 mismatches, score 100: 122, no limit)."""
    if best <= CHANCE_MATCH * match or part < 2:
        return 0
    best = np.int64(best)
    return (30000 * (best - CHANCE_MATCH * match) * ln_q[part] + 499 * best * LN_ONE) // (1000 * best * LN_ONE)


@njit(cache=True, nogil=True)
def part_mapq(best, n_best, sub, has_sub, part, read_len, read_maxe, match, unit, ln_q):
    """MAPQ of a hit scoring best over `part` bases of a read (read_len bases, threshold read_maxe):
    mapq_from_scores against the floor of a part that long (its share of read_maxe plus one edit),
    for a scoring extender (match > 0; an edit-distance one scores -edits) at most length_cap."""
    edits = -(-read_maxe * part // max(read_len, 1))
    q = mapq_from_scores(best, n_best, sub, has_sub, part * match - (edits + 1) * unit, unit)
    if match > 0:
        q = min(q, length_cap(best, part, match, ln_q))
    return q


@njit(cache=True, nogil=True)
def _has_period(codes, lo, hi, d):
    """Whether codes[lo:hi] are bases (no N) repeating with period d."""
    for i in range(lo, hi):
        if codes[i] > 3 or (i + d < hi and codes[i] != codes[i + d]):
            return False
    return True


@njit(cache=True, nogil=True)
def periodic_part(codes, a, length, qb, qe):
    """Whether the aligned part [qb, qe) (read orientation) of the read codes[a:a + length] stays
    periodic, with a period d <= MAX_PERIOD, when d bases of a clip next to it are added: the same
    read bases then also align d bases further along the read, to the same reference, at the same
    score (a clipped poly-A or microsatellite part: bwa mem reports that alignment as XS and gives
    MAPQ 0). Unclipped and N-containing parts are not."""
    if qe - qb < 2 * MAX_PERIOD or (qb == 0 and qe == length):
        return False
    for d in range(1, MAX_PERIOD + 1):
        if (qb >= d and _has_period(codes, a + qb - d, a + qe, d)) or \
                (qe + d <= length and _has_period(codes, a + qb, a + qe + d, d)):
            return True
    return False


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
        if shadow[k] != NO_SHADOW and (not hs or shadow[k] > s):
            s = shadow[k]
            hs = True
    if nb > 1:
        s = b
        hs = True
    return b, nb, s, hs


def select_hits(h_read, h_strand, h_start, h_score, h_qbeg, h_qend, codes, offsets, read_maxe, match, unit,
                global_first, seed, device="cpu", reads=None):
    """Hits sorted by (read, strand, start) of the reads codes[offsets[r]:offsets[r + 1]], h_score
    larger is better, [h_qbeg, h_qend) the part of the read each aligns; per read its most edits;
    match, unit: the score of a match and the cost of an edit. Per read: the best score, how many
    hits share it, the second-best score, MAPQ and the primary hit (select_read), on the CPU's
    threads or, with device "gpu", on the GPU (the same routine, the same results).

    Returns (best, n_best, sub, has_sub, mapq, primary, keep, shadow); primary[r] = -1 for a read
    without hits; keep[k] False for a hit merged into another of its locus; shadow[k] of a kept hit:
    the best score merged into it from another start, or its own score where its part is periodic
    (periodic_part), which counts as a runner-up (NO_SHADOW: none).

    reads (int64 array): only these reads are selected, on the CPU (a few reads selected again); the
    other reads' entries are left undefined."""
    n_reads = offsets.shape[0] - 1
    first = group_starts(h_read, n_reads)
    offsets = np.ascontiguousarray(offsets, np.int64)
    args = (first, np.ascontiguousarray(h_strand, np.int8), np.ascontiguousarray(h_start, np.int64),
            np.ascontiguousarray(h_score, np.int32), np.ascontiguousarray(h_qbeg, np.int64),
            np.ascontiguousarray(h_qend, np.int64), np.ascontiguousarray(codes, np.uint8), offsets,
            np.ascontiguousarray(read_maxe, np.int64), np.int64(match), np.int64(unit), np.int64(global_first),
            np.uint64(seed), ln_table(int(np.diff(offsets).max(initial=0)) + 1))
    if device == "gpu":
        from pymap.kernels.select_cuda import select_hits_cuda
        return select_hits_cuda(*args)
    out = select_outputs(n_reads, int(first[-1]))
    if reads is None:
        run_ranges(_select_range, range_bounds(n_reads, 2048), *args, *out)
    else:
        _select_listed(np.ascontiguousarray(reads, np.int64), *args, *out)
    return out


def select_outputs(n_reads, n_hits):
    """select_hits' outputs, to be filled: best, n_best, sub, has_sub, mapq, primary a read; keep,
    shadow a hit."""
    return (np.empty(n_reads, np.int32), np.empty(n_reads, np.int32), np.empty(n_reads, np.int32),
            np.empty(n_reads, np.bool_), np.empty(n_reads, np.int32), np.empty(n_reads, np.int64),
            np.empty(n_hits, np.bool_), np.empty(n_hits, np.int64))


@njit(cache=True, nogil=True, _nrt=False)
def _select_range(r0, r1, first, h_strand, h_start, h_score, h_qbeg, h_qend, codes, offsets, read_maxe, match,
                  unit, global_first, seed, ln_q, best, n_best, sub, has_sub, mapq, primary, keep, shadow):
    for r in range(r0, r1):
        select_read(r, first, h_strand, h_start, h_score, h_qbeg, h_qend, codes, offsets, read_maxe, match, unit,
                    global_first, seed, ln_q, best, n_best, sub, has_sub, mapq, primary, keep, shadow)


@njit(cache=True, nogil=True, _nrt=False)
def _select_listed(reads, first, h_strand, h_start, h_score, h_qbeg, h_qend, codes, offsets, read_maxe, match, unit,
                   global_first, seed, ln_q, best, n_best, sub, has_sub, mapq, primary, keep, shadow):
    for r in reads:
        select_read(r, first, h_strand, h_start, h_score, h_qbeg, h_qend, codes, offsets, read_maxe, match, unit,
                    global_first, seed, ln_q, best, n_best, sub, has_sub, mapq, primary, keep, shadow)


@njit(cache=True, nogil=True)
def select_read(r, first, h_strand, h_start, h_score, h_qbeg, h_qend, codes, offsets, read_maxe, match, unit,
                global_first, seed, ln_q, best, n_best, sub, has_sub, mapq, primary, keep, shadow):
    """select_hits for read r, whose hits are first[r]..first[r + 1] - 1; writes its entries of the
    outputs (per read: best .. primary; per hit: keep, shadow).

    Hits of one strand whose starts lie within read_maxe of a better (or equal, earlier) one are the
    same locus and are merged. The primary is one of the n_best equal bests, chosen by a hash of
    (seed, read number). A hit aligning another part of the read than the primary (_same_part: the
    other part of a chimeric read) is no rival of it: n_best, sub and MAPQ then count the hits
    covering the primary's part. The MAPQ's floor is that of a part as long as the primary's aligned
    part (its clips left out: a read clipped by an adapter or a contig end is no less unique), and
    the MAPQ at most length_cap of that part."""
    lo, hi = first[r], first[r + 1]
    ra = offsets[r]
    length = offsets[r + 1] - ra
    span = read_maxe[r]
    i = lo
    while i < hi:
        j = i
        while j + 1 < hi and h_strand[j + 1] == h_strand[i]:
            j += 1
        a = i
        while a <= j:
            b = a
            bi = a
            while b + 1 <= j and h_start[b + 1] - h_start[b] <= span:
                b += 1
                if h_score[b] > h_score[bi]:
                    bi = b
            top = NO_SHADOW
            if periodic_part(codes, ra, length, h_qbeg[bi], h_qend[bi]):
                top = np.int64(h_score[bi])
            for k in range(a, b + 1):
                keep[k] = k == bi
                shadow[k] = NO_SHADOW
                # distinct starts within one locus mean the read also aligns shifted (a tandem
                # repeat): a runner-up
                if h_start[k] != h_start[bi] and h_score[k] > top:
                    top = np.int64(h_score[k])
            shadow[bi] = top
            a = b + 1
        i = j + 1
    primary[r] = -1
    n_best[r] = 0
    has_sub[r] = False
    mapq[r] = 0
    b, nb, s, hs = _rivals(h_score, keep, shadow, h_qbeg, h_qend, lo, hi, -1)
    if nb == 0:
        best[r] = b
        sub[r] = s
        return
    pick = np.int64(mix64(seed * np.uint64(1000003) + np.uint64(global_first + r)) % np.uint64(nb))
    seen = 0
    p = lo
    for k in range(lo, hi):
        if keep[k] and h_score[k] == b:
            if seen == pick:
                p = k
                break
            seen += 1
    primary[r] = p
    for k in range(lo, hi):
        if keep[k] and not _same_part(h_qbeg, h_qend, k, p):
            b, nb, s, hs = _rivals(h_score, keep, shadow, h_qbeg, h_qend, lo, hi, p)
            break
    best[r] = b
    n_best[r] = nb
    sub[r] = s
    has_sub[r] = hs
    mapq[r] = part_mapq(b, np.int64(nb), s, hs, h_qend[p] - h_qbeg[p], length, span, match, unit, ln_q)


def query_spans(cigar, cigar_offsets, which, strand, length):
    """Read interval [begin, end) of alignments `which` (strand and read length given per entry) in
    the read's own orientation (a reverse strand alignment's clips swap ends): its leading and
    trailing soft clips removed; an empty CIGAR clips nothing."""
    return _query_spans(np.ascontiguousarray(cigar, np.uint32), np.ascontiguousarray(cigar_offsets, np.int64),
                        np.ascontiguousarray(which, np.int64), np.ascontiguousarray(strand, np.int8),
                        np.ascontiguousarray(length, np.int64))


@njit(cache=True, nogil=True)
def _query_spans(cigar, cigar_offsets, which, strand, length):
    cigar, cigar_offsets, which, strand, length = borrowed((cigar, cigar_offsets, which, strand, length))
    n = which.shape[0]
    begin = np.zeros(n, np.int64)
    end = np.empty(n, np.int64)
    for i in range(n):
        lead, trail = soft_clips(cigar, cigar_offsets[which[i]], cigar_offsets[which[i] + 1])
        if strand[i] == 1:
            lead, trail = trail, lead
        begin[i] = lead
        end[i] = length[i] - trail
    return begin, end


def hit_spans(cigar, cigar_offsets, hit_aln, h_start, h_strand, length, ctg_offsets):
    """Per hit (alignment hit_aln[k], its first aligned base at reference h_start[k], of a read of
    length[k]): (the reference end, exclusive; its contig, of those ctg_offsets bounds; qbeg, qend:
    the read interval it aligns, as query_spans gives). One pass over the hits' CIGARs only."""
    return _hit_spans(np.ascontiguousarray(cigar, np.uint32), np.ascontiguousarray(cigar_offsets, np.int64),
                      np.ascontiguousarray(hit_aln, np.int64), np.ascontiguousarray(h_start, np.int64),
                      np.ascontiguousarray(h_strand, np.int8), np.ascontiguousarray(length, np.int64),
                      np.ascontiguousarray(ctg_offsets, np.int64))


@njit(cache=True, nogil=True)
def _hit_spans(cigar, cigar_offsets, hit_aln, h_start, h_strand, length, ctg_offsets):
    (cigar, cigar_offsets, hit_aln, h_start, h_strand, length, ctg_offsets) = borrowed((
        cigar, cigar_offsets, hit_aln, h_start, h_strand, length, ctg_offsets))
    qbeg, qend = _query_spans(cigar, cigar_offsets, hit_aln, h_strand, length)
    n = hit_aln.shape[0]
    end = np.empty(n, np.int64)
    ctg = np.empty(n, np.int64)
    for i in range(n):
        span = np.int64(0)
        for k in range(cigar_offsets[hit_aln[i]], cigar_offsets[hit_aln[i] + 1]):
            op = cigar[k] & 15
            if op == OP_M or op == OP_D:
                span += np.int64(cigar[k] >> 4)
        end[i] = h_start[i] + span
        ctg[i] = contig_of(ctg_offsets, h_start[i])
    return end, ctg, qbeg, qend


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
    best_other = np.full(n_reads, NO_SHADOW, np.int64)        # none yet, as a shadow's none
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
    has_sub = sub > NO_SHADOW
    mapq[has] = _part_mapqs(h_score[s].astype(np.int64), np.where(has_sub, sub, 0), has_sub, span,
                            read_len[has].astype(np.int64), read_maxe[has].astype(np.int64), match, unit,
                            ln_table(int(read_len.max()) + 1))
    return mapq


@njit(cache=True, nogil=True)
def _part_mapqs(score, sub, has_sub, part, read_len, read_maxe, match, unit, ln_q):
    """part_mapq of each (single best) hit."""
    (score, sub, has_sub, part, read_len, read_maxe, ln_q) = borrowed((
        score, sub, has_sub, part, read_len, read_maxe, ln_q))
    out = np.empty(score.shape[0], np.int64)
    for i in range(score.shape[0]):
        out[i] = part_mapq(score[i], 1, sub[i], has_sub[i], part[i], read_len[i], read_maxe[i], match, unit, ln_q)
    return out


def report_order(h_read, h_score, keep, primary, supplementary, n_reads, max_hits, report_all):
    """The hits to report, per read: the primary first, then its supplementary hit (-1: none),
    then the other kept hits by decreasing score (ties in (strand, start) order), up to max_hits
    secondaries and primary in all (every one under report_all).
    Returns (rep_offsets int64[n_reads + 1], rep_hit int64[...])."""
    most = h_read.shape[0] if report_all else max(max_hits - 1, 0)
    return _report_order(group_starts(h_read, n_reads), np.ascontiguousarray(h_score, np.int32), keep,
                         np.ascontiguousarray(primary, np.int64), np.ascontiguousarray(supplementary, np.int64),
                         np.int64(most))


@njit(cache=True, nogil=True)
def _report_order(first, h_score, keep, primary, supplementary, most):
    """report_order over the reads' hit ranges first[r]..first[r + 1] - 1, at most `most` others a read."""
    n = primary.shape[0]
    rep_offsets = np.zeros(n + 1, np.int64)
    widest = 0
    for r in range(n):
        c = 0
        for k in range(first[r], first[r + 1]):
            c += keep[k] and k != primary[r] and k != supplementary[r]
        widest = max(widest, c)
        rep_offsets[r + 1] = rep_offsets[r] + (primary[r] >= 0) + (supplementary[r] >= 0) + min(c, most)
    rep_hit = np.empty(rep_offsets[n], np.int64)
    # a read's others sorted by one key: decreasing score, then hit order
    keys = np.empty(widest, np.int64)
    tmp = np.empty(widest, np.int64)
    for r in range(n):
        o = rep_offsets[r]
        if primary[r] >= 0:
            rep_hit[o] = primary[r]
            o += 1
        if supplementary[r] >= 0:
            rep_hit[o] = supplementary[r]
            o += 1
        if o == rep_offsets[r + 1]:
            continue
        span = first[r + 1] - first[r]
        c = 0
        for k in range(first[r], first[r + 1]):
            if keep[k] and k != primary[r] and k != supplementary[r]:
                keys[c] = ((1 << 31) - np.int64(h_score[k])) * span + (k - first[r])
                c += 1
        sort_int64_buf(keys, c, tmp)
        for j in range(rep_offsets[r + 1] - o):
            rep_hit[o + j] = first[r] + keys[j] % span
    return rep_offsets, rep_hit
