"""The reference: contigs as one global array of mapping codes with contig boundaries."""
import gzip
import hashlib
import os
import zlib
from dataclasses import dataclass

import numpy as np

from pymap.kernels.encoding import ASCII_TO_CODE
from pymap.errors import InputError


@dataclass
class Reference:
    """names: contig names (str); offsets: int64[n+1] global start of each contig;
    codes: uint8 mapping codes of all contigs concatenated (non-ACGT is 4);
    checksum: hex digest of the names and sequences (identifies the reference for an index)."""
    names: list
    offsets: np.ndarray
    codes: np.ndarray
    checksum: str
    path: str = None

    @property
    def lengths(self):
        return np.diff(self.offsets)

    def __len__(self):
        return len(self.names)

    def contig_of(self, pos):
        """Contig index holding each global position (array)."""
        return np.searchsorted(self.offsets, pos, side="right") - 1


def open_maybe_gzip(path):
    """Bytes of a plain or gzip file; InputError when missing or damaged."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
            fh.seek(0)
            if head == b"\x1f\x8b":
                with gzip.GzipFile(fileobj=fh) as gz:
                    return gz.read()
            return fh.read()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"{path}: damaged gzip data ({exc})") from None


def parse_fasta(data, source="reference"):
    """FASTA bytes -> Reference. First word of a header line is the contig name."""
    if b"\x00" in data[:65536]:
        raise InputError(f"{source}: not a FASTA file (binary data)")
    text = data.replace(b"\r", b"")
    if not text.strip():
        raise InputError(f"{source}: empty reference")
    if not text.lstrip().startswith(b">"):
        raise InputError(f"{source}: not a FASTA file (first line does not start with '>')")
    names, chunks = [], []
    seen = set()
    for rec in text.lstrip()[1:].split(b"\n>"):
        header, _, body = rec.partition(b"\n")
        words = header.split()
        if not words:
            raise InputError(f"{source}: a FASTA header has no name (record {len(names) + 1})")
        if any(c < 33 or c > 126 for c in words[0]):
            raise InputError(f"{source}: contig name {words[0].decode('ascii', 'replace')!r} holds a control or "
                             f"non-ASCII character (SAM allows printable ASCII only)")
        name = words[0].decode("ascii")
        if name in seen:
            raise InputError(f"{source}: duplicate contig name {name!r}")
        seq = body.replace(b"\n", b"").replace(b" ", b"").replace(b"\t", b"")
        if not seq:
            continue  # empty contigs carry nothing to map to; @SQ cannot hold LN:0
        seen.add(name)
        names.append(name)
        chunks.append(seq)
    if not names:
        raise InputError(f"{source}: reference has no sequence")
    lengths = np.array([len(c) for c in chunks], dtype=np.int64)
    offsets = np.zeros(len(chunks) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    raw = np.frombuffer(b"".join(chunks), dtype=np.uint8)
    if np.any(raw < 33) or np.any(raw > 126):
        raise InputError(f"{source}: sequence holds non-printable bytes")
    codes = ASCII_TO_CODE[raw]
    digest = hashlib.sha1()
    for name, length in zip(names, lengths):
        digest.update(f"{name}\t{length}\n".encode())
    digest.update(codes.tobytes())
    return Reference(names, offsets, codes, digest.hexdigest())


def load_reference(path, cache=True):
    """Read a FASTA or gzipped FASTA file, or its saved copy REF.pymap.ref (written on first use,
    best effort): the contig table and the codes memory-mapped, so a run does not parse the FASTA
    again. The copy is used only while the FASTA's fingerprint (file_fingerprint) is unchanged."""
    path = str(path)
    cached = _load_cached(path) if cache else None
    if cached is not None:
        return cached
    ref = parse_fasta(open_maybe_gzip(path), source=path)
    ref.path = path
    if cache:
        _save_cached(ref, path)
    return ref


#: bumped when the saved copy's content changes meaning
REF_CACHE_VERSION = 1
#: bytes read from each of FINGERPRINT_SAMPLES places of the FASTA for its fingerprint
FINGERPRINT_BLOCK = 1 << 16
FINGERPRINT_SAMPLES = 64


def cache_path(path):
    return f"{path}.pymap.ref"


def file_fingerprint(path):
    """What identifies a FASTA file at a cost that does not grow with it: its size, modification
    time and a CRC32 of FINGERPRINT_SAMPLES blocks spread over it (first and last included)."""
    st = os.stat(path)
    crc = 0
    with open(path, "rb") as fh:
        last = max(0, st.st_size - FINGERPRINT_BLOCK)
        for i in range(FINGERPRINT_SAMPLES):
            fh.seek(last * i // (FINGERPRINT_SAMPLES - 1))
            crc = zlib.crc32(fh.read(FINGERPRINT_BLOCK), crc)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "crc32": crc & 0xFFFFFFFF}


def _load_cached(path):
    from pymap import index as idxfile
    from pymap.errors import IndexCorrupt, IndexMismatch
    copy = cache_path(path)
    if path == "-" or not os.path.isfile(path) or not os.path.exists(copy):
        return None
    try:
        meta, arrays = idxfile.load_index(copy, {"kind": "reference", "version": REF_CACHE_VERSION,
                                                 "fasta": file_fingerprint(path)})
        names, checksum = meta["names"], meta["checksum"]
        offsets, codes = arrays["offsets"], arrays["codes"]
        if (not isinstance(names, list) or not isinstance(checksum, str) or offsets.dtype != np.int64
                or offsets.shape != (len(names) + 1,) or offsets[0] != 0 or np.any(np.diff(offsets) <= 0)
                or codes.dtype != np.uint8 or codes.shape != (offsets[-1],)):
            raise IndexCorrupt(f"{copy}: inconsistent saved reference")
    except (IndexMismatch, IndexCorrupt, KeyError, TypeError, OSError):
        return None          # stale or damaged: the FASTA is read again and the copy rewritten
    return Reference(list(names), offsets, codes, checksum, path)


def _save_cached(ref, path):
    from pymap import index as idxfile
    if path == "-" or not os.path.isfile(path):
        return
    try:
        meta = {"kind": "reference", "version": REF_CACHE_VERSION, "fasta": file_fingerprint(path),
                "names": ref.names, "checksum": ref.checksum}
        idxfile.save_index(cache_path(path), meta, {"offsets": ref.offsets, "codes": ref.codes})
    except OSError:
        pass                 # a read-only directory: later runs parse the FASTA again
