"""The index file: a versioned binary container of named NumPy arrays, loaded by memory map.

Layout (little-endian):

    0   8 bytes   magic b"PYMAPIDX"
    8   uint32    format version (FORMAT_VERSION)
    12  uint32    CRC32 of the JSON header bytes
    16  uint64    length of the JSON header in bytes
    24  40 bytes  zero (reserved)
    64  JSON header (UTF-8), then zero padding
        arrays, each starting at a multiple of 64 bytes

The JSON header holds the caller's `meta` (pymap version, seeder name, build parameters, reference
checksum, contig names and lengths, ...) and under "arrays" one record per array: name, dtype, shape,
offset, nbytes, crc32 (one CRC32 per CHUNK bytes of the array). Nothing is parsed at load: every
array is a view into one `np.memmap` (copy-on-write, so kernels see ordinary writable arrays; the
file is never modified). Every chunk of every array is checked at load, on threads (zlib's crc32
releases the GIL): a damaged index of any size is refused before a kernel reads it.

Files are written to a temporary name in the same directory and renamed into place (`os.replace`),
so an interrupted write never leaves a partial index under the real name.
"""
import json
import mmap
import os
import struct
import zlib

import numpy as np

from pymap import __version__
from pymap.errors import IndexCorrupt, IndexMismatch, UsageError
from pymap.outfile import cannot_write

MAGIC = b"PYMAPIDX"
FORMAT_VERSION = 2
ALIGN = 64
PRELUDE = struct.Struct("<8sIIQ40x")
#: bytes per checksummed chunk: small enough to spread a large array over threads
CHUNK = 1 << 24
VERIFY_THREADS = 4
REBUILD_HINT = "rebuild with `pymap index REF`"
#: candidate slots (reads x max_cands, 17 bytes each) a seeder's query fills at once: longer batches
#: are seeded in ranges of reads (in_read_ranges)
OUTPUT_SLOTS = 1 << 23


def _align(x):
    return (x + ALIGN - 1) // ALIGN * ALIGN


def _chunks(raw):
    """Byte views of CHUNK bytes (the last one shorter) of a uint8 array."""
    return [raw[i:i + CHUNK] for i in range(0, raw.shape[0], CHUNK)]


def _crc(chunk):
    return zlib.crc32(memoryview(chunk)) & 0xFFFFFFFF


def _crcs(a):
    raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    return [_crc(c) for c in _chunks(raw)]


def save_index(path, meta, arrays):
    """Write `arrays` ({name: ndarray}) and the JSON-able dict `meta` to `path` atomically."""
    path = os.fspath(path)
    records = []
    offset = 0
    arrays = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
    for name, a in arrays.items():
        if a.dtype.hasobject:
            raise TypeError(f"array {name!r} holds Python objects")
        records.append({"name": name, "dtype": a.dtype.str, "shape": list(a.shape),
                        "offset": offset, "nbytes": int(a.nbytes), "crc32": _crcs(a)})
        offset = _align(offset + a.nbytes)
    header = dict(meta)
    header.setdefault("pymap_version", __version__)
    header["format"] = FORMAT_VERSION
    header["arrays"] = records
    # array offsets are relative to the data start; fix them once the header length is known
    # (the header's length depends on the offsets' digits, so iterate to a fixed point)
    base = 0
    for _ in range(8):
        for rec, rel in zip(records, _relative_offsets(arrays)):
            rec["offset"] = base + rel
        blob = json.dumps(header, sort_keys=True).encode()
        new_base = _align(PRELUDE.size + len(blob))
        if new_base == base:
            break
        base = new_base
    prelude = PRELUDE.pack(MAGIC, FORMAT_VERSION, zlib.crc32(blob) & 0xFFFFFFFF, len(blob))
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp{os.getpid()}")
    if os.path.isdir(path) or not os.path.isdir(directory):
        raise UsageError(f"{path}: cannot write ({'a directory' if os.path.isdir(path) else 'no such directory'})")
    if os.path.exists(path) and not os.path.isfile(path):     # renamed over, a device would be replaced
        raise UsageError(f"{path}: cannot write an index there (not a regular file)")
    try:
        with open(tmp, "wb") as fh:
            fh.write(prelude)
            fh.write(blob)
            fh.write(b"\0" * (base - PRELUDE.size - len(blob)))
            pos = base
            for rec, a in zip(records, arrays.values()):
                assert rec["offset"] == pos
                if a.nbytes:
                    fh.write(memoryview(a).cast("B"))
                pos += a.nbytes
                pad = _align(pos) - pos
                if pad:
                    fh.write(b"\0" * pad)
                    pos += pad
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise cannot_write(path, exc) from None
        raise


def _relative_offsets(arrays):
    out = []
    off = 0
    for a in arrays.values():
        out.append(off)
        off = _align(off + a.nbytes)
    return out


def read_header(path):
    """(meta dict, file size) of an index file; IndexCorrupt / IndexMismatch when unreadable."""
    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            prelude = fh.read(PRELUDE.size)
            if len(prelude) < PRELUDE.size:
                raise IndexCorrupt(f"{path}: truncated index file ({size} bytes); {REBUILD_HINT}")
            magic, version, hcrc, hlen = PRELUDE.unpack(prelude)
            if magic != MAGIC:
                raise IndexCorrupt(f"{path}: not a pymap index (bad magic); {REBUILD_HINT}")
            if version != FORMAT_VERSION:
                raise IndexMismatch(f"{path}: index format version {version}, this pymap reads version "
                                    f"{FORMAT_VERSION}; {REBUILD_HINT}")
            if hlen > size - PRELUDE.size:
                raise IndexCorrupt(f"{path}: truncated index file (header); {REBUILD_HINT}")
            blob = fh.read(hlen)
    except FileNotFoundError:
        raise IndexMismatch(f"{path}: no index file; build it with `pymap index REF`") from None
    except IsADirectoryError:
        raise IndexCorrupt(f"{path}: is a directory, not an index file") from None
    if len(blob) != hlen or zlib.crc32(blob) & 0xFFFFFFFF != hcrc:
        raise IndexCorrupt(f"{path}: damaged index header (checksum mismatch); {REBUILD_HINT}")
    try:
        meta = json.loads(blob)
    except ValueError:
        raise IndexCorrupt(f"{path}: damaged index header (bad JSON); {REBUILD_HINT}") from None
    return meta, size


def _check_expect(path, meta, expect, prefix=""):
    for key, want in expect.items():
        have = meta.get(key) if isinstance(meta, dict) else None
        if isinstance(want, dict) and isinstance(have, dict):
            _check_expect(path, have, want, prefix + key + ".")
            continue
        if isinstance(want, tuple):
            want = list(want)
        if have != want:
            what = prefix + key
            if what == "reference_checksum":
                msg = "the index was built from another reference (checksum differs)"
            elif what == "seeder":
                msg = f"the index is of the {have!r} seeder, this run's is {want!r} (--seeder {have} uses it)"
            else:
                msg = f"index {what} is {have!r}, expected {want!r}"
            raise IndexMismatch(f"{path}: {msg}; {REBUILD_HINT}")


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _valid_record(rec):
    """An array record with the right keys, types and ranges (the header checksum only proves that
    the bytes are what was written, not that a writer wrote sense)."""
    if not isinstance(rec, dict) or not isinstance(rec.get("name"), str) or not isinstance(rec.get("dtype"), str):
        return False
    shape, offset, nbytes, crc = rec.get("shape"), rec.get("offset"), rec.get("nbytes"), rec.get("crc32")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        return False
    if not (_is_int(offset) and _is_int(nbytes)) or offset < 0 or offset % ALIGN:
        return False
    if not isinstance(crc, list) or not all(_is_int(c) for c in crc) or len(crc) != -(-nbytes // CHUNK):
        return False
    try:
        dtype = np.dtype(rec["dtype"])
    except TypeError:
        return False
    if dtype.hasobject or dtype.byteorder == ">":
        return False
    count = 1
    for d in shape:
        count *= d
    return count * dtype.itemsize == nbytes


def load_index(path, expect=None, verify=True, only=None, skip=(), random_access=()):
    """Load an index file: (meta, {name: ndarray}) with the arrays memory-mapped.

    expect: dict of header entries that must match (nested dicts compared key by key), else
    IndexMismatch. verify: check every chunk's CRC32 (default); sizes and the header checksum are
    always checked (IndexCorrupt). only: the names of the arrays wanted (checked and returned;
    KeyError when one is missing), None for all; skip: names of arrays neither checked nor returned;
    random_access: names of arrays read a few bytes here and there (no readahead: only the pages
    read become resident).
    """
    path = os.fspath(path)
    meta, size = read_header(path)
    if not isinstance(meta, dict):
        raise IndexCorrupt(f"{path}: damaged index header (not a JSON object); {REBUILD_HINT}")
    if meta.get("format") != FORMAT_VERSION:
        raise IndexMismatch(f"{path}: index format {meta.get('format')!r}, expected {FORMAT_VERSION}; "
                            f"{REBUILD_HINT}")
    if expect:
        _check_expect(path, meta, expect)
    records = meta.get("arrays")
    if not isinstance(records, list):
        raise IndexCorrupt(f"{path}: damaged index header (no array table); {REBUILD_HINT}")
    end = 0
    for i, rec in enumerate(records):
        if not _valid_record(rec):
            name = rec.get("name") if isinstance(rec, dict) else None
            raise IndexCorrupt(f"{path}: damaged index header (array {name if isinstance(name, str) else i!r}); "
                               f"{REBUILD_HINT}")
        end = max(end, rec["offset"] + rec["nbytes"])
    if len({rec["name"] for rec in records}) != len(records):
        raise IndexCorrupt(f"{path}: damaged index header (duplicate array names); {REBUILD_HINT}")
    if size < end:
        raise IndexCorrupt(f"{path}: truncated index file ({size} bytes, {end} expected); {REBUILD_HINT}")
    if only is not None:
        by_name = {rec["name"]: rec for rec in records}
        records = [by_name[name] for name in only]
    records = [rec for rec in records if rec["name"] not in skip]
    if verify:
        _verify(path, records)
    mm = np.memmap(path, dtype=np.uint8, mode="c") if size else np.zeros(0, np.uint8)
    for rec in records:
        if rec["name"] in random_access and rec["nbytes"] and hasattr(mmap, "MADV_RANDOM"):
            start = rec["offset"] // mmap.PAGESIZE * mmap.PAGESIZE
            mm._mmap.madvise(mmap.MADV_RANDOM, start, rec["offset"] + rec["nbytes"] - start)
    raws = [np.asarray(mm[rec["offset"]:rec["offset"] + rec["nbytes"]]) for rec in records]
    arrays = {rec["name"]: raw.view(np.dtype(rec["dtype"])).reshape(rec["shape"])
              for rec, raw in zip(records, raws)}
    meta = dict(meta)
    meta.pop("arrays")
    return meta, arrays


def _verify(path, records):
    """IndexCorrupt naming the first array with a chunk whose CRC32 differs. The chunks are read from
    the file into one buffer per thread, not through the memory map: checking a 5 GB index would
    otherwise leave all of it mapped into the process (resident) before mapping needs any of it."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    work = [(i, rec["offset"] + k * CHUNK, min(CHUNK, rec["nbytes"] - k * CHUNK), want)
            for i, rec in enumerate(records) for k, want in enumerate(rec["crc32"])]
    threads = max(1, min(VERIFY_THREADS, os.cpu_count() or 1, len(work)))
    local = threading.local()
    fd = os.open(path, os.O_RDONLY)

    def check(w):
        _, offset, length, want = w
        if getattr(local, "buf", None) is None:
            local.buf = bytearray(CHUNK)
        view = memoryview(local.buf)[:length]
        return os.preadv(fd, [view], offset) == length and (zlib.crc32(view) & 0xFFFFFFFF) == want

    try:
        with ThreadPoolExecutor(threads) as pool:
            ok = list(pool.map(check, work))
    finally:
        os.close(fd)
    bad = [work[j][0] for j, good in enumerate(ok) if not good]
    if bad:
        raise IndexCorrupt(f"{path}: damaged index array {records[bad[0]]['name']!r} (checksum mismatch); "
                           f"{REBUILD_HINT}")


# ---------------------------------------------------------------- seeders' index files

def reference_info(reference):
    """What a seeder's index keeps of its reference: {"checksum", "names", "lengths"}, and, to be
    saved with it, "fasta" (the FASTA's fingerprint) and "packed" (the bases two bits each)."""
    from pymap.reference import packed_arrays
    return {"checksum": reference.checksum, "names": list(reference.names),
            "lengths": [int(x) for x in reference.lengths], "fasta": reference.fasta,
            "packed": packed_arrays(reference)}


#: the arrays of a seeder's index file that hold the reference (pymap.reference.load_reference)
REFERENCE_ARRAYS = ("ref_pac", "ref_amb")


def save_seeder_index(path, seeder, version, params, info, arrays):
    """A seeder's index: its name and version, build parameters, reference checksum and contig table,
    and the reference itself packed (as bwa's .pac: `align` need not read the FASTA again)."""
    meta = {"seeder": seeder, "index_version": version, "params": params, "reference_checksum": info["checksum"],
            "contigs": {"names": info["names"], "lengths": info["lengths"]}, "fasta": info.get("fasta")}
    save_index(path, meta, {**arrays, **info.get("packed", {})})


def explicit_params(stage, keys):
    """The build parameters among `keys` that a seeder instance was given (not None)."""
    return {key: getattr(stage, key) for key in keys if getattr(stage, key) is not None}


def load_keyed_seeder_index(path, seeder, version, reference, build_keys, check_build_params, hash_name, make,
                            verify=True):
    """load_seeder_index for a seeder whose build parameters are `build_keys` (checked by
    check_build_params, in that order) and a hash function's name: the index object
    make(params, info, arrays), its IndexCorrupt naming the file."""
    def check(params):
        checked = check_build_params(*(params.get(key) for key in build_keys))
        if params.get("hash") != hash_name:
            raise ValueError(f"hash {params.get('hash')!r}")
        return {**params, **checked}
    params, info, arrays = load_seeder_index(path, seeder.name, version, reference,
                                             explicit_params(seeder, build_keys), check, verify)
    try:
        return make(params, info, arrays)
    except IndexCorrupt as exc:
        raise IndexCorrupt(f"{path}: {exc}") from None


def in_read_ranges(batch, max_edits, per_read, query):
    """Run query(codes, offsets, max_edits, first read) over ranges of a batch's reads small enough
    that per_read output slots a read stay within OUTPUT_SLOTS, and concatenate the tuples of arrays
    it returns (its first array: read numbers within the range, shifted here to the batch's)."""
    n = len(batch)
    offsets = np.ascontiguousarray(batch.offsets, dtype=np.int64)
    codes = np.ascontiguousarray(batch.codes, dtype=np.uint8)
    sub = max(1, OUTPUT_SLOTS // per_read)
    parts = []
    for r0 in range(0, n, sub):
        r1 = min(n, r0 + sub)
        out = query(codes[int(offsets[r0]):int(offsets[r1])], offsets[r0:r1 + 1] - offsets[r0], max_edits[r0:r1])
        parts.append(((out[0] + r0).astype(np.int32),) + tuple(out[1:]))
    return [np.concatenate([q[i] for q in parts]) if len(parts) > 1 else parts[0][i] for i in range(len(parts[0]))]


def with_requeried(read, strand, pos, redo, more):
    """Candidates (read, strand, pos; sorted by read) with those of reads `redo` replaced by `more`,
    the (read, strand, pos, ...) of a query of batch.subset(redo): a seeder's second query of some
    reads. Each read's candidates stay in the order of the one query that gave them."""
    keep = np.flatnonzero(np.isin(read, redo, invert=True))
    read = np.concatenate([read[keep], redo[more[0]].astype(read.dtype)])
    order = np.argsort(read, kind="stable")
    return read[order], np.concatenate([strand[keep], more[1]])[order], np.concatenate([pos[keep], more[2]])[order]


def load_seeder_index(path, seeder, version, reference, explicit, check, verify=True):
    """(params, info, arrays) of a seeder's index that matches `reference` (None: no check) and the
    explicitly given build parameters `explicit`; IndexMismatch otherwise. check(params) returns the
    validated parameters or raises ValueError (a damaged header: IndexCorrupt)."""
    expect = {"seeder": seeder, "index_version": version}
    if explicit:
        expect["params"] = explicit
    if reference is not None:
        expect["reference_checksum"] = reference.checksum
    meta, arrays = load_index(path, expect, verify=verify, skip=REFERENCE_ARRAYS)   # the reference's own loader
    params, contigs = meta.get("params"), meta.get("contigs")
    try:
        if not isinstance(params, dict):
            raise ValueError("no build parameters")
        params = check(params)
        if not isinstance(contigs, dict) or not isinstance(contigs.get("names"), list) \
                or not isinstance(contigs.get("lengths"), list) or len(contigs["names"]) != len(contigs["lengths"]):
            raise ValueError("no contig table")
    except ValueError as exc:
        raise IndexCorrupt(f"{path}: index header is damaged ({exc}); {REBUILD_HINT}") from None
    if reference is not None and [int(x) for x in reference.lengths] != contigs["lengths"]:
        raise IndexMismatch(f"{path}: the index was built from another reference (contig lengths differ); "
                            f"{REBUILD_HINT}")
    info = {"checksum": meta.get("reference_checksum"), "names": contigs["names"], "lengths": contigs["lengths"]}
    return params, info, arrays
