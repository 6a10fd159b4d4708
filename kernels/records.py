"""A batch's SAM records as arrays, what kernels.sam.format_sam writes: per record its read, the hit it
shows (-1: unmapped), FLAG, MAPQ, XS, the record its SA tag names, its mate's record and TLEN. One pass
over the reads (and one over the records for mates) where some forty NumPy calls over the records were
(BENCHMARKS.md, thirty-fifth session)."""
import numpy as np
from numba import njit

from pymap.kernels.pairing import fr_insert
from pymap.kernels.sam import NO_XS


def record_fields(rep_offsets, rep_hit, primary, mapq, has_sub, sub, supp, supp_mapq, h_strand, h_start, h_end,
                  h_ctg, supp_flag, proper=None, low=0, high=0):
    """The records of reads whose hits to report are rep_hit[rep_offsets[r]:rep_offsets[r + 1]]
    (select.report_order: the primary, its supplementary, the secondaries; none: one unmapped record).
    primary, mapq, has_sub, sub (XS), supp, supp_mapq per read; h_*: per hit; supp_flag: the FLAG bit
    of a supplementary record (2048, or 256 under -M). proper (per pair, reads 2p and 2p + 1 mates):
    paired reads, which get the pair flags, their mate's record and TLEN (a record other than a
    primary is flagged proper only where it makes a proper pair, [low, high], with the mate's
    primary). Returns (rec_read, rec_hit, flag, rec_mapq, rec_xs, rec_sa, rec_mate, rec_tlen), int64."""
    i64 = lambda a: np.ascontiguousarray(a, np.int64)       # noqa: E731
    paired = proper is not None
    return _record_fields(i64(rep_offsets), i64(rep_hit), i64(primary), i64(mapq), np.ascontiguousarray(has_sub),
                          i64(sub), i64(supp), i64(supp_mapq), h_strand, h_start, h_end, h_ctg, np.int64(supp_flag),
                          paired, np.ascontiguousarray(proper if paired else np.zeros(0, np.bool_)), np.int64(low),
                          np.int64(high))


@njit(cache=True, nogil=True)
def _record_fields(rep_offsets, rep_hit, primary, mapq, has_sub, sub, supp, supp_mapq, h_strand, h_start, h_end,
                   h_ctg, supp_flag, paired, proper, low, high):
    n = primary.shape[0]
    rec_first = np.empty(n + 1, np.int64)
    rec_first[0] = 0
    for r in range(n):
        rec_first[r + 1] = rec_first[r] + max(rep_offsets[r + 1] - rep_offsets[r], 1)
    m = rec_first[n]
    rec_read, rec_hit, flag = np.empty(m, np.int64), np.empty(m, np.int64), np.empty(m, np.int64)
    rec_mapq, rec_xs = np.zeros(m, np.int64), np.full(m, NO_XS, np.int64)
    rec_sa, rec_mate, rec_tlen = np.full(m, -1, np.int64), np.full(m, -1, np.int64), np.zeros(m, np.int64)
    for r in range(n):
        shown = rep_offsets[r + 1] - rep_offsets[r]
        for k in range(max(shown, 1)):
            i = rec_first[r] + k
            h = rep_hit[rep_offsets[r] + k] if shown > 0 else -1
            rec_read[i], rec_hit[i] = r, h
            if h < 0:
                flag[i] = 4
                continue
            flag[i] = 16 * np.int64(h_strand[h])
            if k == 0:
                rec_mapq[i] = mapq[r]
                if has_sub[r]:
                    rec_xs[i] = sub[r]
            elif k == 1 and supp[r] >= 0:      # the supplementary: it and the primary name each other
                flag[i] |= supp_flag
                rec_mapq[i] = supp_mapq[r]
                rec_sa[i], rec_sa[i - 1] = i - 1, i
            else:
                flag[i] |= 256
    if paired:
        for i in range(m):
            r = rec_read[i]
            mate = r ^ 1
            rec_mate[i] = rec_first[mate]
            h, mh = rec_hit[i], rec_hit[rec_first[mate]]
            flag[i] |= 1 | (64 if r % 2 == 0 else 128)
            if proper[r // 2] and primary[r] >= 0 and primary[mate] >= 0 and (
                    i == rec_first[r] or fr_insert(h, mh, h_strand, h_start, h_end, h_ctg, low, high) >= 0):
                flag[i] |= 2
            if mh < 0:
                flag[i] |= 8
            elif h_strand[mh] == 1:
                flag[i] |= 32
            # TLEN against the mate's primary on its contig: + for the leftmost, - for the other (a secondary or
            # supplementary record's too, as bwa mem)
            if h >= 0 and mh >= 0 and h_ctg[h] == h_ctg[mh]:
                span = max(h_end[h], h_end[mh]) - min(h_start[h], h_start[mh])
                left = h_start[h] < h_start[mh] or (h_start[h] == h_start[mh] and r % 2 == 0)
                rec_tlen[i] = span if left else -span
    return rec_read, rec_hit, flag, rec_mapq, rec_xs, rec_sa, rec_mate, rec_tlen
