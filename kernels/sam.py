"""SAM text records for a batch, formatted in Numba (the header and BAM go through pysam).

One pass: each range of records is formatted into a buffer of its own, of a guessed size, and the
ranges are joined. The writers store a byte only where it lies inside the buffer, so a record that
does not fit is cut short, never written past the end: the range grows its buffer and writes that
record again.

For compile time: every helper is compiled once, for one set of argument types (characters as
uint8, integers as int64, no literal arguments, which Numba would compile once per value).
"""
import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from pymap.kernels.contigs import contig_of
from pymap.kernels.encoding import N_BITS, ascii_of, prefetch, reverse_into, word_at
from pymap.kernels.text import copy_into
from pymap.kernels.threads import range_bounds, run_ranges

CIGAR_CHARS = np.frombuffer(b"MIDNSHP=X", dtype=np.uint8).copy()
#: unmapped-reason codes written as the YU:Z tag
REASONS = ("", "no_seed_hit", "over_max_edits", "too_short", "too_long", "too_many_n", "below_min_score")
NO_XS = np.int64(np.iinfo(np.int64).min)    # rec_xs of a record without an XS tag
REASON_BYTES = np.frombuffer(b"".join(r.encode().ljust(16, b"\0") for r in REASONS), dtype=np.uint8).copy()

# characters (np.uint8, so that Numba types them as uint8 rather than as literals)
_TAB = np.uint8(9)
_NL = np.uint8(10)
_STAR = np.uint8(42)
_MINUS = np.uint8(45)
_PLUS = np.uint8(43)
_COMMA = np.uint8(44)
_SEMI = np.uint8(59)
_EQ = np.uint8(61)
_ZERO = np.uint8(48)
_CARET = np.uint8(94)

# fixed texts: TEXT[a:b] for the (a, b) below (np.int64 for the same reason); the kernel takes TEXT
# as an argument (a global array would be typed read-only, a second type for _put_bytes)
TEXT = np.concatenate([np.frombuffer(b"*\t0\t0\t*\t*\t0\t0\t"   # unmapped: RNAME POS MAPQ CIGAR RNEXT PNEXT TLEN
                                     b"\t*\t0\t0\t"              # mapped: RNEXT PNEXT TLEN
                                     b"\tNM:i:\tMD:Z:\tAS:i:\tXS:i:\tYU:Z:\tRG:Z:\tSA:Z:\tMC:Z:\tMQ:i:",
                                     dtype=np.uint8),
                       REASON_BYTES])
_UNMAPPED = np.int64(0)
_MATE = np.int64(14)
_NM = np.int64(21)
_MD = np.int64(27)
_AS = np.int64(33)
_XS = np.int64(39)
_YU = np.int64(45)
_RG = np.int64(51)
_SA = np.int64(57)
_MC = np.int64(63)
_MQ = np.int64(69)
_TAG = np.int64(6)             # each tag text: TAB X X : T :
_INT_DIGITS = np.int64(20)     # the most characters an int64 takes in decimal, sign included
_REASON = np.int64(75)         # REASON_BYTES

# CIGAR op codes (BAM order MIDNSHP=X)
_OP_M, _OP_I, _OP_D, _OP_N, _OP_S, _OP_EQ, _OP_X = 0, 1, 2, 3, 4, 7, 8
#: how many records ahead _records asks for the reference under an alignment, and how many of its
#: bytes (the records of 200,000 E. coli reads, development machine: 60-68 -> 52-62 ms)
PREFETCH_AHEAD = 4
PREFETCH_BYTES = 256


@njit(cache=True, nogil=True, _nrt=False)
def _put(buf, p, c):
    """Write the byte c at p (when p is inside buf); returns p + 1."""
    if p < buf.shape[0]:
        buf[p] = c
    return p + 1


@njit(cache=True, nogil=True, _nrt=False)
def _put_bytes(buf, p, src, a, b):
    """Write src[a:b] at p; returns the end."""
    n = b - a
    if p + n <= buf.shape[0]:
        copy_into(src[a:b], buf[p:p + n])
    return p + n


#: "00" "01" ... "99": two decimal digits a lookup
_DIGIT_PAIRS = np.frombuffer(b"".join(b"%02d" % k for k in range(100)), np.uint8).copy()
#: 10 ** k
_POWERS_OF_TEN = np.array([10 ** k for k in range(19)], np.int64)


@njit(cache=True, nogil=True, _nrt=False)
def _put_int(buf, p, v):
    """Write the int64 v in decimal at p; returns the end. The length comes of compares (not of a
    chain of divisions) and the digits two at a time: SAM's many small integers were a third of the
    formatting's time."""
    if 0 <= v < 10:
        return _put(buf, p, np.uint8(48 + v))
    neg = v < 0
    if neg:
        v = -v
    digits = 1
    while digits < 19 and v >= _POWERS_OF_TEN[digits]:
        digits += 1
    end = p + neg + digits
    if end <= buf.shape[0]:
        if neg:
            buf[p] = _MINUS
        q = end
        while v >= 100:
            k = 2 * (v % 100)
            buf[q - 2] = _DIGIT_PAIRS[k]
            buf[q - 1] = _DIGIT_PAIRS[k + 1]
            q -= 2
            v //= 100
        if v >= 10:
            buf[q - 2] = _DIGIT_PAIRS[2 * v]
            buf[q - 1] = _DIGIT_PAIRS[2 * v + 1]
        else:
            buf[q - 1] = 48 + v
    return end


@njit(cache=True, nogil=True, _nrt=False)
def _put_seq(buf, p, src, a, n, rev, quals, has_quals):
    """SEQ and QUAL of a read src[a:a+n] (quals[a:a+n]): SEQ from the codes, QUAL reversed when rev
    (reverse strand: src is then the reverse complement already); '*' for an empty read and for a
    read without qualities."""
    if n == 0:
        p = _put(buf, p, _STAR)
    else:
        if p + n <= buf.shape[0]:
            # views indexed from 0: no negative-index wraparound in the loops
            out = buf[p:p + n]
            s = src[a:a + n]
            for k in range(n):
                out[k] = ascii_of(s[k])
        p += n
    p = _put(buf, p, _TAB)
    if n == 0 or not has_quals:
        return _put(buf, p, _STAR)
    if p + n <= buf.shape[0]:
        if rev:
            reverse_into(quals[a:a + n], buf[p:p + n], False)
        else:
            copy_into(quals[a:a + n], buf[p:p + n])
    return p + n


@njit(cache=True, nogil=True, _nrt=False)
def _put_md(buf, p, cigar, c0, c1, ref_codes, start, src, a):
    """The MD:Z value of an alignment at p: CIGAR cigar[c0:c1], first aligned base at reference
    start and read base src[a]. Returns (end, NM). S consumes read bases only and, like I, adds
    nothing to MD; N skips reference; M/=/X compare: a pair that is not a match of two of ACGT is a
    mismatch, N included (as in samtools calmd); D writes ^ and the deleted bases.
    NM = mismatches + inserted + deleted bases (clipped bases are not counted)."""
    nm = 0
    run = 0
    q = start
    j = a
    for k in range(c0, c1):
        n = np.int64(cigar[k] >> 4)
        op = cigar[k] & 15
        if op == _OP_M or op == _OP_EQ or op == _OP_X:
            t = np.int64(0)
            while t < n:
                if n - t >= 8:          # eight bases a step: the first that is not a match of ACGT, if any
                    wr = word_at(ref_codes, q + t)
                    differ = (wr ^ word_at(src, j + t)) | (wr & N_BITS)
                    if differ == 0:
                        run += 8
                        t += 8
                        continue
                    k = np.int64(trailing_zeros(differ) >> 3)
                    run += k
                    t += k
                elif ref_codes[q + t] == src[j + t] and ref_codes[q + t] < 4:
                    run += 1
                    t += 1
                    continue
                p = _put_int(buf, p, np.int64(run))
                p = _put(buf, p, ascii_of(ref_codes[q + t]))
                run = 0
                nm += 1
                t += 1
            q += n
            j += n
        elif op == _OP_I:
            nm += n
            j += n
        elif op == _OP_S:
            j += n
        elif op == _OP_D:
            p = _put_int(buf, p, np.int64(run))
            p = _put(buf, p, _CARET)
            for t in range(n):
                p = _put(buf, p, ascii_of(ref_codes[q + t]))
            run = 0
            nm += n
            q += n
        elif op == _OP_N:
            q += n
    return _put_int(buf, p, np.int64(run)), nm


@njit(cache=True, nogil=True, _nrt=False)
def _put_cigar(buf, p, cigar, c0, c1):
    """CIGAR text of cigar[c0:c1] ('*' when empty)."""
    if c1 == c0:
        return _put(buf, p, _STAR)
    for k in range(c0, c1):
        p = _put_int(buf, p, np.int64(cigar[k] >> 4))
        p = _put(buf, p, CIGAR_CHARS[cigar[k] & 15])
    return p


@njit(cache=True, nogil=True, _nrt=False)
def _put_place(buf, p, pos, sep, ctg_offsets, ctg_names, ctg_name_offsets):
    """RNAME sep POS sep of concatenated-reference position pos (sep: TAB for the record's fields,
    a comma inside SA); returns (the end, its contig)."""
    ctg = contig_of(ctg_offsets, pos)
    p = _put_bytes(buf, p, ctg_names, ctg_name_offsets[ctg], ctg_name_offsets[ctg + 1])
    p = _put(buf, p, sep)
    p = _put_int(buf, p, pos - ctg_offsets[ctg] + 1)
    return _put(buf, p, sep), ctg


@njit(cache=True, nogil=True, _nrt=False)
def _put_next(buf, p, next_hit, ctg, tlen, h_start, ctg_offsets, ctg_names, ctg_name_offsets):
    """TAB RNEXT TAB PNEXT TAB TLEN TAB of a record on contig ctg whose mate's primary line is at hit
    next_hit (an unmapped mate's: the hit it is placed at, its mate's primary): '=' or that contig."""
    p = _put(buf, p, _TAB)
    ms = h_start[next_hit]
    mc = contig_of(ctg_offsets, ms)
    if mc == ctg:
        p = _put(buf, p, _EQ)
    else:
        p = _put_bytes(buf, p, ctg_names, ctg_name_offsets[mc], ctg_name_offsets[mc + 1])
    p = _put(buf, p, _TAB)
    p = _put_int(buf, p, ms - ctg_offsets[mc] + 1)
    p = _put(buf, p, _TAB)
    p = _put_int(buf, p, tlen)
    return _put(buf, p, _TAB)


@njit(cache=True, nogil=True, _nrt=False)
def _records(buf, p, text, r0, r1, rec_read, rec_flag, rec_hit, rec_mapq, rec_reason, rec_xs, rec_sa,
             rec_mate, rec_tlen,
             names, name_offsets, codes, rc_codes, offsets, quals, ref_codes,
             ctg_names, ctg_name_offsets, ctg_offsets,
             h_strand, h_start, h_score, cigar, cigar_offsets, rg, comments, comment_offsets):
    """Records r0..r1-1 at buf[p:], up to the first that does not fit: returns (the end of the last
    record written, after its newline; the first record not written, r1 when all were; the furthest
    byte that one needed). What does not fit is not written: the caller grows buf and calls again
    from that record. The records are written in one call, not a call each: this function's entry
    (its stack frame, set up at every call) cost more than a short record's text."""
    has_quals = quals.shape[0] > 0
    last_code = ref_codes.shape[0] - 1
    for r in range(r0, r1):
        if r + PREFETCH_AHEAD < r1 and rec_hit[r + PREFETCH_AHEAD] >= 0:
            # MD reads the reference under each alignment, a random place: its first lines are
            # fetched some records ahead, not waited for
            s0 = h_start[rec_hit[r + PREFETCH_AHEAD]]
            for k in range(0, PREFETCH_BYTES, 64):
                prefetch(ref_codes, min(s0 + k, last_code))
        begin = p
        high = p
        read = rec_read[r]
        flag = rec_flag[r]
        h = rec_hit[r]
        rev = False
        if h >= 0:
            rev = h_strand[h] == 1
        src = rc_codes if rev else codes
        p = _put_bytes(buf, p, names, name_offsets[read], name_offsets[read + 1])
        p = _put(buf, p, _TAB)
        p = _put_int(buf, p, flag)
        p = _put(buf, p, _TAB)
        a = offsets[read]
        n = offsets[read + 1] - a
        mate = rec_mate[r]
        mate_hit = rec_hit[mate] if mate >= 0 else np.int64(-1)
        if h < 0:
            if mate_hit >= 0:                   # placed at its mapped mate: RNAME, POS of the mate
                p, mc = _put_place(buf, p, h_start[mate_hit], _TAB, ctg_offsets, ctg_names, ctg_name_offsets)
                p = _put(buf, p, _ZERO)
                p = _put(buf, p, _TAB)
                p = _put(buf, p, _STAR)
                p = _put_next(buf, p, mate_hit, mc, np.int64(0), h_start, ctg_offsets, ctg_names, ctg_name_offsets)
            else:
                p = _put_bytes(buf, p, text, _UNMAPPED, _MATE)
            p = _put_seq(buf, p, src, a, n, rev, quals, has_quals)
            reason = rec_reason[r]
            if reason > 0:
                p = _put_bytes(buf, p, text, _YU, _YU + _TAG)
                k0 = _REASON + reason * 16
                k = k0
                while text[k] != 0:
                    k += 1
                p = _put_bytes(buf, p, text, k0, k)
        else:
            start = h_start[h]
            p, ctg = _put_place(buf, p, start, _TAB, ctg_offsets, ctg_names, ctg_name_offsets)
            p = _put_int(buf, p, rec_mapq[r])
            p = _put(buf, p, _TAB)
            c0 = cigar_offsets[r]
            c1 = cigar_offsets[r + 1]
            p = _put_cigar(buf, p, cigar, c0, c1)
            if mate >= 0:
                # an unmapped mate is placed at this read's primary (rec_mate of the mate's record), which a
                # secondary or supplementary record's RNEXT and PNEXT give too
                next_hit = mate_hit if mate_hit >= 0 else rec_hit[rec_mate[mate]]
                p = _put_next(buf, p, next_hit, ctg, rec_tlen[r], h_start, ctg_offsets, ctg_names, ctg_name_offsets)
            else:
                p = _put_bytes(buf, p, text, _MATE, _NM)
            if (flag & 256) != 0:                   # secondary: SEQ and QUAL are on the primary
                p = _put(buf, p, _STAR)
                p = _put(buf, p, _TAB)
                p = _put(buf, p, _STAR)
            else:
                p = _put_seq(buf, p, src, a, n, rev, quals, has_quals)
            # NM comes first but is known only once MD is made: MD is written past room for both tags and
            # NM's digits, then moved back behind them
            q = p + 2 * _TAG + _INT_DIGITS
            e, nm = _put_md(buf, q, cigar, c0, c1, ref_codes, start, src, a)
            high = e
            p = _put_bytes(buf, p, text, _NM, _NM + _TAG)
            p = _put_int(buf, p, nm)
            p = _put_bytes(buf, p, text, _MD, _MD + _TAG)
            if e <= buf.shape[0]:
                for k in range(e - q):
                    buf[p + k] = buf[q + k]
            p += e - q
            p = _put_bytes(buf, p, text, _AS, _AS + _TAG)
            p = _put_int(buf, p, h_score[h])
            if rec_xs[r] != NO_XS:
                p = _put_bytes(buf, p, text, _XS, _XS + _TAG)
                p = _put_int(buf, p, rec_xs[r])
            o = rec_sa[r]
            if o >= 0:                              # SA:Z:rname,pos,strand,CIGAR,mapQ,NM; of the other part
                ho = rec_hit[o]
                so = h_start[ho]
                p = _put_bytes(buf, p, text, _SA, _SA + _TAG)
                p = _put_place(buf, p, so, _COMMA, ctg_offsets, ctg_names, ctg_name_offsets)[0]
                p = _put(buf, p, _MINUS if h_strand[ho] == 1 else _PLUS)
                p = _put(buf, p, _COMMA)
                p = _put_cigar(buf, p, cigar, cigar_offsets[o], cigar_offsets[o + 1])
                p = _put(buf, p, _COMMA)
                p = _put_int(buf, p, rec_mapq[o])
                p = _put(buf, p, _COMMA)
                src_o = rc_codes if h_strand[ho] == 1 else codes
                nm_o = _put_md(buf[:0], np.int64(0), cigar, cigar_offsets[o], cigar_offsets[o + 1], ref_codes, so,
                               src_o, a)[1]
                p = _put_int(buf, p, nm_o)
                p = _put(buf, p, _SEMI)
        if mate_hit >= 0:                      # the mate's CIGAR and MAPQ (samtools fixmate -m, markdup)
            p = _put_bytes(buf, p, text, _MC, _MC + _TAG)
            p = _put_cigar(buf, p, cigar, cigar_offsets[mate], cigar_offsets[mate + 1])
            p = _put_bytes(buf, p, text, _MQ, _MQ + _TAG)
            p = _put_int(buf, p, rec_mapq[mate])
        if rg.shape[0] > 0:
            p = _put_bytes(buf, p, text, _RG, _RG + _TAG)
            p = _put_bytes(buf, p, rg, np.int64(0), np.int64(rg.shape[0]))
        if comment_offsets.shape[0] > 0:       # -C: the read's comment's tags (next_tag), tab-separated
            end = comment_offsets[read + 1]
            j, k = next_tag(comments, comment_offsets[read], end)
            while j < end:
                p = _put(buf, p, _TAB)
                p = _put_bytes(buf, p, comments, j, k)
                j, k = next_tag(comments, k, end)
        p = _put(buf, p, _NL)
        if max(p, high) > buf.shape[0]:
            return begin, r, max(p, high)
    return p, r1, p


@njit(cache=True, nogil=True)
def _format_range(r0, r1, size, text, rec_read, rec_flag, rec_hit, rec_mapq, rec_reason, rec_xs, rec_sa,
                  rec_mate, rec_tlen,
                  names, name_offsets, codes, rc_codes, offsets, quals, ref_codes,
                  ctg_names, ctg_name_offsets, ctg_offsets,
                  h_strand, h_start, h_score, cigar, cigar_offsets, rg, comments, comment_offsets):
    """The text of records r0..r1-1, in one pass: a buffer of `size` bytes, grown (and the record
    that did not fit written again) when they need more."""
    buf = np.empty(size, np.uint8)
    p = np.int64(0)             # not the literal 0: _records would be compiled for it as well
    r = np.int64(r0)
    while True:
        p, r, high = _records(buf, p, text, r, r1, rec_read, rec_flag, rec_hit, rec_mapq, rec_reason, rec_xs,
                              rec_sa, rec_mate, rec_tlen, names, name_offsets, codes, rc_codes, offsets, quals,
                              ref_codes, ctg_names, ctg_name_offsets, ctg_offsets, h_strand, h_start, h_score,
                              cigar, cigar_offsets, rg, comments, comment_offsets)
        if r >= r1:
            return buf[:p]
        bigger = np.empty(max(2 * buf.shape[0], high + 4096), np.uint8)
        bigger[:p] = buf[:p]
        buf = bigger


#: format_sam's first guess of a record's bytes besides SEQ and QUAL (a range that needs more grows)
RECORD_GUESS = 256

#: at least this many records per range when formatting on several threads (kernels/threads.py:
#: Python threads rather than a prange kernel, which would cost about 1 s more compile time)
GRAIN = 2048


def _i64(a):
    return np.ascontiguousarray(a, dtype=np.int64)


def _u8(a):
    return np.ascontiguousarray(a, dtype=np.uint8)


def format_sam(rec_read, rec_flag, rec_hit, rec_mapq, rec_reason, rec_xs, rec_sa, rec_mate, rec_tlen,
               names, name_offsets, codes, rc_codes, offsets, quals, ref_codes,
               ctg_names, ctg_name_offsets, ctg_offsets,
               h_strand, h_start, h_score, cigar, cigar_offsets, rg, comments=None, comment_offsets=None):
    """SAM lines for records (one per output line). rec_hit is the index of the hit (-1 unmapped);
    cigar (BAM-style length << 4 | op) / cigar_offsets are per record (empty for unmapped);
    h_start is the reference position of the first aligned (not clipped) base, h_score the hit's
    score (AS:i; NM and MD are computed from the alignment). rec_xs: the runner-up's score written
    as XS:i (NO_XS: none). rec_sa: the record of the read's other part (supplementary <-> primary),
    written as SA:Z (-1: none). rec_mate: the record of the mate's primary (or unmapped) record
    for paired reads (-1: single), which gives RNEXT, PNEXT, MC and MQ; rec_tlen: TLEN. comments /
    comment_offsets (per read, None: none): the tags of each read's comment appended, tab-separated
    (bwa mem -C; next_tag splits them, bad_tag checks them). Returns the text as a list of uint8
    pieces, in record order: written one after the other (a file's writelines, a pwrite each), they
    need not be joined (a batch's text is some 100 MB: joining it took 3 % of a GPU run's host CPU).

    Integer arguments are normalised to int64 (cigar to uint32, bytes to uint8) so that the kernel
    is compiled for one signature whatever the caller's dtypes."""
    arrays = (_i64(rec_read), _i64(rec_flag), _i64(rec_hit), _i64(rec_mapq), _i64(rec_reason), _i64(rec_xs),
              _i64(rec_sa), _i64(rec_mate), _i64(rec_tlen),
              _u8(names), _i64(name_offsets), _u8(codes), _u8(rc_codes), _i64(offsets), _u8(quals),
              _u8(ref_codes), _u8(ctg_names), _i64(ctg_name_offsets), _i64(ctg_offsets),
              _i64(h_strand), _i64(h_start), _i64(h_score), np.ascontiguousarray(cigar, dtype=np.uint32),
              _i64(cigar_offsets), _u8(rg), _u8(comments if comments is not None else ()),
              _i64(comment_offsets if comment_offsets is not None else ()))
    n = arrays[0].shape[0]
    if n == 0:
        return []
    bounds = range_bounds(n, GRAIN)
    parts = {}
    # a first guess of a range's size: its records' bases twice (SEQ, QUAL) and RECORD_GUESS bytes each
    read, offsets = arrays[0], arrays[13]
    bases = offsets[read + 1] - offsets[read]

    def one(r0, r1, *args):
        size = max(1, int(2 * bases[r0:r1].sum()) + RECORD_GUESS * (r1 - r0))
        parts[r0] = _format_range(r0, r1, size, *args)

    run_ranges(one, bounds, TEXT, *arrays)
    return [parts[k] for k in sorted(parts)]


#: tags pymap writes itself, which a -C comment may not carry (a record would hold two)
OWN_TAGS = (b"NM", b"MD", b"AS", b"XS", b"YU", b"SA", b"MC", b"MQ")


def tag_codes(names):
    """int64 codes of two-character tag names, for bad_tag's `reserved`."""
    return np.array([(n[0] << 8) | n[1] for n in names], np.int64)


@njit(cache=True, nogil=True)
def first_bad_comment(comments, comment_offsets, reserved):
    """The first read whose comment is not SAM tags (bad_tag), or -1."""
    for r in range(comment_offsets.shape[0] - 1):
        if bad_tag(comments, comment_offsets[r], comment_offsets[r + 1], reserved)[0] >= 0:
            return r
    return -1


@njit(cache=True, nogil=True)
def bad_tag(b, j, end, reserved):
    """(start, end) of the first tag of comment b[j:end] (next_tag) that is not a SAM tag, or (-1, -1):
    TAG:TYPE:VALUE, TAG a letter then a letter or digit and not one of `reserved` (tag_codes),
    VALUE as the SAM specification's TYPE says (A one printable character, i an integer of 32
    bits, f a float, Z printable, H hex digit pairs, B a subtype cCsSiIf then comma-separated
    numbers)."""
    j, k = next_tag(b, j, end)
    while j < end:
        if not is_tag(b, j, k, reserved):
            return j, k
        j, k = next_tag(b, k, end)
    return np.int64(-1), np.int64(-1)


@njit(cache=True, nogil=True)
def next_tag(b, j, end):
    """(start, end) of the first tag of b[j:end] after blanks (tag_end); start == end: none left."""
    while j < end and (b[j] == 32 or b[j] == 9):
        j += 1
    return j, (tag_end(b, j, end) if j < end else j)


@njit(cache=True, nogil=True)
def tag_end(b, j, end):
    """End of the comment tag starting at b[j]: the next tab, or the next space unless the tag is of
    type Z and what follows the spaces does not start another tag (a Z value may hold spaces, as in
    CO:Z:two words; bwa mem -C copies them)."""
    k = j
    while k < end and b[k] != 9:
        if b[k] == 32:
            if k - j < 5 or b[j + 3] != 90:
                return k
            n = k
            while n < end and b[n] == 32:
                n += 1
            if n == end or b[n] == 9 or _starts_tag(b, n, end):
                return k
            k = n
            continue
        k += 1
    return k


@njit(cache=True, nogil=True)
def _starts_tag(b, i, end):
    """b[i:] starts TAG:TYPE: (a letter, a letter or digit, a colon, one of AifZHB, a colon)."""
    if end - i < 5 or not _letter(b[i]) or not (_letter(b[i + 1]) or _digit(b[i + 1])) or b[i + 2] != 58:
        return False
    t = b[i + 3]
    return b[i + 4] == 58 and (t == 65 or t == 105 or t == 102 or t == 90 or t == 72 or t == 66)


@njit(cache=True, nogil=True, inline="always")
def _letter(c):
    return (65 <= c <= 90) or (97 <= c <= 122)


@njit(cache=True, nogil=True, inline="always")
def _digit(c):
    return 48 <= c <= 57


@njit(cache=True, nogil=True)
def is_tag(b, j, k, reserved):
    """b[j:k] is one SAM tag (bad_tag's rules)."""
    if k - j < 5 or not _letter(b[j]) or not (_letter(b[j + 1]) or _digit(b[j + 1])):
        return False
    code = (np.int64(b[j]) << 8) | np.int64(b[j + 1])
    for x in reserved:
        if x == code:
            return False
    t = b[j + 3]
    if b[j + 2] != 58 or b[j + 4] != 58:
        return False
    v = j + 5
    if t == 65:                                                  # A
        return k - v == 1 and 33 <= b[v] <= 126
    if t == 105:                                                 # i
        return _integer(b, v, k, -(1 << 31), (1 << 32) - 1)
    if t == 102:                                                 # f
        return _float(b, v, k)
    if t == 90:                                                  # Z
        for x in range(v, k):
            if not 32 <= b[x] <= 126:
                return False
        return True
    if t == 72:                                                  # H
        if (k - v) % 2:
            return False
        for x in range(v, k):
            if not (_digit(b[x]) or 65 <= b[x] <= 70):
                return False
        return True
    if t == 66:                                                  # B
        if k - v < 1:
            return False
        sub = b[v]
        if sub == 102:
            check_float = True
        elif sub == 99 or sub == 67 or sub == 115 or sub == 83 or sub == 105 or sub == 73:
            check_float = False
        else:
            return False
        lo, hi = _int_range(sub)
        x = v + 1
        while x < k:
            if b[x] != 44:
                return False
            y = x + 1
            while y < k and b[y] != 44:
                y += 1
            if not (_float(b, x + 1, y) if check_float else _integer(b, x + 1, y, lo, hi)):
                return False
            x = y
        return True
    return False


@njit(cache=True, nogil=True)
def _int_range(sub):
    """The values an integer array of BAM subtype `sub` (c C s S i I) holds."""
    if sub == 99:
        return -128, 127
    if sub == 67:
        return 0, 255
    if sub == 115:
        return -32768, 32767
    if sub == 83:
        return 0, 65535
    if sub == 105:
        return -(1 << 31), (1 << 31) - 1
    return 0, (1 << 32) - 1


@njit(cache=True, nogil=True)
def _integer(b, v, k, lo, hi):
    """b[v:k] is [-+]?[0-9]+ within lo..hi."""
    neg = v < k and b[v] == 45
    if v < k and (b[v] == 45 or b[v] == 43):
        v += 1
    if v >= k or k - v > 10:
        return False
    x = np.int64(0)
    for p in range(v, k):
        if not _digit(b[p]):
            return False
        x = 10 * x + (b[p] - 48)
    if neg:
        x = -x
    return lo <= x <= hi


@njit(cache=True, nogil=True)
def _float(b, v, k):
    """b[v:k] is [-+]?[0-9]*.?[0-9]+([eE][-+]?[0-9]+)? (the SAM specification's float)."""
    if v < k and (b[v] == 45 or b[v] == 43):
        v += 1
    digits = 0
    while v < k and _digit(b[v]):
        v += 1
        digits += 1
    if v < k and b[v] == 46:
        v += 1
        while v < k and _digit(b[v]):
            v += 1
            digits += 1
    if digits == 0:
        return False
    if v < k and (b[v] == 101 or b[v] == 69):
        v += 1
        if v < k and (b[v] == 45 or b[v] == 43):
            v += 1
        if v >= k or not _digit(b[v]):
            return False
        while v < k and _digit(b[v]):
            v += 1
    return v == k
