"""FASTQ/FASTA reads and FASTA references: good input parsed exactly, bad input a clear InputError."""
import gzip
import zlib

import numpy as np
import pytest

from pymap.errors import InputError
from pymap.reads import read_batches
from pymap.kernels.encoding import reverse_complement_batch
from pymap.reference import load_reference, parse_fasta


def _reverse_complements(codes, offsets):
    """Each read's reverse complement, by definition (NumPy): reversed, A<->T, C<->G, N stays N."""
    comp = np.array([3, 2, 1, 0, 4], np.uint8)
    return np.concatenate([comp[codes[a:b][::-1]] for a, b in zip(offsets[:-1], offsets[1:])] + [codes[:0]])


def _check_rc(batch):
    """A batch's reverse complements, when the reader made them, are those of its codes."""
    if batch.rc_codes is not None:
        assert np.array_equal(batch.rc_codes, _reverse_complements(batch.codes, batch.offsets))


def _reads(path, **kw):
    return list(read_batches(str(path), **kw))


def _all(batches):
    names, seqs, quals = [], [], []
    for b in batches:
        _check_rc(b)
        for i in range(len(b)):
            names.append(b.name(i))
            a, z = b.offsets[i], b.offsets[i + 1]
            seqs.append("".join("ACGTN"[c] for c in b.codes[a:z]))
            quals.append(bytes(b.quals[a:z]).decode() if b.quals.size else "*")
    return names, seqs, quals


def test_fastq_basic_crlf_lowercase_iupac(tmp_path):
    p = tmp_path / "r.fq"
    p.write_bytes(b"@r1 comment\nACGTN\n+\nIIIII\n@r2\r\nacgtRYA\r\n+r2\r\n!!!!!!!\r\n@r3\n\n+\n\n")
    batches = _reads(p)
    assert all(b.rc_codes is not None for b in batches)      # FASTQ batches come with their reverse complements
    names, seqs, quals = _all(batches)
    assert names == ["r1", "r2", "r3"]
    assert seqs == ["ACGTN", "ACGTNNA", ""]
    assert quals == ["IIIII", "!!!!!!!", ""]


def test_fastq_gzip_and_batches_identical(tmp_path):
    rng = np.random.default_rng(1)
    recs = []
    for i in range(2500):
        s = "".join(rng.choice(list("ACGT"), rng.integers(1, 160)))
        recs.append(f"@read{i}\n{s}\n+\n{'I' * len(s)}\n")
    data = "".join(recs).encode()
    p = tmp_path / "r.fq.gz"
    p.write_bytes(gzip.compress(data))
    whole = _all(_reads(p, batch_size=100000))
    small = _all(_reads(p, batch_size=7))
    assert whole == small
    assert len(whole[0]) == 2500 and whole[0][-1] == "read2499"
    firsts = [b.first_index for b in _reads(p, batch_size=1000)]
    assert firsts == [0, 1000, 2000]


@pytest.mark.parametrize("fmt", ["fastq", "fasta"])
def test_batches_are_full_whatever_the_pieces(tmp_path, monkeypatch, fmt):
    """Batches hold batch_size reads (the last fewer) when the input is read in pieces smaller than
    a batch, larger, or of the same size; their reads and first_index follow the input."""
    import pymap.reads as reads
    if fmt == "fastq":
        data = b"".join(b"@n%d\nACGT%s\n+\n%s\n" % (i, b"A" * (i % 7), b"I" * (4 + i % 7)) for i in range(500))
    else:
        data = b"".join(b">n%d\nACGT%s\n" % (i, b"C" * (i % 5)) for i in range(500))
    p = tmp_path / f"r.{fmt}"
    p.write_bytes(data)
    whole = _all(_reads(p, batch_size=10 ** 6))
    for chunk in (97, 1000, 4096, 1 << 20):
        monkeypatch.setattr(reads, "CHUNK_BYTES", chunk)
        for size in (1, 64, 333, 500, 501):
            batches = _reads(p, batch_size=size)
            assert [len(b) for b in batches[:-1]] == [size] * (len(batches) - 1)
            assert 0 < len(batches[-1]) <= size
            assert [b.first_index for b in batches] == list(range(0, 500, size))
            assert _all(batches) == whole


def test_fastq_chunk_boundaries(tmp_path, monkeypatch):
    import pymap.reads as reads
    monkeypatch.setattr(reads, "CHUNK_BYTES", 13)
    p = tmp_path / "r.fq"
    p.write_bytes(b"".join(b"@n%d\nACGTACGTAC\n+\nIIIIIIIIII\n" % i for i in range(50)))
    names, seqs, _ = _all(_reads(p))
    assert names == [f"n{i}" for i in range(50)] and set(seqs) == {"ACGTACGTAC"}


@pytest.mark.parametrize("data,msg", [
    (b"@r1\nACGT\n+\nIII\n", "lengths differ"),
    (b"@r1\nACGT\n+\nIIII\n@r2\nAC\n", "truncated"),
    (b"@r1\nACGT\nIIII\n@r2\n", "missing '\\+'"),
    (b"@r1\nACGT\n-\nIIII\n", "missing '\\+'"),
    (b"@r1\nACGT\n+\nIIII\nr2\nACGT\n+\nIIII\n", "'@'"),
    (b"\x00\x01\x02garbage\xff" * 10, "binary"),
    (b"hello world\n", "not a FASTQ"),
    (b"@r1\nACGT\n+\nIIII\n@r2\nACGT\n+\nII I\n", "record 2: quality string holds"),
    (b"@r1\nACGT\n+\nIIII\n@ r2\nACGT\n+\nIIII\n", "record 2: FASTQ header has no name"),
    (b"@" + b"n" * 255 + b"\nACGT\n+\nIIII\n", "record 1: read name of 255 characters"),
])
def test_fastq_errors(tmp_path, data, msg):
    p = tmp_path / "bad.fq"
    p.write_bytes(data)
    with pytest.raises(InputError, match=msg):
        _reads(p)


@pytest.mark.parametrize("parse_threads", [1, 3])
def test_batches_before_an_error_come_first(tmp_path, monkeypatch, parse_threads):
    """Runs of records are parsed on parse threads; the batches before a bad record are yielded,
    in order and whole, before its error, whatever the number of those threads."""
    import pymap.reads as reads
    monkeypatch.setattr(reads, "PARSE_THREADS", parse_threads)
    monkeypatch.setattr(reads, "CHUNK_BYTES", 1000)
    good = b"".join(b"@n%d\nACGT%s\n+\n%s\n" % (i, b"A" * (i % 7), b"I" * (4 + i % 7)) for i in range(250))
    p = tmp_path / "r.fq"
    p.write_bytes(gzip.compress(good + b"@bad\nACGT\n+\nIII\n" + good))
    got = []
    with pytest.raises(InputError, match="record 251: sequence and quality lengths differ"):
        for batch in read_batches(str(p), batch_size=50):
            got.append(batch)
    assert [b.first_index for b in got] == [0, 50, 100, 150, 200]
    assert _all(got)[0] == [f"n{i}" for i in range(250)]
    # an error in reading the file itself (damaged gzip) comes after the batches before it too
    data = gzip.compress(good + good)
    p.write_bytes(data[:len(data) * 3 // 4])
    whole_runs = zlib.decompressobj(31).decompress(data[:len(data) * 3 // 4]).count(b"\n") // 200
    got = []
    with pytest.raises(InputError, match="gzip"):
        for batch in read_batches(str(p), batch_size=50):
            got.append(batch)
    assert whole_runs >= 3 and [b.first_index for b in got] == list(range(0, 50 * whole_runs, 50))


def test_empty_and_missing(tmp_path):
    p = tmp_path / "e.fq"
    p.write_bytes(b"")
    assert _reads(p) == []
    with pytest.raises(InputError, match="no such file"):
        _reads(tmp_path / "missing.fq")


def test_truncated_gzip(tmp_path):
    data = gzip.compress(b"@r\nACGT\n+\nIIII\n" * 5000)
    p = tmp_path / "t.fq.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="gzip"):
        _reads(p)


def test_fasta_reads(tmp_path):
    p = tmp_path / "r.fa"
    p.write_bytes(b">a x\nACGT\nTT\n>b\nGG\n")
    names, seqs, quals = _all(_reads(p))
    assert names == ["a", "b"] and seqs == ["ACGTTT", "GG"] and quals == ["*", "*"]


def test_reference_parsing(tmp_path):
    ref = parse_fasta(b">c1 desc here\nACGTNNacgt\nRYKM\n>empty\n>c2\r\nGGGG\r\n")
    assert ref.names == ["c1", "c2"]
    assert list(ref.lengths) == [14, 4]
    assert list(ref.codes[:10]) == [0, 1, 2, 3, 4, 4, 0, 1, 2, 3]
    assert set(ref.codes[10:14]) == {4}
    with pytest.raises(InputError, match="duplicate"):
        parse_fasta(b">a\nAC\n>a\nGT\n")
    with pytest.raises(InputError, match="not a FASTA"):
        parse_fasta(b"ACGT\n")
    with pytest.raises(InputError, match="no sequence"):
        parse_fasta(b">a\n>b\n")
    with pytest.raises(InputError, match="no such file"):
        load_reference(tmp_path / "nothing.fa")


def test_reference_checksum_changes(tmp_path):
    a = parse_fasta(b">a\nACGT\n")
    b = parse_fasta(b">a\nACGA\n")
    c = parse_fasta(b">b\nACGT\n")
    assert len({a.checksum, b.checksum, c.checksum}) == 3
    assert parse_fasta(b">a x\nAC\nGT\n").checksum == a.checksum


def test_many_small_contigs():
    data = b"".join(b">c%d\nACGTACGT\n" % i for i in range(5000))
    ref = parse_fasta(data)
    assert len(ref) == 5000 and ref.offsets[-1] == 40000


def _by_spans(path, size):
    """The reads of a plain FASTQ file as Dask workers read them: byte ranges of `size` records."""
    from pymap.reads import fastq_spans, read_span
    return [read_span(str(path), a, b, final, k * size, str(path))
            for k, (a, b, final) in enumerate(fastq_spans(str(path), size))]


_GOOD = [
    b"".join(b"@n%d c\nACGTACGTAC\n+\nIIIIIIIIII\n" % i for i in range(50)),
    b"\n  \n@r1 comment\nACGTN\n+\nIIIII\n@r2\r\nacgtRYA\r\n+r2\r\n!!!!!!!\r\n@r3\n\n+\n\n",
    b"".join(b"@n%d\r\nACGTA\r\n+\r\nIIIII\r\n" % i for i in range(9)) + b"@last\r\nAC\r\n+\r\nII",
    b"".join(b"@n%d\nACG\n+\nIII\n" % i for i in range(12)) + b"\n\n",
    b"".join(b"@n%d\nACG\n+\nIII\n" % i for i in range(13)) + b"@end\nA\n+\nI",
]


@pytest.mark.parametrize("chunk", [13, 64, 8 << 20])
@pytest.mark.parametrize("data", _GOOD)
def test_fastq_spans_read_as_read_batches(tmp_path, monkeypatch, data, chunk):
    """Byte ranges of whole records (CRLF, blank and empty lines, no final newline) hold the reads
    of read_batches, numbered alike, whatever the block size of the scan."""
    import pymap.reads as reads
    p = tmp_path / "r.fq"
    p.write_bytes(data)
    whole = _all(_reads(p))
    monkeypatch.setattr(reads, "SPAN_BYTES", chunk)
    for size in (1, 3, 4, 7, 1000):
        batches = _by_spans(p, size)
        names, seqs, quals = _all(batches)
        # (a batch of one empty read has no qualities at all: '*' in _all, as in SAM)
        assert (names, seqs, [q if s else "" for s, q in zip(seqs, quals)]) == whole
        assert [b.first_index for b in batches] == [k * size for k in range(len(batches))]
        assert all(len(b) == size for b in batches[:-1])


def test_line_ends_every_across_blocks():
    """The scan's kernel counts newlines a 4096-byte block at a time and looks into a block only
    where a wanted newline lies: its line ends are NumPy's, whatever the block boundaries."""
    from pymap.kernels.fastq import line_ends_every
    rng = np.random.default_rng(7)
    for n, p in ((20000, 0.02), (13000, 0.0005), (9000, 0.3)):
        buf = np.where(rng.random(n) < p, 10, 65).astype(np.uint8)
        nl = np.flatnonzero(buf == 10) + 1
        for need, every in ((1, 1), (3, 4), (40, 40), (7, 800), (nl.size + 5, 9)):
            ends = np.empty(n // every + 1, np.int64)
            for m in (n, n - 4096, 4097):
                k, left = line_ends_every(buf, m, need, every, ends)
                want = nl[nl <= m][need - 1::every]
                assert list(ends[:k]) == list(want)
                seen = int((nl <= m).sum())
                assert left == (need - seen if seen < need else every - (seen - need) % every)


@pytest.mark.parametrize("data", [
    b"@r1\nACGT\n+\nIIII\n@r2\nACGT\n+\nIII\n@r3\nA\n+\nI\n",
    b"@r1\nACGT\n+\nIIII\n@r2\nAC\n",
    b"@r1\nACGT\n+\nIIII\n@r2\nAC\n+\n",
    b"@r1\nACGT\n+\nIIII\nr2\nACGT\n+\nIIII\n",
    b"@r1\nACGT\n-\nIIII\n@r2\nA\n+\nI\n",
    b"@r1\nACGT\n+\nIIII\n@r2\nA\n+\n\x01\n",
])
def test_fastq_spans_same_errors(tmp_path, data):
    p = tmp_path / "bad.fq"
    p.write_bytes(data)
    with pytest.raises(InputError) as whole:
        _reads(p)
    for size in (1, 2, 5):
        with pytest.raises(InputError) as spans:
            _by_spans(p, size)
        assert str(spans.value) == str(whole.value)


def test_fastq_span_that_ends_inside_a_record(tmp_path):
    """A range that does not end at a record's end (the file changed after fastq_spans counted it)
    is an error, not a batch with the partial record left out."""
    from pymap.reads import read_span
    p = tmp_path / "r.fq"
    p.write_bytes(b"@a\nACGT\n+\nIIII\n@b\nACGT\n+\nIIII\n")
    assert len(read_span(str(p), 0, 15, False, 0, "r.fq")) == 1
    with pytest.raises(InputError, match="changed while it was read"):
        read_span(str(p), 0, 20, False, 0, "r.fq")


def test_fastq_spans_only_for_plain_fastq_files(tmp_path):
    from pymap.reads import fastq_spans
    fq = b"@r\nACGT\n+\nIIII\n"
    (tmp_path / "r.fq.gz").write_bytes(gzip.compress(fq))
    (tmp_path / "r.fa").write_bytes(b">r\nACGT\n")
    (tmp_path / "e.fq").write_bytes(b"\n")
    for name in ("r.fq.gz", "r.fa", "e.fq"):
        assert fastq_spans(str(tmp_path / name), 10) is None
    assert fastq_spans("-", 10) is None and fastq_spans(str(tmp_path), 10) is None
    (tmp_path / "bin.fq").write_bytes(b"@r\n\x00\x01")
    with pytest.raises(InputError, match="binary"):
        fastq_spans(str(tmp_path / "bin.fq"), 10)


def _scan_by_lines(data, max_name):
    """scan_records' definition, over Python's split lines: (fields, bytes taken, error, record)."""
    from pymap.kernels import fastq
    fields, pos = [], 0
    lines = data.split(b"\n")[:-1]                   # whole lines only
    for n in range(len(lines) // 4):
        head, seq, plus, qual = (x[:-1] if x.endswith(b"\r") else x for x in lines[4 * n:4 * n + 4])
        seq_at = pos + len(lines[4 * n]) + 1
        qual_at = seq_at + len(lines[4 * n + 1]) + 1 + len(lines[4 * n + 2]) + 1
        name = head[1:].replace(b"\t", b" ").split(b" ")[0]
        error = (fastq.BAD_HEADER if not head.startswith(b"@") else
                 fastq.NO_PLUS if not lines[4 * n + 2].startswith(b"+") else
                 fastq.LENGTHS_DIFFER if len(seq) != len(qual) else
                 fastq.NO_NAME if not name else
                 fastq.NAME_TOO_LONG if len(name) > max_name else 0)
        if error:
            return fields, pos, error, n
        comment = head[1 + len(name):].lstrip(b" \t")
        fields.append((pos + 1, pos + 1 + len(name), seq_at, len(seq), qual_at, pos + len(head) - len(comment),
                       pos + len(head)))
        pos = qual_at + len(lines[4 * n + 3]) + 1
    return fields, pos, 0, len(fields)


def test_scan_records_as_defined_by_lines():
    """The scan tests a sequence line at the last one's length and a quality line at its sequence's
    before it searches: records of varying lengths, CRs, short and long lines, empty or blank-led
    headers, long names holding high and control bytes (the name's end is searched eight bytes a
    step), and a quality line whose guessed end is a newline of the next record, all scanned as by
    splitting lines."""
    from pymap.kernels.fastq import count_newlines, after_newline, scan_records
    rng = np.random.default_rng(7)
    assert scan_records(np.frombuffer(b"@a\nACGT\n+\nI\n@x\nAC\n+\nII\n", np.uint8), 254)[2:] == (3, 0)
    for trial in range(300):
        recs = []
        for i in range(int(rng.integers(1, 12))):
            length = int(rng.choice([0, 1, 5, 40, 40, 40]))
            seq = bytes(rng.choice(list(b"ACGTN"), length))
            qual_len = length if rng.random() > 0.05 else int(rng.integers(0, 45))
            cr = b"\r" if rng.random() < 0.1 else b""
            head = b"@" if rng.random() > 0.02 else b"x"
            plus = b"+" if rng.random() > 0.02 else b"-"
            name = b"r%d" % rng.integers(0, 10 ** int(rng.integers(1, 6)))
            if rng.random() < 0.3:          # long names, with bytes a name may hold: high, control, CR
                name += bytes(rng.choice(list(b"ACGT_:/-#\x01\x7f\xc3\xa9\r"), int(rng.integers(5, 40))))
            comment = [b"", b"", b" c", b"\tBC:Z:ACGT\tRX:Z:GG", b"  1:N:0:ATCACG ", b" \t"][int(rng.integers(0, 6))]
            header = head + name + comment
            if rng.random() < 0.03:                     # an empty header line, or one starting blank
                header = [b"", b" r1", b"\tr2 c", b"@"][int(rng.integers(0, 4))]
            recs.append(header + cr + b"\n" + seq + cr + b"\n"
                        + plus + cr + b"\n" + b"I" * qual_len + cr + b"\n")
        data = b"".join(recs) + (b"@tail\nAC" if trial % 3 == 0 else b"")
        arr = np.frombuffer(data, np.uint8)
        fields, taken, error, k = scan_records(arr, 254)
        want = _scan_by_lines(data, 254)
        assert [tuple(f) for f in fields.tolist()] == want[0] and (taken, error, k) == want[1:], data
        assert count_newlines(arr, 3, arr.size) == data[3:].count(b"\n")
        lines = data.count(b"\n")
        assert after_newline(arr, 0, lines) == data.rindex(b"\n") + 1


def test_guessed_scan_parses_as_the_exact_one():
    """parse_records guesses lines' ends at the last sequence's length: records whose lengths change
    so that a guess lands on a newline of a shorter line (a sequence two bytes shorter, then '+'),
    CRs, bad qualities and truncated tails give the exact scan's fields, error and gathered arrays."""
    from pymap.kernels.fastq import gather_records, parse_records, scan_records
    rng = np.random.default_rng(11)
    assert parse_records(np.frombuffer(b"@a\nACGT\n+\nIIII\n@b\nAC\n+\nII\n", np.uint8), 254)[0].tolist() == \
        [[1, 2, 3, 4, 10, 2, 2], [16, 17, 18, 2, 23, 17, 17]]
    # the second sequence's guessed end is the last newline (its quality line's): two records still
    assert len(parse_records(np.frombuffer(b"@a\nACGTACG\n+\nIIIIIII\n@b\nAC\n+\nII\n", np.uint8), 254)[0]) == 2
    guessed_wrong = 0
    for trial in range(400):
        recs = []
        for i in range(int(rng.integers(1, 10))):
            length = int(rng.choice([0, 1, 38, 40, 40, 42]) if trial % 2 else rng.integers(0, 60))
            cr = b"\r" if rng.random() < 0.1 else b""
            qual = b"I" * length if rng.random() > 0.05 else b"I" * max(length - 1, 0) + b"\x1f"
            if rng.random() < 0.03:
                qual = qual[:-2]
            recs.append(b"@r%d" % i + cr + b"\n" + bytes(rng.choice(list(b"ACGTN"), length)) + cr + b"\n+" + cr + b"\n"
                        + qual + cr + b"\n")
        data = b"".join(recs)
        data += recs[int(rng.integers(0, len(recs)))][:int(rng.integers(0, 50))]      # a record cut short
        arr = np.frombuffer(data, np.uint8)
        fields, taken, error, k = scan_records(arr, 254)
        got = parse_records(arr, 254)
        assert [tuple(f) for f in got[0].tolist()] == [tuple(f) for f in fields.tolist()], data
        assert got[1:4] == (taken, error, k), data
        guess = scan_records(arr, 254, guess=True)
        guessed_wrong += guess[2] != 0 or guess[0].tolist() != fields.tolist()
        if error or not len(fields):
            assert got[4] is None
            continue
        want = gather_records(arr, fields)
        assert all(np.array_equal(a, b) for a, b in zip(got[4][:-1], want[:-1])) and got[4][-1] == want[-1], data
    assert guessed_wrong > 20            # the data does lead guesses astray


def test_count_code_and_gather_ranges_as_defined():
    """The per-read kernels the batches use, against NumPy over the same ranges: N counted per read,
    ranges gathered, two buffers' ranges interleaved (empty ranges and reads included)."""
    from pymap.kernels.encoding import count_code
    from pymap.kernels.text import gather_ranges, interleave_ranges
    rng = np.random.default_rng(5)
    lengths = rng.choice([0, 1, 7, 150, 151], 5000)
    offsets = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    codes = rng.integers(0, 5, offsets[-1]).astype(np.uint8)
    want = [int(np.count_nonzero(codes[a:b] == 4)) for a, b in zip(offsets[:-1], offsets[1:])]
    assert count_code(codes, offsets, 4).tolist() == want
    starts = rng.integers(0, codes.size, 3000)
    ends = np.minimum(starts + rng.choice([0, 1, 30, 200], 3000), codes.size)
    out, out_offsets = gather_ranges(codes, starts, ends)
    assert np.array_equal(out, np.concatenate([codes[a:b] for a, b in zip(starts, ends)]))
    assert np.array_equal(np.diff(out_offsets), ends - starts)
    other_lengths = rng.choice([0, 3, 150, 250], 5000)
    other_offsets = np.zeros(other_lengths.size + 1, np.int64)
    np.cumsum(other_lengths, out=other_offsets[1:])
    other = rng.integers(0, 256, other_offsets[-1]).astype(np.uint8)
    out, out_offsets = interleave_ranges(codes, offsets, other, other_offsets)
    ranges = [r for i in range(lengths.size) for r in (codes[offsets[i]:offsets[i + 1]],
                                                       other[other_offsets[i]:other_offsets[i + 1]])]
    assert np.array_equal(out, np.concatenate(ranges))
    assert np.array_equal(np.diff(out_offsets), [r.size for r in ranges])


def test_encoding_and_reverse_complement_as_defined():
    """The mapping codes computed per byte (code_of) are the table's for all 256 bytes, and the table
    is the documented one; reverse complements, eight codes at a time plus a tail, are those of the
    definition for every length up to 40 and read lengths around 150, and so are bytes reversed
    alone; ascii_of gives each code's letter."""
    from pymap.kernels.encoding import ASCII_TO_CODE, encode_ascii
    want = np.full(256, 4, np.uint8)
    for code, (upper, lower) in enumerate(zip(b"ACGT", b"acgt")):
        want[upper] = want[lower] = code
    assert np.array_equal(ASCII_TO_CODE, want)
    assert np.array_equal(encode_ascii(np.arange(256, dtype=np.uint8)), want)
    rng = np.random.default_rng(11)
    lengths = np.concatenate([np.arange(41), [149, 150, 151, 152, 250]] * 3)
    offsets = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    codes = rng.integers(0, 5, offsets[-1]).astype(np.uint8)
    assert np.array_equal(reverse_complement_batch(codes, offsets), _reverse_complements(codes, offsets))
    from pymap.kernels.encoding import CODE_TO_ASCII, ascii_of, reverse_into
    assert [ascii_of(np.uint8(c)) for c in range(5)] == CODE_TO_ASCII.tolist()
    for n in list(range(41)) + [150, 151]:          # bytes reversed alone (SAM's QUAL of a reverse read)
        src, dst = rng.integers(0, 256, n).astype(np.uint8), np.zeros(n, np.uint8)
        reverse_into(src, dst, False)
        assert np.array_equal(dst, src[::-1])
