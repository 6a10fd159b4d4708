"""Reading FASTQ (or FASTA) reads, plain or gzip, into ReadBatch arrays without per-read Python."""
import contextlib
import gzip
import os
import zlib

import numpy as np

from pymap.kernels.encoding import ASCII_TO_CODE
from pymap.kernels.threads import ordered_map
from pymap.kernels.fastq import (BAD_HEADER, LENGTHS_DIFFER, NO_NAME, NO_PLUS, after_newline, count_newlines,
                                 line_ends_every, parse_records)
from pymap.batch import ReadBatch
from pymap.errors import InputError

CHUNK_BYTES = 8 << 20
#: the SAM specification's limit on QNAME
MAX_NAME = 254
#: fastq_spans reads the file this many bytes at a time
SPAN_BYTES = 8 << 20
#: read_batches parses this many runs of records at once
PARSE_THREADS = 2


def _open(path):
    if path == "-":
        import sys
        raw = sys.stdin.buffer
    else:
        try:
            raw = open(path, "rb")
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise InputError(f"{path}: is a directory") from None
        except PermissionError:
            raise InputError(f"{path}: permission denied") from None
    head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw)
    return raw


@contextlib.contextmanager
def _damaged_gzip_is_input_error(source):
    """A read of a damaged or truncated gzip stream raises one InputError naming the file."""
    try:
        yield
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"{source}: damaged or truncated gzip data ({exc})") from None


def _chunks(path):
    fh = _open(path)
    try:
        while True:
            with _damaged_gzip_is_input_error(path):
                data = fh.read(CHUNK_BYTES)
            if not data:
                return
            yield data
    finally:
        if fh is not None and path != "-":
            fh.close()


def read_batches(path, batch_size=20000):
    """Yield ReadBatch objects of batch_size reads (the last one fewer), whatever the size of the
    pieces the input is read in; InputError on malformed input. The file is cut into runs of
    batch_size records on this thread and each run is parsed on one of PARSE_THREADS threads, so that
    parsing keeps pace with mapping on many cores."""
    records = RecordRuns(path)
    runs = iter(lambda: records.next(batch_size), None)
    try:
        for batch in ordered_map(lambda run: records.parse(raise_if_error(run)), errors_as_items(runs),
                                 PARSE_THREADS):
            if len(batch):
                yield batch
    finally:
        records.close()


def errors_as_items(runs):
    """runs, an InputError in reading them handed on as the last item: raise_if_error raises it on
    the parse thread, so that every earlier batch is yielded before the error."""
    try:
        yield from runs
    except InputError as exc:
        yield exc


def raise_if_error(item):
    if isinstance(item, InputError):
        raise item
    return item


def fastq_spans(path, records):
    """Byte ranges (start, end, final) of consecutive runs of `records` records of a plain FASTQ
    file (4 lines a record: newlines are counted, nothing is parsed), final True for the last; None
    when the file is not one (gzip, FASTA, not a regular file). A worker reads and parses each range
    with read_span: the reads and errors of read_batches."""
    head = _plain_fastq_head(path)
    if head is None:
        return None
    blanks, text = head
    _sniff(text, str(path))
    return _spans(path, blanks, 4 * records)


def is_plain_fastq(path):
    """Whether path is a regular file of uncompressed FASTQ (by its first record's '@')."""
    return _plain_fastq_head(path, 1 << 16) is not None


def _plain_fastq_head(path, size=SPAN_BYTES):
    """(the blank bytes before the first record, the text from there to byte `size`) of a plain FASTQ
    file; None for gzip, FASTA, stdin or no regular file."""
    if path == "-" or not os.path.isfile(path):
        return None
    with open(path, "rb") as fh:
        head = fh.read(size)
    text = head.lstrip()
    if head[:2] == b"\x1f\x8b" or not text or text[:1] != b"@":
        return None
    return len(head) - len(text), text


def _spans(path, start, lines):
    buf = np.empty(SPAN_BYTES, np.uint8)      # one buffer read into again and again: no page faults
    ends = np.empty(SPAN_BYTES // lines + 1, np.int64)
    with open(path, "rb", buffering=0) as fh:
        fh.seek(start)
        pos, need = start, lines              # need: newlines still to pass for the open range
        while got := fh.readinto(buf):
            k, need = line_ends_every(buf, got, need, lines, ends)
            for end in (ends[:k] + pos).tolist():
                yield start, end, False
                start = end
            pos += got
        fh.seek(start)
        while fh.tell() < pos:                # what follows the last whole range: none if blank
            if fh.read(SPAN_BYTES).strip():
                yield start, pos, True
                return


def read_span(path, start, end, final, first_index, source):
    """The reads of bytes start..end of a plain FASTQ file (a range of fastq_spans), numbered from
    first_index; source names the file in errors."""
    arr = np.empty(end - start, np.uint8)
    with open(path, "rb") as fh:
        fh.seek(start)
        if fh.readinto(arr) != end - start:
            raise InputError(f"{source}: the file changed while it was read")
    batch, rest = _parse_fastq(arr, source, first_index, final)
    if bytes(rest).strip():         # a range ends inside a record: not the file fastq_spans counted
        raise InputError(f"{source}: the file changed while it was read")
    return batch if batch is not None else empty_batch(first_index)


def empty_batch(first_index=0):
    return ReadBatch(codes=np.empty(0, np.uint8), offsets=np.zeros(1, np.int64), names=np.empty(0, np.uint8),
                     name_offsets=np.zeros(1, np.int64), quals=np.empty(0, np.uint8), first_index=first_index)


def _sniff(data, source):
    if b"\x00" in data[:4096]:
        raise InputError(f"{source}: not a FASTQ/FASTA file (binary data)")
    if data[:1] == b"@":
        return "fastq"
    if data[:1] == b">":
        return "fasta"
    raise InputError(f"{source}: not a FASTQ/FASTA file (first character {data[:1]!r})")


class RecordRuns:
    """A file's records as runs of n raw records (the bytes of whole records, nothing parsed yet):
    the file is read CHUNK_BYTES at a time into one buffer per run, FASTQ cut by counting newlines (4
    a record), FASTA before the (n + 1)-th header; parse turns a run into a ReadBatch."""

    def __init__(self, path):
        self.path, self.source = path, str(path)
        self.fmt = None
        self._fh = None
        self._carry = np.empty(0, np.uint8)    # bytes read past the last run's end
        self._size = 2 * CHUNK_BYTES            # the next run's buffer
        self._first = 0                         # number of the next run's first record
        self._eof = False

    def next(self, n):
        """(bytes of the next n records as uint8, number of the first, whether the file ends there:
        then fewer records, maybe a truncated one or none) or None after the end."""
        if self._eof and not self._carry.size:
            return None
        buf = np.empty(max(self._size, self._carry.size + CHUNK_BYTES), np.uint8)
        fill = self._carry.size
        buf[:fill] = self._carry
        counted, seen = 0, 0                    # bytes searched for boundaries, boundaries found there
        need = 4 * n if self.fmt != "fasta" else n + 1
        while True:
            if self.fmt is not None and counted < fill:
                found = self._count(buf, counted, fill)
                if seen + found >= need:
                    end = self._end(buf, counted, fill, need - seen)
                    self._carry = buf[end:fill].copy()
                    self._size = max(2 * CHUNK_BYTES, end + end // 8 + CHUNK_BYTES)
                    first, self._first = self._first, self._first + n
                    return buf[:end], first, False
                seen, counted = seen + found, fill
            if self._eof:
                self._carry = self._carry[:0]
                return (buf[:fill], self._first, True) if fill else None
            if buf.size - fill < CHUNK_BYTES:     # grow to what the records so far say the run needs
                want = 2 * buf.size
                if seen:
                    want = max(want, fill * need // seen + fill // 8 + CHUNK_BYTES)
                buf = np.concatenate([buf[:fill], np.empty(want - fill, np.uint8)])
            got = self._read(buf[fill:fill + CHUNK_BYTES])
            if not got:
                self.close()
            elif self.fmt is None:              # the file's start: leading blanks, then its format
                text = bytes(buf[:got]).lstrip()
                if text:
                    self.fmt = _sniff(text, self.source)
                    fill = len(text)
                    buf[:fill] = np.frombuffer(text, np.uint8)
                    need = 4 * n if self.fmt == "fastq" else n + 1
            else:
                fill += got

    def close(self):
        """Close the file (not stdin); next() reads no more."""
        if self._fh is not None and self.path != "-":
            self._fh.close()
        self._eof = True

    def _read(self, into):
        if self._fh is None:
            self._fh = _open(self.path)
        with _damaged_gzip_is_input_error(self.source):
            return self._fh.readinto(into)

    def _count(self, buf, a, b):
        """How many record boundaries buf[a:b] holds: newlines (FASTQ), '>' starting a line (FASTA)."""
        if self.fmt == "fastq":
            return count_newlines(buf, a, b)
        return self._fasta_starts(buf, a, b).size

    def _end(self, buf, a, b, k):
        """The end of the k-th record boundary in buf[a:b] (which holds k or more)."""
        if self.fmt == "fastq":
            return after_newline(buf, a, k)
        return int(self._fasta_starts(buf, a, b)[k - 1])

    @staticmethod
    def _fasta_starts(buf, a, b):
        """Positions in buf[a:b] of the '>' that start a line (FASTA records)."""
        at = np.flatnonzero(buf[a:b] == 62) + a
        return at[(at == 0) | (buf[np.maximum(at - 1, 0)] == 10)]

    def parse(self, run, first_index=None):
        """The ReadBatch of a run of next() (None: none, the file has ended; first_index: the
        number of its first read when the run is None)."""
        if run is None:
            return empty_batch(first_index or 0)
        arr, first, final = run
        if self.fmt == "fastq":
            batch, _ = _parse_fastq(arr, self.source, first, final)
        else:       # a run holds whole FASTA records
            batch, _ = _parse_fasta(arr, self.source, first, final=True)
        return batch if batch is not None else empty_batch(first)


def batch_slice(batch, a, b):
    """Reads a..b-1 of a batch, as views."""
    if a == 0 and b == len(batch):
        return batch
    oa, ob = batch.offsets[a], batch.offsets[b]
    na, nb = batch.name_offsets[a], batch.name_offsets[b]
    comments = comment_offsets = None
    if batch.comments is not None:
        ca, cb = batch.comment_offsets[a], batch.comment_offsets[b]
        comments, comment_offsets = batch.comments[ca:cb], batch.comment_offsets[a:b + 1] - ca
    return ReadBatch(codes=batch.codes[oa:ob], offsets=batch.offsets[a:b + 1] - oa,
                     names=batch.names[na:nb], name_offsets=batch.name_offsets[a:b + 1] - na,
                     quals=batch.quals[oa:ob] if batch.quals.size else batch.quals,
                     first_index=batch.first_index + a,
                     rc_codes=None if batch.rc_codes is None else batch.rc_codes[oa:ob],
                     comments=comments, comment_offsets=comment_offsets)


def _parse_fastq(arr, source, first_index, final):
    """(ReadBatch of the whole records of arr (uint8) or None, the bytes after them). final: arr ends
    the file (a last record may lack its newline; anything but blanks after the records is a
    truncated record)."""
    if final and (not arr.size or arr[-1] != 10):
        arr = np.append(arr, np.uint8(10))
    fields, consumed, error, k, gathered = parse_records(arr, MAX_NAME)
    if error:
        raise InputError(f"{source}: record {first_index + k + 1}: {_record_error(arr, consumed, error)}")
    rest = arr[consumed:]
    if final and bytes(rest).strip():
        raise InputError(f"{source}: truncated FASTQ record at the end of the file "
                         f"(record {first_index + len(fields) + 1})")
    if not len(fields):
        return None, rest
    codes, rc_codes, offsets, quals, names, name_offsets, comments, comment_offsets, bad = gathered
    if bad >= 0:
        raise InputError(f"{source}: record {first_index + bad + 1}: quality string holds characters "
                         f"outside '!'..'~'")
    batch = ReadBatch(codes=codes, offsets=offsets, names=names, name_offsets=name_offsets,
                      quals=quals, first_index=first_index, rc_codes=rc_codes, comments=comments,
                      comment_offsets=comment_offsets)
    return batch, rest


def _record_error(arr, start, error):
    """What is wrong with the record at arr[start:] (scan_records' error code)."""
    lines = [x.rstrip(b"\r") for x in bytes(arr[start:]).split(b"\n", 4)[:4]]
    if error == BAD_HEADER:
        return "header line does not start with '@'"
    if error == NO_PLUS:
        return "missing '+' line (third line of the record)"
    if error == LENGTHS_DIFFER:
        return f"sequence and quality lengths differ ({len(lines[1])} vs {len(lines[3])})"
    if error == NO_NAME:
        return "FASTQ header has no name"
    return f"read name of {len(lines[0][1:].split()[0])} characters (SAM allows at most {MAX_NAME})"


def _check_name_lengths(lengths, source, first_index):
    bad = np.flatnonzero(lengths > MAX_NAME)
    if bad.size:
        raise InputError(f"{source}: record {first_index + bad[0] + 1}: read name of {lengths[bad[0]]} characters "
                         f"(SAM allows at most {MAX_NAME})")


def _parse_fasta(arr, source, first_index, final):
    buf = bytes(arr)
    if not buf.strip():
        return None, b""
    if not final:
        cut = buf.rfind(b"\n>")
        if cut < 0:
            return None, buf
        body, rest = buf[:cut + 1], buf[cut + 1:]
    else:
        body, rest = buf, b""
    records = body.replace(b"\r", b"").split(b"\n>")
    if records and records[0].startswith(b">"):
        records[0] = records[0][1:]
    heads, notes, seqs = [], [], []
    for rec in records:  # FASTA reads are the rare path; FASTQ is parsed without Python loops
        head, _, seq = rec.partition(b"\n")
        word = head.split()
        if not word:
            raise InputError(f"{source}: record {first_index + len(heads) + 1}: FASTA header has no name")
        heads.append(word[0])
        notes.append(head[head.index(word[0]) + len(word[0]):].strip(b" \t"))
        seqs.append(seq.replace(b"\n", b""))
    lens = np.array([len(s) for s in seqs], dtype=np.int64)
    offsets = np.zeros(len(seqs) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    codes = ASCII_TO_CODE[np.frombuffer(b"".join(seqs), dtype=np.uint8)]
    nlens = np.array([len(h) for h in heads], dtype=np.int64)
    _check_name_lengths(nlens, source, first_index)
    name_offsets = np.zeros(len(heads) + 1, np.int64)
    np.cumsum(nlens, out=name_offsets[1:])
    names = np.frombuffer(b"".join(heads), dtype=np.uint8).copy()
    comment_offsets = np.zeros(len(notes) + 1, np.int64)
    np.cumsum([len(c) for c in notes], out=comment_offsets[1:])
    batch = ReadBatch(codes=codes, offsets=offsets, names=names, name_offsets=name_offsets,
                      quals=np.empty(0, np.uint8), first_index=first_index,
                      comments=np.frombuffer(b"".join(notes), dtype=np.uint8).copy(),
                      comment_offsets=comment_offsets)
    return batch, rest
