"""Reading FASTQ (or FASTA) reads, plain or gzip, into ReadBatch arrays without per-read Python."""
import gzip
import os
import zlib

import numpy as np

from pymap.kernels.encoding import ASCII_TO_CODE
from pymap.kernels.text import first_word_ends, gather_ranges
from pymap.batch import ReadBatch
from pymap.errors import InputError

IDENTITY = np.arange(256, dtype=np.uint8)
CHUNK_BYTES = 8 << 20
#: the SAM specification's limit on QNAME
MAX_NAME = 254
#: fastq_spans reads the file this many bytes at a time
SPAN_BYTES = 8 << 20


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


def _chunks(path):
    fh = _open(path)
    try:
        while True:
            try:
                data = fh.read(CHUNK_BYTES)
            except (EOFError, OSError, zlib.error) as exc:
                raise InputError(f"{path}: damaged or truncated gzip data ({exc})") from None
            if not data:
                return
            yield data
    finally:
        if fh is not None and path != "-":
            fh.close()


def read_batches(path, batch_size=20000):
    """Yield ReadBatch objects of batch_size reads (the last one fewer), whatever the size of the
    pieces the input is read in; InputError on malformed input."""
    stream = ReadStream(path)
    while True:
        batch = stream.take(batch_size)
        if not len(batch):
            return
        yield batch


def parsed_pieces(path):
    """The reads of each piece of the input as it is read (CHUNK_BYTES at a time), one ReadBatch
    each (never empty); InputError on malformed input."""
    source = str(path)
    first_index = 0
    pending = b""
    fmt = None
    for data in _chunks(path):
        if fmt is None:
            stripped = data.lstrip()
            if not stripped:
                continue
            fmt = _sniff(stripped, source)
            data = stripped
        buf = pending + data
        if fmt == "fastq":
            batches, pending = _parse_fastq(buf, source, first_index, final=False)
        else:
            batches, pending = _parse_fasta(buf, source, first_index, final=False)
        if batches is not None and len(batches):
            first_index += len(batches)
            yield batches
    if fmt is None:
        return  # empty input: no reads
    if pending.strip():
        parse = _parse_fastq if fmt == "fastq" else _parse_fasta
        batches, rest = parse(pending, source, first_index, final=True)
        if batches is not None and len(batches):
            yield batches


def fastq_spans(path, records):
    """Byte ranges (start, end, final) of consecutive runs of `records` records of a plain FASTQ
    file (4 lines a record: newlines are counted, nothing is parsed), final True for the last; None
    when the file is not one (gzip, FASTA, not a regular file). A worker reads and parses each range
    with read_span: the reads and errors of read_batches."""
    if path == "-" or not os.path.isfile(path):
        return None
    with open(path, "rb") as fh:
        head = fh.read(SPAN_BYTES)
    stripped = head.lstrip()
    if head[:2] == b"\x1f\x8b" or not stripped or stripped[:1] != b"@":
        return None
    _sniff(stripped, str(path))
    return _spans(path, len(head) - len(stripped), 4 * records)


def _spans(path, start, lines):
    with open(path, "rb") as fh:
        fh.seek(start)
        pos, need = start, lines              # need: newlines still to pass for the open range
        while True:
            data = fh.read(SPAN_BYTES)
            if not data:
                break
            nl = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
            at = need - 1
            while at < nl.size:
                end = pos + int(nl[at]) + 1
                yield start, end, False
                start, at = end, at + lines
            need = at - nl.size + 1
            pos += len(data)
        fh.seek(start)
        while fh.tell() < pos:                # what follows the last whole range: none if blank
            if fh.read(SPAN_BYTES).strip():
                yield start, pos, True
                return


def read_span(path, start, end, final, first_index, source):
    """The reads of bytes start..end of a plain FASTQ file (a range of fastq_spans), numbered from
    first_index; source names the file in errors."""
    with open(path, "rb") as fh:
        fh.seek(start)
        buf = fh.read(end - start)
    if len(buf) != end - start:
        raise InputError(f"{source}: the file changed while it was read")
    if final and not buf.endswith(b"\n"):
        buf += b"\n"
    batch, rest = _parse_fastq(buf, source, first_index, final=False)
    batch = batch if batch is not None else empty_batch(first_index)
    if rest.strip():        # the file ends in less than a record: raises read_batches' error
        _parse_fastq(rest, source, first_index + len(batch), final=True)
    return batch


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


class ReadStream:
    """The reads of one file, handed out n at a time whatever the sizes of the parsed pieces: a
    batch within one piece is a view of it, only one that straddles two pieces is copied."""

    def __init__(self, path):
        self._batches = parsed_pieces(path)
        self._pieces = []   # parsed reads not handed out yet, in order
        self._held = 0
        self._done = False

    def take(self, n):
        """The next n reads (fewer only at the end of the file) as one ReadBatch."""
        while self._held < n and not self._done:
            b = next(self._batches, None)
            if b is None:
                self._done = True
            elif len(b):
                self._pieces.append(b)
                self._held += len(b)
        out, got = [], 0
        while got < n and self._pieces:
            p = self._pieces[0]
            k = min(len(p), n - got)
            if k == len(p):
                out.append(p)
                self._pieces.pop(0)
            else:
                out.append(batch_slice(p, 0, k))
                self._pieces[0] = batch_slice(p, k, len(p))
            got += k
        self._held -= got
        return concat_batches(out)


def batch_slice(batch, a, b):
    """Reads a..b-1 of a batch, as views."""
    if a == 0 and b == len(batch):
        return batch
    oa, ob = batch.offsets[a], batch.offsets[b]
    na, nb = batch.name_offsets[a], batch.name_offsets[b]
    return ReadBatch(codes=batch.codes[oa:ob], offsets=batch.offsets[a:b + 1] - oa,
                     names=batch.names[na:nb], name_offsets=batch.name_offsets[a:b + 1] - na,
                     quals=batch.quals[oa:ob] if batch.quals.size else batch.quals,
                     first_index=batch.first_index + a)


def _cat_offsets(parts):
    shift = np.cumsum([0] + [int(o[-1] - o[0]) for o in parts])
    return np.concatenate([o[:-1] - o[0] + s for o, s in zip(parts, shift)] + [shift[-1:]]).astype(np.int64)


def concat_batches(parts):
    """One batch of the reads of several, in order."""
    if not parts:
        return empty_batch()
    if len(parts) == 1:
        return parts[0]
    quals = [p.quals for p in parts]
    return ReadBatch(codes=np.concatenate([p.codes for p in parts]),
                     offsets=_cat_offsets([p.offsets for p in parts]),
                     names=np.concatenate([p.names for p in parts]),
                     name_offsets=_cat_offsets([p.name_offsets for p in parts]),
                     quals=np.concatenate(quals) if any(q.size for q in quals) else quals[0],
                     first_index=parts[0].first_index)


def _lines(arr):
    nl = np.flatnonzero(arr == 10)
    starts = np.empty(nl.size, np.int64)
    starts[0:1] = 0
    starts[1:] = nl[:-1] + 1
    ends = nl.astype(np.int64)
    cr = (ends > starts) & (arr[np.maximum(ends - 1, 0)] == 13)
    ends = ends - cr
    return starts, ends, (int(nl[-1]) + 1 if nl.size else 0)


def _parse_fastq(buf, source, first_index, final):
    if final and not buf.endswith(b"\n"):
        buf = buf + b"\n"
    arr = np.frombuffer(buf, dtype=np.uint8)
    starts, ends, consumed = _lines(arr)
    if final:
        # blank lines at the very end of the file are not a record
        keep = len(starts)
        while keep and ends[keep - 1] == starts[keep - 1]:
            keep -= 1
        starts, ends = starts[:keep], ends[:keep]
        if len(starts) % 4:
            raise InputError(f"{source}: truncated FASTQ record at the end of the file "
                             f"(record {first_index + len(starts) // 4 + 1})")
    nrec = len(starts) // 4
    if nrec == 0:
        return None, buf
    used_lines = nrec * 4
    rest = buf[starts[used_lines]:] if used_lines < len(starts) else buf[consumed:]
    starts, ends = starts[:used_lines], ends[:used_lines]
    h0, s0, p0, q0 = (starts[i::4] for i in range(4))
    h1, s1, _, q1 = (ends[i::4] for i in range(4))
    bad = np.flatnonzero((arr[h0] != 64) | (h1 == h0))
    if bad.size:
        raise InputError(f"{source}: record {first_index + bad[0] + 1}: header line does not start with '@'")
    bad = np.flatnonzero(arr[p0] != 43)
    if bad.size:
        raise InputError(f"{source}: record {first_index + bad[0] + 1}: missing '+' line (third line of the record)")
    bad = np.flatnonzero((s1 - s0) != (q1 - q0))
    if bad.size:
        i = bad[0]
        raise InputError(f"{source}: record {first_index + i + 1}: sequence and quality lengths differ "
                         f"({s1[i] - s0[i]} vs {q1[i] - q0[i]})")
    codes, offsets = gather_ranges(arr, s0, s1, ASCII_TO_CODE)
    quals, _ = gather_ranges(arr, q0, q1, IDENTITY)
    if quals.size and (quals.min() < 33 or quals.max() > 126):
        raise InputError(f"{source}: quality string holds characters outside '!'..'~'")
    name_ends = first_word_ends(arr, h0 + 1, h1)
    bad = np.flatnonzero(name_ends == h0 + 1)
    if bad.size:
        raise InputError(f"{source}: record {first_index + bad[0] + 1}: FASTQ header has no name")
    _check_name_lengths(name_ends - (h0 + 1), source, first_index)
    names, name_offsets = gather_ranges(arr, h0 + 1, name_ends, IDENTITY)
    batch = ReadBatch(codes=codes, offsets=offsets, names=names, name_offsets=name_offsets,
                      quals=quals, first_index=first_index)
    return batch, rest


def _check_name_lengths(lengths, source, first_index):
    bad = np.flatnonzero(lengths > MAX_NAME)
    if bad.size:
        raise InputError(f"{source}: record {first_index + bad[0] + 1}: read name of {lengths[bad[0]]} characters "
                         f"(SAM allows at most {MAX_NAME})")


def _parse_fasta(buf, source, first_index, final):
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
    heads, seqs = [], []
    for rec in records:  # FASTA reads are the rare path; FASTQ is parsed without Python loops
        head, _, seq = rec.partition(b"\n")
        word = head.split()
        if not word:
            raise InputError(f"{source}: record {first_index + len(heads) + 1}: FASTA header has no name")
        heads.append(word[0])
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
    batch = ReadBatch(codes=codes, offsets=offsets, names=names, name_offsets=name_offsets,
                      quals=np.empty(0, np.uint8), first_index=first_index)
    return batch, rest
