"""The stage contracts of pymap.pipeline checked over whole batches: one pass over a seeder's
candidates, one over an extender's alignments (threads over ranges), instead of a dozen NumPy
passes and their temporaries for every batch.

Both return per-item (or one) rule codes; the caller turns the first broken rule into its message.
A code names the first rule an item breaks, in the order of the codes: an item breaking several
shows the first, so the smallest code present is the first rule broken anywhere.
"""
import numpy as np
from numba import njit

from pymap.kernels.cigar import OP_D, OP_I, OP_M, OP_S
from pymap.kernels.threads import range_bounds, run_ranges

# seeder rules
READ_OUTSIDE, BAD_STRAND, FAR_POSITION, NOT_SORTED = 1, 2, 3, 4


@njit(cache=True, nogil=True)
def candidates_error(read, strand, pos, n_reads, ref_len):
    """The first seeder rule broken (0: none): every read in [0, n_reads), every strand 0 or 1, every
    position in [-ref_len, 2 ref_len), then (read, strand, pos) strictly increasing (sorted, unique)."""
    worst = 0
    for i in range(read.shape[0]):
        code = 0
        if read[i] < 0 or read[i] >= n_reads:
            code = READ_OUTSIDE
        elif strand[i] != 0 and strand[i] != 1:
            code = BAD_STRAND
        elif pos[i] < -ref_len or pos[i] >= 2 * ref_len:
            code = FAR_POSITION
        elif i > 0 and (read[i] < read[i - 1] or (read[i] == read[i - 1] and (
                strand[i] < strand[i - 1] or (strand[i] == strand[i - 1] and pos[i] <= pos[i - 1])))):
            code = NOT_SORTED
        if code and (worst == 0 or code < worst):
            worst = code
    return worst


# extender rules, in the order they are checked
TOO_MANY_EDITS, START_OUTSIDE, BAD_OP, READ_SPAN, PAST_END, NM_DIFFERS, SCORE_NOT_EDITS = 1, 2, 3, 4, 5, 6, 7


def alignments_errors(found, score, edits, start, max_edits, lo, hi, edit_scoring, walk, cigar, offsets,
                      read_codes, rc_codes, read_offsets, c_read, c_strand, ref_codes):
    """Per alignment, the first extender rule it breaks (int8, 0: none), and its NM from the CIGAR
    (-1 where not walked). Found alignments: edits in [0, max_edits] (edit scoring; else >= 0), start
    in [lo, max(hi, lo + 1)). With walk (a traceback with monotone offsets): every CIGAR of M, I, D,
    S (S only at an end, no zero length); found ones covering the whole read, ending by hi, with NM
    (mismatches, N included, + inserted + deleted bases) equal to edits, and score -edits with edit
    scoring."""
    n = found.shape[0]
    err = np.zeros(n, np.int8)
    nm = np.full(n, -1, np.int64)
    run_ranges(_alignments_range, range_bounds(n, 4096), found, score, edits, start, max_edits, lo, hi,
               edit_scoring, walk, cigar, offsets, read_codes, rc_codes, read_offsets, c_read, c_strand, ref_codes,
               err, nm)
    return err, nm


@njit(cache=True, nogil=True, _nrt=False)
def _alignments_range(i0, i1, found, score, edits, start, max_edits, lo, hi, edit_scoring, walk, cigar, offsets,
                      read_codes, rc_codes, read_offsets, c_read, c_strand, ref_codes, err, nm):
    for i in range(i0, i1):
        f = found[i]
        if f and (edits[i] < 0 or (edit_scoring and edits[i] > max_edits[i])):
            err[i] = TOO_MANY_EDITS
            continue
        if f and (start[i] < lo[i] or start[i] >= max(hi[i], lo[i] + 1)):
            err[i] = START_OUTSIDE
            continue
        if not walk:
            continue
        a, b = offsets[i], offsets[i + 1]
        qlen = np.int64(0)
        rlen = np.int64(0)
        bad = False
        for k in range(a, b):
            op = cigar[k] & 15
            ln = np.int64(cigar[k] >> 4)
            if ln == 0 or (op != OP_M and op != OP_I and op != OP_D and op != OP_S) or (
                    op == OP_S and k != a and k != b - 1):
                bad = True
            if op == OP_M or op == OP_I or op == OP_S:
                qlen += ln
            if op == OP_M or op == OP_D:
                rlen += ln
        if bad:
            err[i] = BAD_OP
            continue
        if not f:
            continue
        r = c_read[i]
        if qlen != read_offsets[r + 1] - read_offsets[r]:
            err[i] = READ_SPAN
            continue
        if start[i] + rlen > hi[i]:
            err[i] = PAST_END
            continue
        if b > a:
            nm[i] = _cigar_nm(cigar, a, b, start[i], rc_codes if c_strand[i] == 1 else read_codes,
                              read_offsets[r], ref_codes)
        if nm[i] != edits[i]:
            err[i] = NM_DIFFERS
        elif edit_scoring and score[i] != -edits[i]:
            err[i] = SCORE_NOT_EDITS


@njit(cache=True, nogil=True)
def _mismatches(a, b):
    """Positions where a and b differ or a holds N (code 4): a loop over two views, with no branch, that
    the compiler vectorises."""
    count = np.uint32(0)
    for t in range(a.shape[0]):
        count += np.uint32((a[t] != b[t]) | (a[t] > np.uint8(3)))
    return np.int64(count)


@njit(cache=True, nogil=True)
def _cigar_nm(cigar, a, b, q, src, j, ref_codes):
    """NM of the CIGAR ops cigar[a:b] placed at reference q, the read's bases from src[j]."""
    count = 0
    for k in range(a, b):
        op = cigar[k] & 15
        ln = np.int64(cigar[k] >> 4)
        if op == OP_M:
            count += _mismatches(src[j:j + ln], ref_codes[q:q + ln])
            j += ln
            q += ln
        elif op == OP_I:
            count += ln
            j += ln
        elif op == OP_D:
            count += ln
            q += ln
        else:
            j += ln
    return count
