"""Paired-end input (pymap.mates): two mate files or one interleaved file, re-chunked into pair batches."""
import gzip
import io
import re
import sys

import numpy as np
import pytest

import pymap.reads as reads
from pymap.errors import InputError
from pymap.kernels.encoding import reverse_complement_batch
from pymap.mates import read_mate_batches


def _fastq(recs):
    """recs: (header, seq, qual) -> FASTQ bytes."""
    return "".join(f"@{h}\n{s}\n+\n{q}\n" for h, s, q in recs).encode()


def _fasta(recs):
    """recs: (header, seq) -> FASTA bytes, sequences wrapped at 7 columns."""
    wrap = lambda s: "".join(s[i:i + 7] + "\n" for i in range(0, len(s), 7))   # noqa: E731
    return "".join(f">{h}\n" + wrap(s) for h, s in recs).encode()


def _write(path, data, gz=False):
    path.write_bytes(gzip.compress(data) if gz else data)
    return str(path)


def _read(batch, i):
    a, z = batch.offsets[i], batch.offsets[i + 1]
    seq = "".join("ACGTN"[c] for c in batch.codes[a:z])
    qual = bytes(batch.quals[a:z]).decode() if batch.quals.size else "*"
    return batch.name(i), seq, qual


def _pairs(batches, size=None):
    """All pairs as (read 1, read 2) tuples; checks the batch invariants on the way."""
    out = []
    batches = list(batches)
    for k, (r1, r2) in enumerate(batches):
        assert len(r1) == len(r2) > 0
        for b in (r1, r2):
            if b.rc_codes is not None:
                assert np.array_equal(b.rc_codes, reverse_complement_batch(b.codes, b.offsets))
        assert r1.first_index == r2.first_index == len(out)
        if size is not None and k < len(batches) - 1:
            assert len(r1) == size
        for i in range(len(r1)):
            out.append((_read(r1, i), _read(r2, i)))
    return out


def _sim(rng, n, names1=None, names2=None, len1=(20, 60), len2=(20, 60)):
    """n random pairs: (recs1, recs2) of (header, seq, qual)."""
    recs1, recs2 = [], []
    for i in range(n):
        a = "".join(rng.choice(list("ACGT"), int(rng.integers(*len1))))
        b = "".join(rng.choice(list("ACGT"), int(rng.integers(*len2))))
        recs1.append((names1(i) if names1 else f"p{i}", a, "".join(rng.choice(list("#5?I"), len(a)))))
        recs2.append((names2(i) if names2 else f"p{i}", b, "".join(rng.choice(list("#5?I"), len(b)))))
    return recs1, recs2


def _expected(recs1, recs2, strip=False):
    def name(h, suffix):
        h = h.split()[0]
        return h[:-2] if strip and h.endswith(suffix) else h
    return [((name(h1, "/1"), s1, q1), (name(h2, "/2"), s2, q2))
            for (h1, s1, q1), (h2, s2, q2) in zip(recs1, recs2)]


def _interleave(recs1, recs2):
    return [r for pair in zip(recs1, recs2) for r in pair]


def _stdin(monkeypatch, data):
    """sys.stdin whose .buffer (what reads._open takes for "-") serves data, with peek()."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))


# --- good input -------------------------------------------------------------------------------

def test_two_plain_files(tmp_path):
    recs1, recs2 = _sim(np.random.default_rng(1), 5)
    p1 = _write(tmp_path / "R1.fq", _fastq(recs1))
    p2 = _write(tmp_path / "R2.fq", _fastq(recs2))
    batches = list(read_mate_batches(p1, p2, batch_size=2))
    assert [len(r1) for r1, _ in batches] == [2, 2, 1]
    assert [r1.first_index for r1, _ in batches] == [0, 2, 4]
    assert _pairs(batches, 2) == _expected(recs1, recs2)


def test_gzip_either_side_and_path_objects(tmp_path):
    recs1, recs2 = _sim(np.random.default_rng(2), 40)
    want = _expected(recs1, recs2)
    p1 = _write(tmp_path / "R1.fq.gz", _fastq(recs1), gz=True)
    p2 = _write(tmp_path / "R2.fq", _fastq(recs2))
    p2gz = _write(tmp_path / "R2.fq.gz", _fastq(recs2), gz=True)
    assert _pairs(read_mate_batches(p1, p2, batch_size=7), 7) == want
    assert _pairs(read_mate_batches(tmp_path / "R1.fq.gz", tmp_path / "R2.fq.gz")) == want
    assert _pairs(read_mate_batches(p1, p2gz, batch_size=40)) == want


def test_fasta_files(tmp_path):
    recs1, recs2 = _sim(np.random.default_rng(3), 9)
    p1 = _write(tmp_path / "R1.fa", _fasta([(h, s) for h, s, _ in recs1]))
    p2 = _write(tmp_path / "R2.fa.gz", _fasta([(h, s) for h, s, _ in recs2]), gz=True)
    got = _pairs(read_mate_batches(p1, p2, batch_size=4), 4)
    assert got == [((h1, s1, "*"), (h2, s2, "*")) for (h1, s1, _), (h2, s2, _) in zip(recs1, recs2)]


def test_slash_suffixes_removed(tmp_path):
    rng = np.random.default_rng(4)
    # pairs 0-5 "/1" "/2"; 6-7 no suffix; 8 the same "/1" on both (identical: kept as is)
    names1 = ["a/1", "bb/1", "c/x/1", "d/1", "e/1", "f/1", "g", "h/2", "i/1"]
    names2 = ["a/2", "bb/2", "c/x/2", "d/2", "e/2", "f/2", "g", "h/2", "i/1"]
    recs1, recs2 = _sim(rng, len(names1), lambda i: names1[i], lambda i: names2[i])
    p1 = _write(tmp_path / "R1.fq", _fastq(recs1))
    p2 = _write(tmp_path / "R2.fq", _fastq(recs2))
    for size in (1, 4, 100):
        got = _pairs(read_mate_batches(p1, p2, batch_size=size), size)
        assert [a[0] for a, _ in got] == [b[0] for _, b in got] == ["a", "bb", "c/x", "d", "e", "f", "g",
                                                                    "h/2", "i/1"]
        assert got == _expected(recs1, recs2, strip=True)[:7] + _expected(recs1, recs2)[7:]


def test_casava_comments(tmp_path):
    rng = np.random.default_rng(5)
    recs1, recs2 = _sim(rng, 6, lambda i: f"M1:8:FC:1:{i}:5:9 1:N:0:ATCACG",
                        lambda i: f"M1:8:FC:1:{i}:5:9\t2:Y:0:ATCACG")
    p1 = _write(tmp_path / "R1.fq", _fastq(recs1))
    p2 = _write(tmp_path / "R2.fq.gz", _fastq(recs2), gz=True)
    got = _pairs(read_mate_batches(p1, p2, batch_size=5), 5)
    assert [a[0] for a, _ in got] == [b[0] for _, b in got] == [f"M1:8:FC:1:{i}:5:9" for i in range(6)]
    assert got == _expected(recs1, recs2)


def test_interleaved_file(tmp_path):
    recs1, recs2 = _sim(np.random.default_rng(6), 11, lambda i: f"q{i}/1", lambda i: f"q{i}/2")
    want = _expected(recs1, recs2, strip=True)
    p = _write(tmp_path / "il.fq", _fastq(_interleave(recs1, recs2)))
    pgz = _write(tmp_path / "il.fq.gz", _fastq(_interleave(recs1, recs2)), gz=True)
    assert _pairs(read_mate_batches(p, batch_size=4), 4) == want
    assert _pairs(read_mate_batches(pgz, None, batch_size=11)) == want
    pfa = _write(tmp_path / "il.fa", _fasta([(h, s) for h, s, _ in _interleave(recs1, recs2)]))
    assert _pairs(read_mate_batches(pfa, batch_size=3), 3) == [((a[0], a[1], "*"), (b[0], b[1], "*"))
                                                               for a, b in want]


@pytest.mark.parametrize("gz", [False, True])
def test_interleaved_stdin(tmp_path, monkeypatch, gz):
    recs1, recs2 = _sim(np.random.default_rng(7), 13)
    data = _fastq(_interleave(recs1, recs2))
    _stdin(monkeypatch, gzip.compress(data) if gz else data)
    assert _pairs(read_mate_batches("-", batch_size=5), 5) == _expected(recs1, recs2)


def test_read1_from_stdin(tmp_path, monkeypatch):
    recs1, recs2 = _sim(np.random.default_rng(8), 8)
    _stdin(monkeypatch, _fastq(recs1))
    p2 = _write(tmp_path / "R2.fq", _fastq(recs2))
    assert _pairs(read_mate_batches("-", p2, batch_size=3), 3) == _expected(recs1, recs2)


@pytest.mark.parametrize("interleaved", [False, True])
def test_batch_sizes_give_the_same_pairs(tmp_path, interleaved):
    recs1, recs2 = _sim(np.random.default_rng(9), 50, lambda i: f"r{i}/1", lambda i: f"r{i}/2")
    if interleaved:
        args = (_write(tmp_path / "il.fq", _fastq(_interleave(recs1, recs2))),)
    else:
        args = (_write(tmp_path / "R1.fq", _fastq(recs1)),
                _write(tmp_path / "R2.fq.gz", _fastq(recs2), gz=True))
    runs = {size: _pairs(read_mate_batches(*args, batch_size=size), size) for size in (1, 3, 50, 1000)}
    assert runs[1] == runs[3] == runs[50] == runs[1000] == _expected(recs1, recs2, strip=True)
    assert len(list(read_mate_batches(*args, batch_size=3))) == 17


@pytest.mark.parametrize("chunk", [1 << 15, 100_003])
def test_many_pairs_across_chunk_boundaries(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(reads, "CHUNK_BYTES", chunk)
    n = 50_000
    rng = np.random.default_rng(10)
    # read 1: long names and reads, read 2: short ones; as fixed strings, the file is written quickly
    seqs = ["".join(rng.choice(list("ACGT"), 40)) for _ in range(97)]
    recs1 = [(f"instrument:run:flowcell:{i}/1 1:N:0:ACGT", seqs[i % 97] + "ACGT" * (i % 5),
              "I" * (40 + 4 * (i % 5))) for i in range(n)]
    recs2 = [(f"instrument:run:flowcell:{i}/2", seqs[(i * 7) % 97][:25], "5" * 25) for i in range(n)]
    text1, text2 = _fastq(recs1), _fastq(recs2)
    # both files are read in many pieces, which end at different records in the two
    assert len(text1) > 10 * chunk and len(text2) > 3 * chunk
    p1 = _write(tmp_path / "R1.fq", text1)
    p2 = _write(tmp_path / "R2.fq.gz", text2, gz=True)
    want = _expected(recs1, recs2, strip=True)
    assert _pairs(read_mate_batches(p1, p2, batch_size=20000), 20000) == want
    assert _pairs(read_mate_batches(p1, p2, batch_size=777), 777) == want
    pil = _write(tmp_path / "il.fq", _fastq(_interleave(recs1, recs2)))
    assert _pairs(read_mate_batches(pil, batch_size=4096), 4096) == want


# --- errors -----------------------------------------------------------------------------------

def _until_error(gen):
    """(pairs yielded before the error, the error)."""
    got = []
    with pytest.raises(InputError) as err:
        for r1, r2 in gen:
            got.append((r1.first_index, len(r1)))
    return got, str(err.value)


@pytest.mark.parametrize("n1,n2,size,before", [
    (5, 3, 2, [(0, 2)]),            # R2 ends inside a batch
    (3, 5, 2, [(0, 2)]),            # the reverse
    (4, 2, 2, [(0, 2)]),            # R2 ends exactly at a batch end
    (2, 4, 2, [(0, 2)]),
    (1234, 1500, 1000, [(0, 1000)]),
    (7, 0, 3, []),                  # an empty R2
    (0, 1, 3, []),
])
def test_count_mismatch(tmp_path, n1, n2, size, before):
    recs1, _ = _sim(np.random.default_rng(11), n1)
    _, recs2 = _sim(np.random.default_rng(12), n2)
    p1 = _write(tmp_path / "R1.fq", _fastq(recs1))
    p2 = _write(tmp_path / "R2.fq", _fastq(recs2))
    got, msg = _until_error(read_mate_batches(p1, p2, batch_size=size))
    assert got == before
    short, long_ = (p1, p2) if n1 < n2 else (p2, p1)
    assert msg == f"{short} ends after {min(n1, n2):,} reads, {long_} has more"


def test_count_mismatch_message_example(tmp_path):
    recs1, recs2 = _sim(np.random.default_rng(13), 1300)
    p1 = _write(tmp_path / "R1.fq", _fastq(recs1))
    p2 = _write(tmp_path / "R2.fq", _fastq(recs2[:1234]))
    with pytest.raises(InputError, match=re.escape("R2.fq ends after 1,234 reads, ") + r".*R1\.fq has more"):
        list(read_mate_batches(p1, p2))


@pytest.mark.parametrize("name2,shown", [
    ("b/2", "'r56/1' in {p1}, 'b/2' in {p2}"),        # different rest
    ("r57/2", "'r56/1' in {p1}, 'r57/2' in {p2}"),    # a neighbour's name
    ("r56", "'r56/1' in {p1}, 'r56' in {p2}"),        # a suffix on one side only
    ("r56/2 x", "'r56/1' in {p1}, 'r56/2' in {p2}"),  # (a comment after the name is no part of it)
])
def test_name_mismatch(tmp_path, name2, shown):
    names2 = lambda i: name2 if i == 56 else f"r{i}/2"   # noqa: E731
    recs1, recs2 = _sim(np.random.default_rng(14), 100, lambda i: f"r{i}/1", names2)
    p1 = _write(tmp_path / "R1.fq", _fastq(recs1))
    p2 = _write(tmp_path / "R2.fq", _fastq(recs2))
    if name2 == "r56/2 x":   # this one matches: the check is of names, not header lines
        assert len(_pairs(read_mate_batches(p1, p2, batch_size=10), 10)) == 100
        return
    got, msg = _until_error(read_mate_batches(p1, p2, batch_size=10))
    assert got == [(k, 10) for k in range(0, 50, 10)]   # every batch before pair 57's is yielded
    assert msg == "read 57: names differ: " + shown.format(p1=p1, p2=p2)


def test_name_mismatch_plain_names_and_count_after_it(tmp_path):
    # the first offending pair is reported: here a name mismatch, before R2 ends
    recs1, recs2 = _sim(np.random.default_rng(15), 9, None, lambda i: "zz" if i == 3 else f"p{i}")
    p1 = _write(tmp_path / "R1.fq", _fastq(recs1))
    p2 = _write(tmp_path / "R2.fq", _fastq(recs2[:6]))
    got, msg = _until_error(read_mate_batches(p1, p2, batch_size=100))
    assert got == [] and msg == f"read 4: names differ: 'p3' in {p1}, 'zz' in {p2}"


def test_interleaved_odd_count(tmp_path):
    recs1, recs2 = _sim(np.random.default_rng(16), 4, lambda i: f"s{i}/1", lambda i: f"s{i}/2")
    recs = _interleave(recs1, recs2)[:7]
    p = _write(tmp_path / "il.fq", _fastq(recs))
    got, msg = _until_error(read_mate_batches(p, batch_size=2))
    assert got == [(0, 2)]
    assert msg == (f"{p}: odd number of records in an interleaved file: "
                   "the last one, record 7 's3/1', has no mate")
    got, msg = _until_error(read_mate_batches(_write(tmp_path / "one.fq", _fastq(recs[:1])), batch_size=2))
    assert got == [] and "record 1 's0/1', has no mate" in msg


def test_interleaved_neighbours_differ(tmp_path, monkeypatch):
    recs1, recs2 = _sim(np.random.default_rng(17), 30, lambda i: f"t{i}/1", lambda i: f"t{i}/2")
    recs = _interleave(recs1, recs2)
    del recs[41]        # pair 20 loses its read 2: records 41, 42 are 't20/1', 't21/1'
    p = _write(tmp_path / "il.fq", _fastq(recs))
    got, msg = _until_error(read_mate_batches(p, batch_size=8))
    assert got == [(0, 8), (8, 8)]
    assert msg == f"{p}: records 41 and 42 are not mates: names differ ('t20/1', 't21/1')"
    _stdin(monkeypatch, _fastq(recs))
    assert _until_error(read_mate_batches("-", batch_size=8))[1].startswith("stdin: records 41 and 42 ")


def test_empty_files(tmp_path, monkeypatch):
    e1 = _write(tmp_path / "e1.fq", b"")
    e2 = _write(tmp_path / "e2.fq.gz", b"", gz=True)
    blank = _write(tmp_path / "blank.fq", b"\n\n  \n")
    assert list(read_mate_batches(e1, e2)) == []
    assert list(read_mate_batches(e1, blank, batch_size=1)) == []
    assert list(read_mate_batches(e1)) == [] and list(read_mate_batches(e2)) == []
    _stdin(monkeypatch, b"")
    assert list(read_mate_batches("-")) == []


def test_bad_arguments_and_reader_errors(tmp_path):
    recs1, recs2 = _sim(np.random.default_rng(18), 3)
    p1 = _write(tmp_path / "R1.fq", _fastq(recs1))
    with pytest.raises(ValueError):
        read_mate_batches(p1, p1, batch_size=0)
    with pytest.raises(InputError, match="both come from stdin"):
        read_mate_batches("-", "-")
    with pytest.raises(InputError, match="no such file"):
        list(read_mate_batches(p1, str(tmp_path / "missing.fq")))
    bad = _write(tmp_path / "bad.fq", b"@x\nACGT\n+\nII\n")
    with pytest.raises(InputError, match="lengths differ"):
        list(read_mate_batches(p1, bad))


def test_pairs_keep_the_reverse_complements_made_by_the_reader(tmp_path):
    from pymap.pipeline import interleave
    recs1, recs2 = _sim(np.random.default_rng(8), 9, lambda i: f"p{i}/1", lambda i: f"p{i}/2")
    p1 = _write(tmp_path / "R1.fq", _fastq(recs1))
    p2 = _write(tmp_path / "R2.fq", _fastq(recs2))
    pi = _write(tmp_path / "il.fq", _fastq(_interleave(recs1, recs2)))
    for r1, r2 in list(read_mate_batches(p1, p2, batch_size=4)) + list(read_mate_batches(pi, batch_size=4)):
        assert r1.rc_codes is not None and r2.rc_codes is not None
        both = interleave(r1, r2)
        assert np.array_equal(both.rc_codes, reverse_complement_batch(both.codes, both.offsets))
        fresh = interleave(reads.batch_slice(r1, 0, len(r1)), reads.batch_slice(r2, 0, len(r2)))
        assert np.array_equal(fresh.codes, both.codes)
        part = reads.batch_slice(r1, 1, len(r1))
        assert np.array_equal(part.rc_codes, reverse_complement_batch(part.codes, part.offsets))
