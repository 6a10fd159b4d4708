"""SAM text records for a batch, formatted in Numba (the header and BAM go through pysam)."""
import numpy as np
from numba import njit, prange

CIGAR_CHARS = np.frombuffer(b"MIDNSHP=X", dtype=np.uint8).copy()
BASES = np.frombuffer(b"ACGTN", dtype=np.uint8).copy()
#: unmapped-reason codes written as the YU:Z tag
REASONS = ("", "no_seed_hit", "over_max_edits", "too_short", "too_long", "too_many_n")
REASON_BYTES = np.frombuffer(b"".join(r.encode().ljust(16, b"\0") for r in REASONS), dtype=np.uint8).copy()


@njit(cache=True, nogil=True, inline="always")
def _put(buf, p, c, write):
    if write:
        buf[p] = c
    return p + 1


@njit(cache=True, nogil=True)
def _put_int(buf, p, v, write):
    if v < 0:
        p = _put(buf, p, 45, write)
        v = -v
    digits = 1
    t = v
    while t >= 10:
        t //= 10
        digits += 1
    if write:
        for k in range(digits - 1, -1, -1):
            buf[p + k] = 48 + v % 10
            v //= 10
    return p + digits


@njit(cache=True, nogil=True)
def _put_bytes(buf, p, src, a, b, write):
    if write:
        for k in range(a, b):
            buf[p + k - a] = src[k]
    return p + (b - a)


@njit(cache=True, nogil=True)
def _put_tag(buf, p, c1, c2, t, write):
    p = _put(buf, p, 9, write)
    p = _put(buf, p, c1, write)
    p = _put(buf, p, c2, write)
    p = _put(buf, p, 58, write)
    p = _put(buf, p, t, write)
    return _put(buf, p, 58, write)


@njit(cache=True, nogil=True)
def _record(buf, p, write, rec_read, rec_flag, rec_hit, rec_mapq, rec_reason, r,
            names, name_offsets, codes, rc_codes, offsets, quals, ref_codes,
            ctg_names, ctg_name_offsets, ctg_offsets,
            h_strand, h_start, h_dist, h_sub, cigar, cigar_offsets, rg):
    read = rec_read[r]
    flag = rec_flag[r]
    h = rec_hit[r]
    p = _put_bytes(buf, p, names, name_offsets[read], name_offsets[read + 1], write)
    p = _put(buf, p, 9, write)
    p = _put_int(buf, p, flag, write)
    p = _put(buf, p, 9, write)
    a = offsets[read]
    L = offsets[read + 1] - a
    if h < 0:
        for c in (42, 9, 48, 9, 48, 9, 42, 9, 42, 9, 48, 9, 48, 9):  # * 0 0 * * 0 0
            p = _put(buf, p, c, write)
        for k in range(L):
            p = _put(buf, p, BASES[codes[a + k]], write)
        p = _put(buf, p, 9, write)
        if quals.shape[0] > 0 and L > 0:
            p = _put_bytes(buf, p, quals, a, a + L, write)
        else:
            p = _put(buf, p, 42, write)
        reason = rec_reason[r]
        if reason > 0:
            p = _put_tag(buf, p, 89, 85, 90, write)  # YU:Z:
            k = reason * 16
            while REASON_BYTES[k] != 0:
                p = _put(buf, p, REASON_BYTES[k], write)
                k += 1
    else:
        start = h_start[h]
        ctg = np.searchsorted(ctg_offsets, start, side="right") - 1
        p = _put_bytes(buf, p, ctg_names, ctg_name_offsets[ctg], ctg_name_offsets[ctg + 1], write)
        p = _put(buf, p, 9, write)
        p = _put_int(buf, p, start - ctg_offsets[ctg] + 1, write)
        p = _put(buf, p, 9, write)
        p = _put_int(buf, p, rec_mapq[r], write)
        p = _put(buf, p, 9, write)
        for k in range(cigar_offsets[r], cigar_offsets[r + 1]):
            p = _put_int(buf, p, cigar[k] >> 4, write)
            p = _put(buf, p, CIGAR_CHARS[cigar[k] & 15], write)
        for c in (9, 42, 9, 48, 9, 48, 9):
            p = _put(buf, p, c, write)
        rev = h_strand[h] == 1
        secondary = (flag & 256) != 0
        if secondary:
            p = _put(buf, p, 42, write)
            p = _put(buf, p, 9, write)
            p = _put(buf, p, 42, write)
        else:
            src = rc_codes if rev else codes
            for k in range(L):
                p = _put(buf, p, BASES[src[a + k]], write)
            p = _put(buf, p, 9, write)
            if quals.shape[0] > 0 and L > 0:
                for k in range(L):
                    p = _put(buf, p, quals[a + L - 1 - k] if rev else quals[a + k], write)
            else:
                p = _put(buf, p, 42, write)
        p = _put_tag(buf, p, 78, 77, 105, write)  # NM:i:
        p = _put_int(buf, p, h_dist[h], write)
        p = _put_tag(buf, p, 77, 68, 90, write)  # MD:Z:
        src = rc_codes if rev else codes
        run = 0
        q = start
        j = a
        for k in range(cigar_offsets[r], cigar_offsets[r + 1]):
            n = cigar[k] >> 4
            op = cigar[k] & 15
            if op == 0 or op == 7 or op == 8:
                for t in range(n):
                    rc = ref_codes[q + t]
                    if rc == src[j + t] and rc < 4:
                        run += 1
                    else:
                        p = _put_int(buf, p, run, write)
                        p = _put(buf, p, BASES[rc], write)
                        run = 0
                q += n
                j += n
            elif op == 1:
                j += n
            elif op == 2:
                p = _put_int(buf, p, run, write)
                p = _put(buf, p, 94, write)
                for t in range(n):
                    p = _put(buf, p, BASES[ref_codes[q + t]], write)
                run = 0
                q += n
        p = _put_int(buf, p, run, write)
        p = _put_tag(buf, p, 65, 83, 105, write)  # AS:i:
        p = _put_int(buf, p, -h_dist[h], write)
        if h_sub[r] >= 0:
            p = _put_tag(buf, p, 88, 83, 105, write)  # XS:i:
            p = _put_int(buf, p, -h_sub[r], write)
    if rg.shape[0] > 0:
        p = _put_tag(buf, p, 82, 71, 90, write)  # RG:Z:
        p = _put_bytes(buf, p, rg, 0, rg.shape[0], write)
    return _put(buf, p, 10, write)


@njit(parallel=True, cache=True, nogil=True)
def format_sam(rec_read, rec_flag, rec_hit, rec_mapq, rec_reason, rec_sub,
               names, name_offsets, codes, rc_codes, offsets, quals, ref_codes,
               ctg_names, ctg_name_offsets, ctg_offsets,
               h_strand, h_start, h_dist, cigar, cigar_offsets, rg):
    """SAM lines for records (one per output line). rec_hit is the index of the hit (-1 unmapped);
    cigar/cigar_offsets are per record (empty for unmapped). Returns the text as uint8."""
    n = rec_read.shape[0]
    sizes = np.zeros(n + 1, np.int64)
    dummy = np.empty(0, np.uint8)
    for r in prange(n):
        sizes[r + 1] = _record(dummy, 0, False, rec_read, rec_flag, rec_hit, rec_mapq, rec_reason, r,
                               names, name_offsets, codes, rc_codes, offsets, quals, ref_codes,
                               ctg_names, ctg_name_offsets, ctg_offsets, h_strand, h_start, h_dist,
                               rec_sub, cigar, cigar_offsets, rg)
    for r in range(n):
        sizes[r + 1] += sizes[r]
    buf = np.empty(sizes[n], np.uint8)
    for r in prange(n):
        _record(buf, sizes[r], True, rec_read, rec_flag, rec_hit, rec_mapq, rec_reason, r,
                names, name_offsets, codes, rc_codes, offsets, quals, ref_codes,
                ctg_names, ctg_name_offsets, ctg_offsets, h_strand, h_start, h_dist,
                rec_sub, cigar, cigar_offsets, rg)
    return buf
