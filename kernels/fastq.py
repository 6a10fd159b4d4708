"""FASTQ records out of a byte buffer in two kernels: one pass that finds and checks the records, one
that gathers their sequence codes, qualities and names. Both run on the calling thread: the reader
parses several runs of records at once (reads.PARSE_THREADS), and threads inside each as well slowed
the parse on two cores."""
import numpy as np
from numba import njit

#: scan_records' error codes (0: none); reads.py turns them into messages
BAD_HEADER, NO_PLUS, LENGTHS_DIFFER, NO_NAME, NAME_TOO_LONG = 1, 2, 3, 4, 5


def scan_records(arr, max_name):
    """The whole 4-line records at the start of arr: (fields int64[n, 5] = name start, name end,
    sequence start, sequence length, quality start; bytes they take; error code; the erring record).
    The scan stops at the first bad record (error code > 0): a header not starting with '@' or without
    a name, no '+' line, sequence and quality lengths that differ, a name longer than max_name."""
    return _scan(arr, np.flatnonzero(arr == 10), max_name)


@njit(cache=True, nogil=True)
def _strip_cr(arr, start, end):
    return end - 1 if end > start and arr[end - 1] == 13 else end


@njit(cache=True, nogil=True)
def _scan(arr, newlines, max_name):
    fields = np.empty((newlines.shape[0] // 4, 5), np.int64)
    pos = np.int64(0)           # not the literal 0: _strip_cr would be compiled for it as well
    for n in range(fields.shape[0]):
        e0, e1, e2, e3 = newlines[4 * n], newlines[4 * n + 1], newlines[4 * n + 2], newlines[4 * n + 3]
        h1 = _strip_cr(arr, pos, e0)
        if h1 == pos or arr[pos] != 64:
            return fields[:n], pos, BAD_HEADER, n
        if arr[e1 + 1] != 43:
            return fields[:n], pos, NO_PLUS, n
        s1 = _strip_cr(arr, e0 + 1, e1)
        q1 = _strip_cr(arr, e2 + 1, e3)
        if s1 - (e0 + 1) != q1 - (e2 + 1):
            return fields[:n], pos, LENGTHS_DIFFER, n
        w = pos + 1
        while w < h1 and arr[w] != 32 and arr[w] != 9:
            w += 1
        if w == pos + 1:
            return fields[:n], pos, NO_NAME, n
        if w - (pos + 1) > max_name:
            return fields[:n], pos, NAME_TOO_LONG, n
        fields[n, 0] = pos + 1
        fields[n, 1] = w
        fields[n, 2] = e0 + 1
        fields[n, 3] = s1 - (e0 + 1)
        fields[n, 4] = e2 + 1
        pos = e3 + 1
    return fields, pos, 0, fields.shape[0]


def gather_records(arr, fields, table):
    """(codes, rc_codes, offsets, quals, names, name_offsets, first record with a quality outside
    '!'..'~' or -1) of scanned records; codes through table (mapping codes: A C G T 0-3, other 4),
    rc_codes each read's reverse complement, made in the same pass (the mapper needs both)."""
    n = fields.shape[0]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(fields[:, 3], out=offsets[1:])
    name_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(fields[:, 1] - fields[:, 0], out=name_offsets[1:])
    codes = np.empty(offsets[n], np.uint8)
    rc_codes = np.empty(offsets[n], np.uint8)
    quals = np.empty(offsets[n], np.uint8)
    names = np.empty(name_offsets[n], np.uint8)
    bad = np.zeros(n, np.bool_)
    _gather(arr, fields, table, offsets, name_offsets, codes, rc_codes, quals, names, bad)
    first_bad = int(bad.argmax()) if n else 0
    return codes, rc_codes, offsets, quals, names, name_offsets, (first_bad if n and bad[first_bad] else -1)


@njit(cache=True, nogil=True)
def _gather(arr, fields, table, offsets, name_offsets, codes, rc_codes, quals, names, bad):
    for i in range(fields.shape[0]):
        s, length, q = fields[i, 2], fields[i, 3], fields[i, 4]
        o = offsets[i]
        end = o + length - 1
        for j in range(length):
            c = table[arr[s + j]]
            codes[o + j] = c
            rc_codes[end - j] = 3 - c if c < 4 else 4
        lo, hi = 255, 0
        for j in range(length):
            c = arr[q + j]
            quals[o + j] = c
            lo = min(lo, c)
            hi = max(hi, c)
        bad[i] = length > 0 and (lo < 33 or hi > 126)
        o = name_offsets[i]
        for j in range(fields[i, 0], fields[i, 1]):
            names[o] = arr[j]
            o += 1
