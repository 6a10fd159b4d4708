"""Fuzzing of every input reader: random bytes and mutations of valid files.

The only allowed outcomes of reading FASTQ/FASTA reads (`read_batches`), references
(`parse_fasta`, `load_reference`), pair files (`pairfile.read_pairs`) and index files
(`pymap.index.load_index`, the seeder's `load_index`, `api.open_index`) are success or a
PymapError subclass; anything else (IndexError, ValueError, UnicodeDecodeError, ...) is a bug.
What a reader accepts must also be self-consistent (offsets, qualities) and independent of the
chunk size it is read in. A few fuzzed inputs also go through `python -m pymap.cli align`:
exit 0/1/2, at most one `pymap: error:` line, no traceback.
"""
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile
import traceback
import zlib
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import pymap.reads as reads_mod
from pymap import api, pairfile, plugins
from pymap import index as idxfile
from pymap.errors import PymapError
from pymap.options import AlignOptions
from pymap.reads import read_batches
from pymap.reference import load_reference, parse_fasta
from pymap.seeders.neighborhood import NeighborhoodSeeder

FUZZ = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

try:
    plugins.load_class("filter", AlignOptions().filter)
    CLI_FILTER = []
except Exception:  # the default filter plugin is not installed (yet): the CLI runs use `none`
    CLI_FILTER = ["--filter", "none"]

_rng = np.random.default_rng(7)
REF_SEQS = {f"c{i}": "".join(_rng.choice(list("ACGT"), n)) for i, n in enumerate((1500, 700, 300))}
REF_FA = "".join(f">{n} desc\n" + "\n".join(s[i:i + 70] for i in range(0, len(s), 70)) + "\n"
                 for n, s in REF_SEQS.items()).encode()


def _fastq():
    out = []
    for i in range(12):
        c = REF_SEQS["c0"]
        p = int(_rng.integers(0, 1000))
        s = c[p:p + int(_rng.integers(20, 120))]
        s = s.lower() if i % 5 == 0 else s
        q = "".join(chr(33 + int(x)) for x in _rng.integers(0, 41, len(s)))
        eol = "\r\n" if i % 4 == 0 else "\n"
        out.append(f"@read{i} comment{eol}{s}{eol}+{eol}{q}{eol}")
    out.append("@empty\n\n+\n\n")
    return "".join(out).encode()


FASTQ = _fastq()
FASTA_READS = b">q1 x\nACGTACGTTTGACCA\nGGT\n>q2\r\nacgtnRYacgt\r\n>q3\n\n>q4\nTTTT\n"
PAIRS = b"ACGTACGT\tACGTACGA\nAAAA\tCCCC\r\nACGTTGCAACGT\tACGTTGCAACGA\n"


# ---- mutations --------------------------------------------------------------------------------

@st.composite
def mutated(draw, base):
    """A valid file damaged by a few edits, maybe gzipped and then damaged again."""
    data = bytearray(base)
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "duplicate", "set"]))
        pos = draw(st.integers(0, max(0, len(data))))
        if op == "flip" and data:
            p = min(pos, len(data) - 1)
            data[p] ^= draw(st.integers(1, 255))
        elif op == "set" and data:
            p = min(pos, len(data) - 1)
            data[p] = draw(st.sampled_from(b"@+>\n\r\t \x00\xff!~NnACGTacgt"))
        elif op == "truncate":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = draw(st.one_of(st.binary(min_size=1, max_size=20),
                                           st.sampled_from([b"\n", b"\r\n", b"@", b"+\n", b">", b"\n>\n",
                                                            b"@x\nAC\n+\nII\n", b"\n\n\n", b" "])))
        elif op == "delete":
            del data[pos:pos + draw(st.integers(1, 30))]
        elif op == "duplicate":
            n = draw(st.integers(1, 40))
            data[pos:pos] = data[pos:pos + n]
    data = bytes(data)
    wrap = draw(st.sampled_from(["plain", "plain", "gzip", "gzip_truncated", "gzip_flipped", "gzip_twice"]))
    if wrap == "gzip":
        data = gzip.compress(data)
    elif wrap == "gzip_twice":
        data = gzip.compress(data) + gzip.compress(data[: len(data) // 2])
    elif wrap == "gzip_truncated":
        z = gzip.compress(data)
        data = z[: draw(st.integers(0, len(z)))]
    elif wrap == "gzip_flipped":
        z = bytearray(gzip.compress(data))
        p = draw(st.integers(0, len(z) - 1))
        z[p] ^= draw(st.integers(1, 255))
        data = bytes(z)
    return data


def garbage():
    return st.one_of(st.binary(max_size=400),
                     st.binary(max_size=400).map(gzip.compress),
                     st.binary(min_size=2, max_size=400).map(lambda b: b"\x1f\x8b" + b),
                     st.text(alphabet="@+>\n\r ACGTNacgt!I~\t", max_size=300).map(str.encode))


def _write(d, name, data):
    p = os.path.join(d, name)
    with open(p, "wb") as fh:
        fh.write(data)
    return p


def _note(msg):
    from hypothesis.control import currently_in_test_context
    if currently_in_test_context():
        note(msg)


def clean(fn, *args, **kw):
    """Run fn: its result, or None on a PymapError; any other exception fails the test."""
    try:
        return fn(*args, **kw)
    except PymapError as exc:
        _note(f"clean error: {type(exc).__name__}: {exc}")
        return None
    except Exception as exc:
        pytest.fail(f"{fn.__module__}.{fn.__qualname__} raised {type(exc).__name__} (not a PymapError): "
                    f"{exc}\n{traceback.format_exc()}")


# ---- reads ------------------------------------------------------------------------------------

def _read_all(path, batch_size):
    out = []
    for b in read_batches(path, batch_size):
        n = len(b)
        assert b.offsets.shape == (n + 1,) and b.offsets[0] == 0 and np.all(np.diff(b.offsets) >= 0)
        assert b.offsets[-1] == b.codes.shape[0]
        assert b.name_offsets.shape == (n + 1,) and b.name_offsets[-1] == b.names.shape[0]
        assert b.quals.size in (0, b.codes.size)
        assert b.codes.size == 0 or int(b.codes.max()) <= 4
        assert b.first_index == len(out)
        for i in range(n):
            a, z = b.offsets[i], b.offsets[i + 1]
            out.append((bytes(b.names[b.name_offsets[i]:b.name_offsets[i + 1]]), b.codes[a:z].tobytes(),
                        b.quals[a:z].tobytes() if b.quals.size or a == z else None))
    return out


def _reads_outcome(data, chunk, batch_size):
    """("ok", reads) or ("error", message)."""
    with tempfile.TemporaryDirectory() as d:
        p = _write(d, "reads.fq", data)
        with mock.patch.object(reads_mod, "CHUNK_BYTES", chunk):
            try:
                return "ok", _read_all(p, batch_size)
            except PymapError as exc:
                return "error", str(exc)
            except Exception as exc:
                pytest.fail(f"read_batches raised {type(exc).__name__} (not a PymapError) with CHUNK_BYTES="
                            f"{chunk}, batch_size={batch_size}: {exc}\n{traceback.format_exc()}")


def _check_reads(data, chunk, batch_size):
    note(f"data={data!r}")
    big = _reads_outcome(data, 8 << 20, 20000)
    small = _reads_outcome(data, chunk, batch_size)
    note(f"whole file: {big[0]} {big[1] if big[0] == 'error' else ''}; chunk {chunk}: {small[0]} "
         f"{small[1] if small[0] == 'error' else ''}")
    if big[0] == "error" and "binary data" in big[1] and small[0] == "ok":
        return  # the binary sniff looks at the first chunk only (4 KiB of an 8 MiB chunk in practice)
    # the chunk and batch sizes are an implementation detail: same reads, or an error both ways
    assert big[0] == small[0], f"CHUNK_BYTES={chunk}: {small[0]}, whole file: {big[0]}"
    assert big == small or big[0] == "error"


@FUZZ
@given(data=garbage(), chunk=st.integers(1, 64), batch_size=st.integers(1, 5))
def test_read_batches_random_bytes(data, chunk, batch_size):
    _check_reads(data, chunk, batch_size)


@FUZZ
@given(data=mutated(FASTQ), chunk=st.integers(1, 200), batch_size=st.integers(1, 7))
def test_read_batches_mutated_fastq(data, chunk, batch_size):
    _check_reads(data, chunk, batch_size)


@FUZZ
@given(data=mutated(FASTA_READS), chunk=st.integers(1, 40), batch_size=st.integers(1, 3))
def test_read_batches_mutated_fasta(data, chunk, batch_size):
    _check_reads(data, chunk, batch_size)


# ---- references -------------------------------------------------------------------------------

def _check_reference(ref):
    if ref is None:
        return
    n = len(ref.names)
    assert n >= 1 and ref.offsets.shape == (n + 1,) and ref.offsets[0] == 0
    assert np.all(np.diff(ref.offsets) > 0), "empty contig kept"
    assert ref.offsets[-1] == ref.codes.shape[0] and int(ref.codes.max()) <= 4
    assert len(set(ref.names)) == n and all(ref.names) and all(not any(c.isspace() for c in x) for x in ref.names)


@FUZZ
@given(data=st.one_of(garbage(), mutated(REF_FA)))
def test_parse_fasta(data):
    note(f"data={data!r}")
    _check_reference(clean(parse_fasta, data, "fuzz.fa"))


@FUZZ
@given(data=st.one_of(garbage(), mutated(REF_FA)))
def test_load_reference(data):
    note(f"data={data!r}")
    with tempfile.TemporaryDirectory() as d:
        _check_reference(clean(load_reference, _write(d, "ref.fa", data)))


# ---- pair files -------------------------------------------------------------------------------

@FUZZ
@given(data=st.one_of(garbage(), mutated(PAIRS)))
def test_read_pairs(data):
    note(f"data={data!r}")
    with tempfile.TemporaryDirectory() as d:
        res = clean(pairfile.read_pairs, _write(d, "pairs.txt", data))
    if res is not None:
        groups, n = res
        nos = np.sort(np.concatenate([g[0] for g in groups])) if groups else np.zeros(0, np.int64)
        assert list(nos) == list(range(n))
        for _, r, s in groups:
            assert r.shape == s.shape and r.ndim == 2 and r.shape[1] > 0


# ---- index files ------------------------------------------------------------------------------

class SavedIndex:
    """The reference and the bytes of its saved index (short repr for hypothesis reports)."""

    def __init__(self, reference, data):
        self.reference, self.data = reference, data

    def __repr__(self):
        return f"<saved index of {len(self.data)} bytes>"


@pytest.fixture(scope="module")
def saved_index(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzzidx")
    ref_path = d / "ref.fa"
    ref_path.write_bytes(REF_FA)
    reference = load_reference(str(ref_path))
    seeder = NeighborhoodSeeder()
    path = str(d / "ref.idx")
    seeder.save_index(seeder.build_index(reference), path)
    with open(path, "rb") as fh:
        return SavedIndex(reference, fh.read())


def _batch():
    from pymap.kernels.encoding import ASCII_TO_CODE
    from pymap.batch import ReadBatch
    codes = ASCII_TO_CODE[np.frombuffer(REF_SEQS["c0"][100:200].encode(), np.uint8)]
    return ReadBatch(codes=codes, offsets=np.array([0, codes.size], np.int64),
                     names=np.frombuffer(b"r", np.uint8).copy(), name_offsets=np.array([0, 1], np.int64),
                     quals=np.empty(0, np.uint8))


def _check_index(reference, data):
    seeder = NeighborhoodSeeder()
    with tempfile.TemporaryDirectory() as d:
        p = _write(d, "ref.idx", data)
        clean(idxfile.load_index, p)
        index = clean(seeder.load_index, p, reference)
        if index is not None:  # accepted: it must then work like the original
            cands = seeder.candidates(index, _batch(), np.array([3], np.int32))
            assert len(cands) >= 1, "a damaged index was accepted and finds no candidate"
        clean(api.open_index, seeder, reference, os.path.join(d, "ref.fa"), index_path=p)
        # the default path next to the reference: damaged files are rebuilt, never fatal
        _write(d, "ref.fa.pymap.idx", data)
        with mock.patch.object(api, "_log", lambda msg: None):
            index = clean(api.open_index, seeder, reference, os.path.join(d, "ref.fa"), save=False)
        assert index is not None, "a damaged default index must be rebuilt"


@st.composite
def index_mutations(draw, base):
    data = bytearray(base)
    hlen = struct.unpack_from("<Q", data, 16)[0]
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip_prelude", "flip_header", "flip_data", "truncate", "insert", "zero"]))
        if op == "flip_prelude":
            p = draw(st.integers(0, 23))
        elif op == "flip_header":
            p = draw(st.integers(64, 64 + hlen - 1))
        else:
            p = draw(st.integers(0, len(data) - 1)) if data else 0
        if op.startswith("flip") and p < len(data):
            data[p] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[p:]
        elif op == "insert":
            data[p:p] = draw(st.binary(min_size=1, max_size=70))
        elif op == "zero":
            n = draw(st.integers(1, 200))
            data[p:p + n] = bytes(len(data[p:p + n]))
    return bytes(data)


@settings(FUZZ, max_examples=80)
@given(data=st.data())
def test_index_byte_mutations(saved_index, data):
    base = saved_index.data
    _check_index(saved_index.reference,
                 data.draw(st.one_of(index_mutations(base), st.binary(max_size=300),
                                     st.binary(max_size=100).map(lambda b: base[:64] + b))))


def with_header(base, edit):
    """base (a saved index) with its JSON header replaced by edit(header dict) and a valid
    header checksum: what a buggy writer, or another tool claiming this format version, produces."""
    magic, version, _, hlen = idxfile.PRELUDE.unpack_from(base)
    meta = edit(json.loads(base[64:64 + hlen]))
    blob = json.dumps(meta, separators=(",", ":")).encode()
    start = idxfile._align(idxfile.PRELUDE.size + hlen)
    if idxfile.PRELUDE.size + len(blob) > start:
        return None  # does not fit before the arrays
    prelude = idxfile.PRELUDE.pack(magic, version, zlib.crc32(blob) & 0xFFFFFFFF, len(blob))
    return prelude + blob + b"\0" * (start - idxfile.PRELUDE.size - len(blob)) + base[start:]


JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.sampled_from([0, 1, -1, 64, -64]),
                        st.text(max_size=6), st.sampled_from(["<u4", "|O", "<f8", "|u1", "<i8", "V8", "S3", ">u8"]),
                        st.lists(st.integers(-3, 10**6), max_size=3), st.just({}), st.just([{}]), st.just([1]),
                        st.floats(allow_nan=False, allow_infinity=False))


@st.composite
def header_edits(draw, base):
    """One value of the JSON header replaced (or deleted), the header checksum kept valid."""
    magic, version, _, hlen = idxfile.PRELUDE.unpack_from(base)
    meta = json.loads(base[64:64 + hlen])
    path, node = [], meta
    while isinstance(node, (dict, list)) and node and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else list(range(len(node)))))
        path.append(key)
        node = node[key]
    value = draw(JSON_VALUES)
    delete = draw(st.booleans())
    note(f"header edit at {path}: {'delete' if delete else repr(value)}")

    def edit(meta):
        if not path:
            return value
        tgt = meta
        for k in path[:-1]:
            tgt = tgt[k]
        if delete and isinstance(tgt, dict):
            del tgt[path[-1]]
        else:
            tgt[path[-1]] = value
        return meta

    return with_header(base, edit) or base


# Headers with a valid checksum but nonsense types or ranges (first found by test_index_header_values,
# when the loaders trusted them): each must be one clear PymapError. (edit, loader, what was wrong)
_A0 = lambda m, **kw: dict(m, arrays=[dict(m["arrays"][0], **kw)] + m["arrays"][1:])
_DROP = lambda m, key: dict(m, arrays=[{k: v for k, v in m["arrays"][0].items() if k != key}] + m["arrays"][1:])
HEADER_BUGS = {
    "header_null": (lambda m: None, "index",
                    "mapper/index.py load_index: meta.get on a header that is JSON null"),
    "header_list": (lambda m: [1], "index",
                    "mapper/index.py load_index: meta.get on a header that is a JSON list"),
    "array_record_null": (lambda m: dict(m, arrays=[None]), "index",
                          "mapper/index.py load_index: rec.get('name') in the except clause on a record "
                          "that is not a dict"),
    "array_no_crc32": (lambda m: _DROP(m, "crc32"), "index",
                       "mapper/index.py load_index: rec['crc32'] not validated"),
    "array_no_name": (lambda m: _DROP(m, "name"), "index",
                      "mapper/index.py load_index: rec['name'] not validated"),
    "array_name_list": (lambda m: _A0(m, name=[1]), "index",
                        "mapper/index.py load_index: unhashable array name used as a dict key"),
    "array_offset_float": (lambda m: _A0(m, offset=float(m["arrays"][0]["offset"])), "index",
                           "mapper/index.py load_index: float offset passes `% ALIGN`, then slices the memmap"),
    "array_shape_two_negative": (lambda m: _A0(m, shape=[-1, -2 * m["arrays"][0]["shape"][0]]), "index",
                                 "mapper/index.py load_index: negative shape entries pass the size check, "
                                 "reshape raises ValueError"),
    "contigs_number": (lambda m: dict(m, contigs=5), "seeder",
                       "mapper/seeders/neighborhood.py load_index: contigs.get on a non-dict"),
    "nb_len_null": (lambda m: dict(m, params=dict(m["params"], nb_len=None)), "seeder",
                    "mapper/seeders/neighborhood.py load_index: int(params['nb_len']) on null"),
    "nb_len_99": (lambda m: dict(m, params=dict(m["params"], nb_len=99)), "seeder",
                  "mapper/seeders/neighborhood.py: nb_len=99 (valid range 1..16) is accepted; the index "
                  "loads and silently finds no candidate"),
}


@pytest.mark.parametrize("case", list(HEADER_BUGS))
def test_index_header_nonsense_is_an_error(saved_index, case, tmp_path):
    edit, loader, _ = HEADER_BUGS[case]
    p = tmp_path / "ref.idx"
    p.write_bytes(with_header(saved_index.data, edit))
    with pytest.raises(PymapError):
        if loader == "index":
            idxfile.load_index(str(p))
        else:
            NeighborhoodSeeder().load_index(str(p), saved_index.reference)


@pytest.mark.parametrize("edit", [
    lambda m: dict(m, format="1"),
    lambda m: dict(m, params=dict(m["params"], pattern=5)),
    lambda m: dict(m, arrays=[dict(m["arrays"][0], dtype=">u4")] + m["arrays"][1:]),
    lambda m: dict(m, arrays=[dict(m["arrays"][0], nbytes="x")] + m["arrays"][1:]),
    lambda m: dict(m, arrays=[dict(m["arrays"][0], offset=-64)] + m["arrays"][1:]),
    lambda m: dict(m, arrays=m["arrays"][1:]),
    lambda m: dict(m, arrays={}),
    lambda m: {k: v for k, v in m.items() if k != "params"},
], ids=["format_str", "pattern_int", "dtype_big_endian", "nbytes_str", "offset_negative", "array_missing",
        "arrays_dict", "params_missing"])
def test_index_header_values_handled(saved_index, edit):
    _check_index(saved_index.reference, with_header(saved_index.data, edit))


@settings(FUZZ, max_examples=80, derandomize=True)
@given(data=st.data())
def test_index_header_values(saved_index, data):
    _check_index(saved_index.reference, data.draw(header_edits(saved_index.data)))


# ---- the command line on fuzzed files ---------------------------------------------------------

def _cli(*args):
    res = subprocess.run([sys.executable, "-m", "pymap.cli", *map(str, args)], capture_output=True, timeout=120)
    err = res.stderr.decode(errors="replace")
    other = [l for l in err.splitlines() if not l.startswith("[pymap]")]
    assert res.returncode in (0, 1, 2), err
    assert "Traceback" not in err, err
    assert len(other) <= 1 and all(l.startswith("pymap: error:") for l in other), err
    if res.returncode:
        assert len(other) == 1, err
    return res


def _fixed_mutation(base, seed):
    """A deterministic damaged copy of base (the CLI runs are few and slow)."""
    rng = np.random.default_rng(seed)
    data = bytearray(base)
    for _ in range(int(rng.integers(1, 6))):
        p = int(rng.integers(0, len(data)))
        kind = seed % 4
        if kind == 0:
            data[p] ^= int(rng.integers(1, 256))
        elif kind == 1:
            data[p:p] = rng.integers(0, 256, int(rng.integers(1, 10)), dtype=np.uint8).tobytes()
        elif kind == 2:
            del data[p:p + int(rng.integers(1, 20))]
        else:
            data[p] = b"@+>\n"[int(rng.integers(0, 4))]
    return bytes(data)


@pytest.mark.parametrize("variant", ["mutated0", "mutated1", "mutated3", "truncated_gzip"])
def test_cli_fuzzed_reads(tmp_path, variant):
    ref = tmp_path / "ref.fa"
    ref.write_bytes(REF_FA)
    if variant == "truncated_gzip":
        z = gzip.compress(FASTQ * 50)
        data = z[: len(z) * 2 // 3]
    else:
        data = _fixed_mutation(FASTQ * 3, int(variant[-1]))
    p = tmp_path / "reads.fq"
    p.write_bytes(data)
    res = _cli("align", ref, p, "--no-progress", "-t", "2", *CLI_FILTER)
    if res.returncode == 0:
        assert res.stdout.startswith(b"@HD")


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_cli_fuzzed_reference(tmp_path, seed):
    ref = tmp_path / "ref.fa"
    ref.write_bytes(_fixed_mutation(REF_FA, seed) if seed < 3 else gzip.compress(REF_FA)[:-30])
    p = tmp_path / "reads.fq"
    p.write_bytes(FASTQ)
    _cli("align", ref, p, "--no-progress", "-t", "2", *CLI_FILTER)


@pytest.mark.parametrize("seed", [0, 2, 5])
def test_cli_fuzzed_index(tmp_path, saved_index, seed):
    ref = tmp_path / "ref.fa"
    ref.write_bytes(REF_FA)
    base = saved_index.data
    idx = tmp_path / "bad.idx"
    idx.write_bytes(_fixed_mutation(base[:400], seed) + base[400:] if seed < 5 else base[: len(base) // 3])
    p = tmp_path / "reads.fq"
    p.write_bytes(FASTQ)
    res = _cli("align", ref, p, "--no-progress", "-t", "2", "--index", idx, *CLI_FILTER)
    if res.returncode:
        assert b"pymap index" in res.stderr
