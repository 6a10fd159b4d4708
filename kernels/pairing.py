"""Pairing of mates' hits: the pair of alignments that maximises the two scores less an insert-size
penalty (bwa-mem's rule), FR orientation, against the best unpaired placement."""
import math

import numpy as np
from numba import njit

from pymap.kernels.segments import group_starts
from pymap.kernels.select import MAPQ_MAX, NO_SHADOW, mix64
from pymap.kernels.threads import range_bounds, run_ranges


@njit(cache=True, nogil=True)
def insert_penalty(insert, mean, std, match):
    """Score units lost by an insert size z standard deviations from the mean: -ln P(|Z| >= |z|)
    scaled as bwa-mem does (0.721 per nat, times the match score), rounded."""
    z = abs(insert - mean) / std
    p = math.erfc(z / math.sqrt(2.0))
    if p < 1e-300:
        p = 1e-300
    return np.int64(-0.721 * math.log(p) * match + 0.499)


@njit(cache=True, nogil=True)
def _insert(i, j, h_strand, h_start, h_end, h_ctg, keep, low, high):
    """Insert size of kept hits i and j as a proper pair (FR, one contig, insert within [low, high]);
    -1 when they are not one."""
    if not keep[i] or not keep[j]:
        return -1
    return fr_insert(i, j, h_strand, h_start, h_end, h_ctg, low, high)


@njit(cache=True, nogil=True)
def fr_insert(i, j, h_strand, h_start, h_end, h_ctg, low, high):
    """Insert size of hits i and j as a proper pair (FR, one contig, insert within [low, high]); -1
    when they are not one."""
    if h_ctg[i] != h_ctg[j] or h_strand[i] == h_strand[j]:
        return -1
    f, r = (i, j) if h_strand[i] == 0 else (j, i)
    ins = h_end[r] - h_start[f]
    if ins < low or ins > high:
        return -1
    return ins


#: insert_penalties tabulates at most this many insert sizes (a model's range is a few hundred to a
#: few thousand; the penalty of one beyond the table is computed)
PENALTY_TABLE = 1 << 16


def insert_penalties(low, high, mean, std, match):
    """insert_penalty of the insert sizes low, low + 1, ... up to high (at most PENALTY_TABLE of
    them): pairing looks them up instead of taking an erfc and a log for every pair of hits."""
    return _insert_penalties(np.int64(low), np.int64(min(high, low + PENALTY_TABLE - 1)), mean, std, match)


@njit(cache=True, nogil=True)
def _insert_penalties(low, high, mean, std, match):
    out = np.empty(max(high - low + 1, 0), np.int64)
    for k in range(out.shape[0]):
        out[k] = insert_penalty(low + k, mean, std, match)
    return out


@njit(cache=True, nogil=True)
def _pair_score(i, j, h_strand, h_start, h_end, h_ctg, h_score, keep, penalty, mean, std, low, high, match):
    """Score of hits i and j as a proper pair less the insert-size penalty (penalty: insert_penalties
    from low); int64 min when they are not one."""
    ins = _insert(i, j, h_strand, h_start, h_end, h_ctg, keep, low, high)
    if ins < 0:
        return np.iinfo(np.int64).min
    k = ins - low
    lost = penalty[k] if k < penalty.shape[0] else insert_penalty(ins, mean, std, match)
    return np.int64(h_score[i]) + np.int64(h_score[j]) - lost


@njit(cache=True, nogil=True)
def _lower_bound(b0, b1, h_strand, h_start, strand, start):
    """The first of hits b0..b1-1 (sorted by strand, then start) at or after (strand, start)."""
    while b0 < b1:
        mid = (b0 + b1) >> 1
        if h_strand[mid] < strand or (h_strand[mid] == strand and h_start[mid] < start):
            b0 = mid + 1
        else:
            b1 = mid
    return b0


@njit(cache=True, nogil=True)
def _partners(i, b0, b1, h_strand, h_start, h_end, span, low, high):
    """The range [j0, j1) of the mate's hits b0..b1-1 (sorted by strand, then start; none spans more
    than span bases) that can make a proper pair with hit i: the other strand, the start where an
    insert within [low, high] puts it. The pairs are still to be checked (_insert)."""
    if h_strand[i] == 0:        # the mate reverse, its end within [start + low, start + high]
        s0, s1 = h_start[i] + low - span, h_start[i] + high
    else:                       # the mate forward, its start within [end - high, end - low]
        s0, s1 = h_end[i] - high, h_end[i] - low + 1
    strand = 1 - h_strand[i]
    return (_lower_bound(b0, b1, h_strand, h_start, strand, s0),
            _lower_bound(b0, b1, h_strand, h_start, strand, s1))


@njit(cache=True, nogil=True)
def _max_span(b0, b1, h_start, h_end):
    """The most reference bases any of hits b0..b1-1 spans."""
    out = np.int64(0)
    for j in range(b0, b1):
        out = max(out, np.int64(h_end[j] - h_start[j]))
    return out


#: a pair's MAPQ is 13 phred per edit of margin to its runner-up less this (a read's: less
#: kernels/select.READ_OFFSET). Measured (BENCHMARKS.md, issue 13): pairs 2 edits ahead were placed wrongly
#: 1.0 % of the time on a 12 Mbp genome of repeat families and 0.015 % on a 201 Mbp human-like one
#: (phred 20 and 38); at 7 they had MAPQ 19
PAIR_OFFSET = 5

#: ... and at least this from a whole edit of margin up, where the alignments alone are that much
#: ahead of every other proper pair's: pairs one edit ahead (MAPQ 8 by the rule above) were placed
#: wrongly 1.4 % of the time on that 12 Mbp genome, 0.83 % on a 30 Mbp one of human repeat families,
#: 0.13 % on the 201 Mbp one and never on E. coli (phred 18.5, 21, 29, over 30; bwa mem gives them
#: 22-30); those ahead by the insert size's likelihood alone, 3.6-12 % (they keep the rule)
PAIR_ONE_EDIT_MAPQ = 20


def pair_hits(h_read, h_strand, h_start, h_end, h_ctg, h_score, h_shadow, keep, n_pairs, mean, std, low, high,
              match, unit, unpaired_penalty, global_first, seed, todo=None, prev=None):
    """Hits sorted by read (read 2p is mate 1 of pair p, 2p + 1 mate 2). Per pair: the chosen hit of
    each mate when the best FR pair on one contig with an insert in [low, high] scores more than
    the two mates' best hits less unpaired_penalty; the pair's MAPQ from the margin to the
    second-best pair or to the best placement of the mates apart with one of them at another hit
    (less unpaired_penalty; bwa mem's subo), where a mate's shadow (the same locus aligned at another
    start: a tandem repeat, which the partner cannot resolve) makes a pair that much worse. Returns
    (pick1, pick2, pair_mapq): pick -1 where the pair is not placed as a proper pair (the mates keep
    their own primaries). todo, prev: only the pairs todo are paired, the others keep prev's
    (pick1, pick2, pair_mapq), which must index these hits. Threads over ranges of pairs."""
    first = group_starts(h_read, 2 * n_pairs)
    if prev is None:
        pick1 = np.full(n_pairs, -1, np.int64)
        pick2 = np.full(n_pairs, -1, np.int64)
        pair_mapq = np.zeros(n_pairs, np.int64)
    else:
        pick1, pick2, pair_mapq = (np.array(a, np.int64) for a in prev)
    todo = np.arange(n_pairs, dtype=np.int64) if todo is None else np.asarray(todo, np.int64)
    pick1[todo] = -1
    pick2[todo] = -1
    pair_mapq[todo] = 0
    penalty = insert_penalties(low, high, mean, std, match)
    run_ranges(_pair_range, range_bounds(todo.size, 1024), todo, first, h_strand, h_start, h_end, h_ctg, h_score,
               h_shadow, keep, penalty, mean, std, low, high, match, unit, unpaired_penalty, global_first, seed,
               pick1, pick2, pair_mapq)
    return pick1, pick2, pair_mapq


@njit(cache=True, nogil=True, _nrt=False)
def _pair_range(t0, t1, todo, first, h_strand, h_start, h_end, h_ctg, h_score, h_shadow, keep, penalty, mean, std,
                low, high, match, unit, unpaired_penalty, global_first, seed, pick1, pick2, pair_mapq):
    """pair_hits for pairs todo[t0:t1]. A pair's score is at most its two hits' scores (the insert
    penalty is >= 0), so the penalty is computed only for pairs that can still matter."""
    neg = np.iinfo(np.int64).min
    for t in range(t0, t1):
        p = todo[t]
        a0, a1 = first[2 * p], first[2 * p + 1]
        b0, b1 = first[2 * p + 1], first[2 * p + 2]
        best1 = _best_kept(a0, a1, -1, keep, h_score)
        best2 = _best_kept(b0, b1, -1, keep, h_score)
        if best1 == neg or best2 == neg:
            continue
        best = neg
        second = neg
        n_best = 0
        top_sum = neg           # the two highest sums of the mates' scores over the proper pairs
        next_sum = neg
        span = _max_span(b0, b1, h_start, h_end)
        for i in range(a0, a1):
            j0, j1 = _partners(i, b0, b1, h_strand, h_start, h_end, span, low, high)
            for j in range(j0, j1):
                if np.int64(h_score[i]) + np.int64(h_score[j]) < second:
                    continue
                s = _pair_score(i, j, h_strand, h_start, h_end, h_ctg, h_score, keep, penalty, mean, std, low, high,
                                match)
                if s == neg:
                    continue
                both = np.int64(h_score[i]) + np.int64(h_score[j])
                if both > top_sum:
                    next_sum = top_sum
                    top_sum = both
                elif both > next_sum:
                    next_sum = both
                if s > best:
                    second = best
                    best = s
                    n_best = 1
                elif s == best:
                    n_best += 1
                    second = s
                elif s > second:
                    second = s
        if n_best == 0 or best <= best1 + best2 - unpaired_penalty:
            continue
        # one of the equal best pairs, chosen by a hash of (seed, pair number)
        pick = np.int64(mix64(np.uint64(seed) * np.uint64(1000003) + np.uint64(global_first + p))
                        % np.uint64(n_best))
        seen = 0
        for i in range(a0, a1):
            if pick1[p] >= 0:
                break
            j0, j1 = _partners(i, b0, b1, h_strand, h_start, h_end, span, low, high)
            for j in range(j0, j1):
                if np.int64(h_score[i]) + np.int64(h_score[j]) < best:
                    continue
                s = _pair_score(i, j, h_strand, h_start, h_end, h_ctg, h_score, keep, penalty, mean, std, low, high,
                                match)
                if s == best:
                    if seen == pick:
                        pick1[p] = i
                        pick2[p] = j
                        break
                    seen += 1
        for k in (pick1[p], pick2[p]):
            if h_shadow[k] != NO_SHADOW and best - (h_score[k] - h_shadow[k]) > second:
                second = best - (np.int64(h_score[k]) - h_shadow[k])
        # the mates placed apart, one of them at another hit than the pair's, compete (bwa mem's
        # subo counts every unpaired placement; the pair's own hits apart are no other placement)
        alt1 = _best_kept(a0, a1, pick1[p], keep, h_score)
        alt2 = _best_kept(b0, b1, pick2[p], keep, h_score)
        if alt1 != neg:
            second = max(second, alt1 + best2 - unpaired_penalty)
        if alt2 != neg:
            second = max(second, best1 + alt2 - unpaired_penalty)
        if second == neg:
            q = MAPQ_MAX
        else:
            q = (13 * (best - second)) // unit - PAIR_OFFSET
            # a whole edit ahead in the alignments too, not only by a likelier insert than a pair as
            # well aligned (another copy of a segmental duplication); a pair pruned above aligns below
            # second, so more than an edit below the picked one wherever that matters
            picked = np.int64(h_score[pick1[p]]) + np.int64(h_score[pick2[p]])
            rival = next_sum if picked == top_sum else top_sum
            if best - second >= unit and (rival == neg or picked - rival >= unit):
                q = max(q, PAIR_ONE_EDIT_MAPQ)
        pair_mapq[p] = min(max(q, 0), MAPQ_MAX)


@njit(cache=True, nogil=True)
def _best_kept(k0, k1, pick, keep, h_score):
    """The best score of a mate's kept hits k0..k1-1 other than `pick` (-1: all; int64 min: none)."""
    out = np.iinfo(np.int64).min
    for k in range(k0, k1):
        if k != pick and keep[k] and h_score[k] > out:
            out = np.int64(h_score[k])
    return out


@njit(cache=True, nogil=True)
def rescue_anchors(first, h_strand, h_start, h_end, h_ctg, h_score, keep, pick1, pick2, best_score, found_only,
                   rescuable, searched, mean, std, low, high, match, unpaired_penalty, max_anchors):
    """The hits a mate is searched from (bwa mem's mate rescue). Hits sorted by read (first from
    segments.group_starts; read r's mate is r ^ 1); pick1, pick2: pair_hits' choice. A pair placed at both
    mates' best hits has none. Else a read's anchors are its kept hits within unpaired_penalty of
    its best, the max_anchors best of them (ties: hit order), where the mate is rescuable and has no
    kept hit within unpaired_penalty of its best making a proper pair with the hit (a poorer one, say
    a repeat-array read's alignment shifted by part of its period, does not stand for the mate's
    alignment there), and where the hit and the mate could reach the pair's present score (the
    chosen pair's, else the mates' best apart), the mate scoring best_score (per read: the most it
    can score) or, with found_only, its best hit's score (best_score when it has none). Hits marked
    searched count among the max_anchors but are not returned. Returns hit indices, ascending."""
    neg = np.iinfo(np.int64).min
    n_reads = first.shape[0] - 1
    out = np.empty(first[n_reads], np.int64)
    order = np.empty(out.shape[0], np.int64)
    key = np.empty(out.shape[0], np.int64)
    best = np.empty(n_reads, np.int64)
    for r in range(n_reads):
        best[r] = _best_kept(first[r], first[r + 1], -1, keep, h_score)
    n = 0
    for r in range(n_reads):
        m = r ^ 1
        if m >= n_reads or not rescuable[m] or best[r] == neg:
            continue
        p = r >> 1
        if pick1[p] >= 0 and h_score[pick1[p]] == best[2 * p] and h_score[pick2[p]] == best[2 * p + 1]:
            continue
        if pick1[p] >= 0:
            ins = _insert(pick1[p], pick2[p], h_strand, h_start, h_end, h_ctg, keep, low, high)
            now = np.int64(h_score[pick1[p]]) + np.int64(h_score[pick2[p]]) - insert_penalty(ins, mean, std, match)
        elif best[m] != neg:
            now = best[r] + best[m] - unpaired_penalty
        else:
            now = neg
        c = 0
        for k in range(first[r], first[r + 1]):
            s = np.int64(h_score[k])
            reach = s + (best[m] if found_only and best[m] != neg else best_score[m])
            if keep[k] and s >= best[r] - unpaired_penalty and reach >= now:
                order[c] = k
                key[c] = -s
                c += 1
        if c > max_anchors:
            picked = np.sort(order[:c][np.argsort(key[:c], kind="mergesort")[:max_anchors]])
            c = max_anchors
            order[:c] = picked
        for t in range(c):
            k = order[t]
            if searched[k]:
                continue
            paired = False
            j0, j1 = _partners(k, first[m], first[m + 1], h_strand, h_start, h_end,
                               _max_span(first[m], first[m + 1], h_start, h_end), low, high)
            for j in range(j0, j1):
                if (np.int64(h_score[j]) >= best[m] - unpaired_penalty
                        and _insert(k, j, h_strand, h_start, h_end, h_ctg, keep, low, high) >= 0):
                    paired = True
                    break
            if not paired:
                out[n] = k
                n += 1
    return out[:n]
