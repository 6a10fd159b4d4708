"""The saved copy of a reference (REF.pymap.ref): used while the FASTA is unchanged, refused and
rewritten when the FASTA changes or the copy is damaged."""
import os

import numpy as np
import pytest

from pymap import reference
from pymap.reference import cache_path, load_reference


def _fasta(path, seqs):
    path.write_text("".join(f">{n} words\n{s}\n" for n, s in seqs.items()))
    return path


@pytest.fixture
def fasta(tmp_path):
    rng = np.random.default_rng(3)
    seqs = {f"c{i}": "".join(rng.choice(list("ACGTN"), 5000 + 100 * i)) for i in range(3)}
    return _fasta(tmp_path / "ref.fa", seqs)


def _same(a, b):
    assert a.names == b.names and a.checksum == b.checksum
    assert np.array_equal(a.offsets, b.offsets) and np.array_equal(a.codes, b.codes)


def test_second_load_reads_the_copy_not_the_fasta(fasta, monkeypatch):
    first = load_reference(fasta)
    assert os.path.exists(cache_path(str(fasta)))
    monkeypatch.setattr(reference, "read_fasta", lambda *a, **k: pytest.fail("FASTA parsed again"))
    _same(load_reference(fasta), first)


def test_a_changed_fasta_is_read_again(fasta):
    load_reference(fasta)
    st = os.stat(fasta)
    text = bytearray(fasta.read_bytes())
    i = text.index(b"\n", 10) + 7
    text[i:i + 1] = b"A" if text[i:i + 1] != b"A" else b"C"       # same size ...
    fasta.write_bytes(bytes(text))
    os.utime(fasta, ns=(st.st_atime_ns, st.st_mtime_ns))          # ... and the same time
    _same(load_reference(fasta), load_reference(fasta, cache=False))
    os.utime(fasta, ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 9))
    _same(load_reference(fasta), load_reference(fasta, cache=False))


def test_a_damaged_copy_is_rewritten(fasta):
    good = load_reference(fasta)
    copy = cache_path(str(fasta))
    data = bytearray(open(copy, "rb").read())
    data[len(data) - 1000] ^= 0xFF                                # inside the codes
    open(copy, "wb").write(bytes(data))
    _same(load_reference(fasta), good)
    assert open(copy, "rb").read() != bytes(data)


def test_a_copy_that_cannot_be_written_is_no_error(fasta, monkeypatch):
    from pymap import index as idxfile

    def read_only(*a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(idxfile, "save_index", read_only)
    _same(load_reference(fasta), load_reference(fasta, cache=False))
    assert not os.path.exists(cache_path(str(fasta)))


@pytest.mark.parametrize("width", [0, 7, 60])
def test_chunked_reading_equals_one_piece(tmp_path, monkeypatch, width):
    """Pieces of any size (headers, wrapped and unwrapped lines, CRLF, blank lines across piece
    boundaries) give the reference one whole read gives."""
    import gzip
    rng = np.random.default_rng(width)
    seqs = {f"c{i}": "".join(rng.choice(list("ACGTNacgtRY"), int(rng.integers(0, 300)))) for i in range(12)}
    wrap = (lambda x: x) if width == 0 else (lambda x: "\n".join(x[i:i + width] for i in range(0, len(x), width)))
    text = "\n" + "".join(f">{n} d>x\r\n{wrap(q)}\n\n" for n, q in seqs.items())
    path = tmp_path / "r.fa"
    path.write_text(text)
    whole = reference.parse_fasta(text.encode())
    assert whole.names == [n for n, q in seqs.items() if q]
    for chunk in (1, 5, 64, 1 << 20):
        monkeypatch.setattr(reference, "READ_CHUNK", chunk)
        _same(load_reference(path, cache=False), whole)
    with gzip.open(tmp_path / "r.fa.gz", "wt") as fh:
        fh.write(text)
    monkeypatch.setattr(reference, "READ_CHUNK", 13)
    _same(load_reference(tmp_path / "r.fa.gz", cache=False), whole)
