"""The reference packed inside the index (two bits a base and the runs of N, as bwa's .pac): `align`
takes it from there while the FASTA is unchanged, decodes it whole (small genomes) or block by block
as candidates reach it (large ones), and maps exactly as from the FASTA."""
import os

import numpy as np
import pytest

from pymap import api, reference
from pymap.index import read_header
from pymap.kernels.packed_ref import BLOCK, LazyCodes, complete, pack
from pymap.options import AlignOptions
from pymap.reference import load_reference

from conftest import revcomp


def _fasta(path, seqs):
    path.write_text("".join(f">{n} words\n{s}\n" for n, s in seqs.items()))
    return path


def _same(a, b):
    assert a.names == b.names and a.checksum == b.checksum
    assert np.array_equal(a.offsets, b.offsets) and np.array_equal(a.codes, b.codes)


def _index_of(fasta):
    return api.build_index(str(fasta))


@pytest.fixture
def fasta(tmp_path):
    rng = np.random.default_rng(3)
    seqs = {f"c{i}": "".join(rng.choice(list("ACGTN"), 5000 + 100 * i)) for i in range(3)}
    return _fasta(tmp_path / "ref.fa", seqs)


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, BLOCK - 1, BLOCK, 3 * BLOCK + 7])
def test_packing_round_trip(n):
    rng = np.random.default_rng(n)
    codes = rng.integers(0, 4, n).astype(np.uint8)
    for a in rng.integers(0, max(n, 1), 4):          # runs of N, at the ends too
        codes[a:a + int(rng.integers(1, 40))] = 4
    if n:
        codes[0] = codes[-1] = 4
    pac, amb = pack(codes)
    assert pac.shape == ((n + 3) // 4,) and amb.ndim == 2
    lazy = LazyCodes(pac, amb, n)
    assert not lazy.codes.any()
    lazy.ensure(np.array([0]), np.array([n]))
    assert np.array_equal(lazy.codes, codes)


def test_blocks_are_decoded_where_asked_only():
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 5, 10 * BLOCK).astype(np.uint8)
    lazy = LazyCodes(*pack(codes), codes.size)
    lazy.ensure(np.array([BLOCK + 5, 7 * BLOCK - 3]), np.array([BLOCK + 10, 7 * BLOCK + 2]))
    assert lazy.decoded.tolist() == [0, 1, 0, 0, 0, 0, 1, 1, 0, 0]
    assert np.array_equal(lazy.codes[BLOCK:2 * BLOCK], codes[BLOCK:2 * BLOCK])
    assert not lazy.codes[:BLOCK].any() and not lazy.codes[8 * BLOCK:].any()
    lazy.ensure(np.array([-5, 9 * BLOCK]), np.array([3, 99 * BLOCK]))     # clamped to the genome
    assert lazy.decoded.tolist() == [1, 1, 0, 0, 0, 0, 1, 1, 0, 1]
    complete(lazy.codes)
    assert np.array_equal(lazy.codes, codes)


def test_align_takes_the_reference_from_the_index(fasta, monkeypatch):
    first = load_reference(fasta)
    assert first.fasta is not None
    path = _index_of(fasta)
    monkeypatch.setattr(reference, "read_fasta", lambda *a, **k: pytest.fail("FASTA parsed again"))
    from_index = api.open_reference(str(fasta))
    _same(from_index, first)
    assert from_index.fasta == first.fasta and from_index.lazy is None
    assert api.open_reference(str(fasta), index_path=path).checksum == first.checksum


def test_a_changed_fasta_is_read_again(fasta):
    _index_of(fasta)
    st = os.stat(fasta)
    text = bytearray(fasta.read_bytes())
    i = text.index(b"\n", 10) + 7
    text[i:i + 1] = b"A" if text[i:i + 1] != b"A" else b"C"       # same size ...
    fasta.write_bytes(bytes(text))
    os.utime(fasta, ns=(st.st_atime_ns, st.st_mtime_ns))          # ... and the same time
    _same(api.open_reference(str(fasta)), load_reference(fasta))
    os.utime(fasta, ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 9))
    _same(api.open_reference(str(fasta)), load_reference(fasta))


def test_a_damaged_packed_reference_is_not_used(fasta, capsys):
    path = _index_of(fasta)
    good = load_reference(fasta)
    data = bytearray(open(path, "rb").read())
    pac = next(r for r in read_header(path)[0]["arrays"] if r["name"] == "ref_pac")
    data[pac["offset"] + pac["nbytes"] // 2] ^= 0xFF
    open(path, "wb").write(bytes(data))
    _same(api.open_reference(str(fasta)), good)
    assert "damaged index array 'ref_pac'" in capsys.readouterr().err


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
        _same(load_reference(path), whole)
    with gzip.open(tmp_path / "r.fa.gz", "wt") as fh:
        fh.write(text)
    monkeypatch.setattr(reference, "READ_CHUNK", 13)
    _same(load_reference(tmp_path / "r.fa.gz"), whole)


@pytest.fixture(scope="module")
def sparse(tmp_path_factory):
    """A 2 Mbp genome (N gaps, a repeat) with few reads, so that most blocks stay undecoded: pairs
    (one mate random: rescue windows), single reads over contig ends and chimeras."""
    rng = np.random.default_rng(5)

    def seq(n):
        return "".join(rng.choice(list("ACGT"), n))
    rep = seq(500)
    a = seq(1_200_000)
    a = a[:300_000] + "N" * 5000 + a[305_000:600_000] + rep + a[600_500:900_000] + rep + a[900_500:]
    ctg = {"a": a, "b": seq(800_000)}
    d = tmp_path_factory.mktemp("packed")
    ref = _fasta(d / "g.fa", ctg)
    r1, r2, se = [], [], []
    for i in range(40):
        name = "ab"[i % 2]
        s = ctg[name]
        start = int(rng.integers(0, len(s) - 400))
        if i % 8 == 0 and name == "a":
            start = 600_200 - 150                      # read 1 into the repeat
        frag = s[start:start + 350]
        m1, m2 = frag[:120], revcomp(frag[-120:])
        if i >= 36:
            m2 = seq(120)
        r1.append((f"p{i}/1", m1))
        r2.append((f"p{i}/2", m2))
    for i in range(20):
        s = ctg["b"]
        if i < 5:
            read = s[-80:] + seq(40)                   # over the contig end
        elif i < 10:
            read = s[1000 * i:1000 * i + 70] + ctg["a"][5000 * i:5000 * i + 80]    # chimera
        else:
            read = s[3000 * i:3000 * i + 150]
        se.append((f"s{i}", read))
    out = {}
    for fname, recs in (("r1.fq", r1), ("r2.fq", r2), ("se.fq", se)):
        (d / fname).write_text("".join(f"@{n}\n{q}\n+\n{'I' * len(q)}\n" for n, q in recs))
        out[fname] = d / fname
    return ref, out


def _map(ref, reads, mates, out, batch_size=20000):
    api.align(str(ref), str(reads), out=str(out), options=AlignOptions(progress=False, batch_size=batch_size),
              summary=False, mates_path=None if mates is None else str(mates))
    return [x for x in open(out).read().splitlines() if not x.startswith("@PG")]


@pytest.mark.parametrize("paired", [False, True])
def test_lazy_decoding_maps_as_the_fasta(sparse, tmp_path, monkeypatch, paired):
    ref, fq = sparse
    reads, mates = (fq["r1.fq"], fq["r2.fq"]) if paired else (fq["se.fq"], None)
    from_fasta = _map(ref, reads, mates, tmp_path / "fasta.sam")     # the first run reads the FASTA
    assert _map(ref, reads, mates, tmp_path / "index.sam") == from_fasta
    seen = []
    real = LazyCodes.ensure

    def spy(self, starts, ends):
        real(self, starts, ends)
        seen.append(self)
    monkeypatch.setattr(LazyCodes, "ensure", spy)
    monkeypatch.setattr(reference, "EAGER_BASES", 0)
    assert _map(ref, reads, mates, tmp_path / "lazy.sam") == from_fasta
    lazy = seen[-1]
    assert 0 < lazy.decoded.sum() < lazy.decoded.size // 2              # it was decoded on demand
    # decoded blocks forgotten before every batch of 7 reads (pairs: the insert-size model's batches
    # are extended before the first one is written)
    monkeypatch.setattr(reference, "DECODED_LIMIT", 0)
    assert _map(ref, reads, mates, tmp_path / "trim.sam", batch_size=7) == from_fasta


def test_trimming_forgets_decoded_blocks():
    """Decoded blocks are counted by the memory pages they make resident; past the limit all go."""
    import mmap
    page = mmap.PAGESIZE
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 5, 5 * page).astype(np.uint8)
    lazy = LazyCodes(*pack(codes), codes.size)
    lazy.ensure(np.array([0, 3 * page]), np.array([10, 3 * page + 10]))    # a block in pages 0 and 3
    lazy.trim(2 * page)                                                     # two pages: kept
    assert lazy.decoded.sum() == 2 and np.array_equal(lazy.codes[:10], codes[:10])
    lazy.trim(page)
    assert not lazy.decoded.any() and not lazy.codes.any()
    lazy.ensure(np.array([page]), np.array([2 * page]))
    assert np.array_equal(lazy.codes[page:2 * page], codes[page:2 * page])


def test_the_run_that_builds_the_index_maps_with_its_saved_reference(fasta):
    pipe = api.make_pipeline(str(fasta), AlignOptions(progress=False, threads=1))
    assert pipe.ref.index == str(fasta) + ".pymap.idx" and os.path.exists(pipe.ref.index)
    _same(pipe.ref, load_reference(fasta))
