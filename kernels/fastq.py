"""FASTQ records out of a byte buffer in two kernels: one pass that finds and checks the records, one
that gathers their sequence codes, qualities, names and header comments. Both run on the calling thread: the reader
parses several runs of records at once (reads.PARSE_THREADS), and threads inside each as well slowed
the parse on two cores."""
import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from pymap.kernels.borrow import borrowed
from pymap.kernels.encoding import code_of, reverse_into, word_at
from pymap.kernels.text import copy_into

#: scan_records' error codes (0: none); reads.py turns them into messages; WRONG_GUESS: a guessed scan
#: ran out of newlines (only parse_records sees it)
BAD_HEADER, NO_PLUS, LENGTHS_DIFFER, NO_NAME, NAME_TOO_LONG, WRONG_GUESS = 1, 2, 3, 4, 5, 6


def scan_records(arr, max_name, guess=False):
    """The whole 4-line records at the start of arr: (fields int64[n, 7] = name start, name end,
    sequence start, sequence length, quality start, comment start, comment end (the header after the
    name and its blanks; start == end: none); bytes they take; error code; the erring record).
    The scan stops at the first bad record (error code > 0): a header not starting with '@' or without
    a name, no '+' line, sequence and quality lengths that differ, a name longer than max_name.
    With guess, a sequence line is taken to end where a newline stands at the last one's length, and
    a quality line at its sequence's, without checking the bytes before for a newline (a second pass
    over them, a third of the scan's time): gather_records finds a newline inside a sequence or quality,
    and the records must then be scanned again without guessing (parse_records does both). A guessed
    scan's error code may likewise come of a wrong guess."""
    return _scan(arr, max_name, guess)


@njit(cache=True, nogil=True)
def count_newlines(arr, a, b):
    """How many newlines arr[a:b] holds."""
    c = 0
    for x in arr[a:b]:      # over a slice, not range(a, b): LLVM vectorises only this form
        c += x == 10
    return c


@njit(cache=True, nogil=True)
def line_ends_every(arr, n, need, every, ends):
    """Into ends, the index just after the need-th newline of arr[:n] and after every `every`-th
    newline from there; returns (how many, newlines still needed past arr[:n]). Blocks holding no
    such newline are only counted (vectorised)."""
    k = 0
    for a in range(0, n, 4096):
        b = min(a + 4096, n)
        c = count_newlines(arr, a, b)
        if c < need:
            need -= c
            continue
        for j in range(a, b):
            if arr[j] == 10:
                need -= 1
                if need == 0:
                    ends[k] = j + 1
                    k += 1
                    need = every
    return k, need


@njit(cache=True, nogil=True)
def after_newline(arr, a, k):
    """The index just after the k-th (1-based) newline of arr[a:], which must hold k."""
    j = a
    while True:
        if arr[j] == 10:
            k -= 1
            if k == 0:
                return j + 1
        j += 1


@njit(cache=True, nogil=True)
def _strip_cr(arr, start, end):
    return end - 1 if end > start and arr[end - 1] == 13 else end


@njit(cache=True, nogil=True)
def _line_end(arr, start):
    """The newline ending the line at start (one must follow)."""
    j = start
    while arr[j] != 10:
        j += 1
    return j


@njit(cache=True, nogil=True)
def _long_line_end(arr, start, length, last, guess):
    """_line_end for a line likely `length` bytes long (a sequence line like the one before, a quality
    line as long as its sequence): that byte is tested first, and unless guessing the bytes before it
    for newlines in one vectorised pass. last: arr's last newline."""
    e = start + length
    if length > 0 and e <= last and arr[e] == 10 and (guess or count_newlines(arr, start, e) == 0):
        return e
    return _line_end(arr, start)


_BELOW_BANG = np.uint64(0x2121212121212121)
_HIGH_BITS = np.uint64(0x8080808080808080)


@njit(cache=True, nogil=True)
def _name_end(arr, w, last):
    """The first newline, blank or tab at w or after (arr[last] is a newline). Eight bytes a step
    while none is below '!': the lowest byte flagged by (x - 0x21..) & ~x & 0x80.. is the first such
    byte (borrows flag only bytes above it); from there byte by byte, as a byte below '!' may be
    neither (a CR)."""
    while w + 8 <= last:
        x = word_at(arr, w)
        low = (x - _BELOW_BANG) & ~x & _HIGH_BITS
        if low != 0:
            w += np.int64(trailing_zeros(low) >> 3)
            break
        w += 8
    while arr[w] != 10 and arr[w] != 32 and arr[w] != 9:
        w += 1
    return w


@njit(cache=True, nogil=True)
def _scan(arr, max_name, guess):
    arr = borrowed(arr)
    fields = np.empty((count_newlines(arr, 0, arr.shape[0]) // 4, 7), np.int64)
    last = arr.shape[0] - 1     # the last newline: a guessed line's end may have passed newlines, and
    while fields.shape[0] and arr[last] != 10:      # no search may run past this one (a scan that
        last -= 1                                   # must is a guessed one that went wrong)
    pos = np.int64(0)           # not the literal 0: _strip_cr would be compiled for it as well
    seq_line = np.int64(0)      # the last sequence line's length, with any CR
    for n in range(fields.shape[0]):
        if pos > last:
            return fields[:n], pos, WRONG_GUESS, n
        w = _name_end(arr, pos, last)   # the name's end (a blank or the line's end), then the line's end
        e0 = w if arr[w] == 10 else _line_end(arr, w)
        if e0 == last:
            return fields[:n], pos, WRONG_GUESS, n
        e1 = _long_line_end(arr, e0 + 1, seq_line, last, guess)
        if e1 == last:
            return fields[:n], pos, WRONG_GUESS, n
        e2 = _line_end(arr, e1 + 1)
        if e2 == last:
            return fields[:n], pos, WRONG_GUESS, n
        seq_line = e1 - (e0 + 1)
        e3 = _long_line_end(arr, e2 + 1, seq_line, last, guess)
        h1 = _strip_cr(arr, pos, e0)
        if h1 == pos or arr[pos] != 64:
            return fields[:n], pos, BAD_HEADER, n
        if arr[e1 + 1] != 43:
            return fields[:n], pos, NO_PLUS, n
        s1 = _strip_cr(arr, e0 + 1, e1)
        q1 = _strip_cr(arr, e2 + 1, e3)
        if s1 - (e0 + 1) != q1 - (e2 + 1):
            return fields[:n], pos, LENGTHS_DIFFER, n
        w = min(w, h1)
        if w == pos + 1:
            return fields[:n], pos, NO_NAME, n
        if w - (pos + 1) > max_name:
            return fields[:n], pos, NAME_TOO_LONG, n
        fields[n, 0] = pos + 1
        fields[n, 1] = w
        fields[n, 2] = e0 + 1
        fields[n, 3] = s1 - (e0 + 1)
        fields[n, 4] = e2 + 1
        while w < h1 and (arr[w] == 32 or arr[w] == 9):
            w += 1
        fields[n, 5] = w
        fields[n, 6] = h1
        pos = e3 + 1
    return fields, pos, 0, fields.shape[0]


def parse_records(arr, max_name):
    """scan_records (guessing the lines' ends, then without where a guess was wrong) and gather_records
    of the records found: (fields, bytes they take, error code, erring record, gather_records' tuple
    or None where none were found or the scan failed)."""
    fields, taken, error, k = scan_records(arr, max_name, guess=True)
    if not error:
        gathered = gather_records(arr, fields) if len(fields) else None
        if gathered is None or gathered[-1] < 0:
            return fields, taken, error, k, gathered
    fields, taken, error, k = scan_records(arr, max_name)
    gathered = gather_records(arr, fields) if not error and len(fields) else None
    return fields, taken, error, k, gathered


def gather_records(arr, fields):
    """(codes, rc_codes, offsets, quals, names, name_offsets, comments, comment_offsets, first record
    with a quality outside '!'..'~' or a newline in its sequence (only a guessed scan finds those),
    or -1) of scanned records; codes are mapping codes (encoding.code_of),
    rc_codes each read's reverse complement (encoding.reverse_into), made in the same pass (the mapper needs both)."""
    n = fields.shape[0]
    offsets, name_offsets, comment_offsets = _field_offsets(fields)
    codes = np.empty(offsets[n], np.uint8)
    rc_codes = np.empty(offsets[n], np.uint8)
    quals = np.empty(offsets[n], np.uint8)
    names = np.empty(name_offsets[n], np.uint8)
    comments = np.empty(comment_offsets[n], np.uint8)
    bad = np.zeros(n, np.bool_)
    _gather(arr, fields, offsets, name_offsets, comment_offsets, codes, rc_codes, quals, names, comments, bad)
    first_bad = int(bad.argmax()) if n else 0
    return (codes, rc_codes, offsets, quals, names, name_offsets, comments, comment_offsets,
            (first_bad if n and bad[first_bad] else -1))


@njit(cache=True, nogil=True)
def _field_offsets(fields):
    """(offsets of the sequences, of the names, of the header comments) of scanned records, in one
    pass over their rows (NumPy's cumsums down the strided columns took twice as long)."""
    n = fields.shape[0]
    offsets = np.empty(n + 1, np.int64)
    name_offsets = np.empty(n + 1, np.int64)
    comment_offsets = np.empty(n + 1, np.int64)
    offsets[0] = name_offsets[0] = comment_offsets[0] = 0
    for i in range(n):
        offsets[i + 1] = offsets[i] + fields[i, 3]
        name_offsets[i + 1] = name_offsets[i] + fields[i, 1] - fields[i, 0]
        comment_offsets[i + 1] = comment_offsets[i] + fields[i, 6] - fields[i, 5]
    return offsets, name_offsets, comment_offsets


@njit(cache=True, nogil=True)
def _gather(arr, fields, offsets, name_offsets, comment_offsets, codes, rc_codes, quals, names, comments,
            bad):
    # each loop runs over slices (see count_newlines): twice as fast as indexing arr from an offset
    for i in range(fields.shape[0]):
        s, length, q = fields[i, 2], fields[i, 3], fields[i, 4]
        o = offsets[i]
        read, out = arr[s:s + length], codes[o:o + length]
        newline = False
        for j in range(length):
            out[j] = code_of(read[j])
            newline |= read[j] == 10
        reverse_into(out, rc_codes[o:o + length], True)
        qual, qual_out = arr[q:q + length], quals[o:o + length]
        lo, hi = np.uint8(255), np.uint8(0)
        for j in range(length):
            c = qual[j]
            qual_out[j] = c
            lo = min(lo, c)
            hi = max(hi, c)
        bad[i] = newline or (length > 0 and (lo < 33 or hi > 126))
        copy_into(arr[fields[i, 0]:fields[i, 1]], names[name_offsets[i]:name_offsets[i + 1]])
        copy_into(arr[fields[i, 5]:fields[i, 6]], comments[comment_offsets[i]:comment_offsets[i + 1]])
