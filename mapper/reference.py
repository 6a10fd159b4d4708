"""The reference: contigs as one global array of mapping codes with contig boundaries."""
import gzip
import hashlib
import os
import re
import sys
import zlib
from dataclasses import dataclass

import numpy as np

from pymap.errors import InputError
from pymap.kernels.encoding import ASCII_TO_CODE
from pymap.kernels.packed_ref import LazyCodes, pack


@dataclass
class Reference:
    """names: contig names (str); offsets: int64[n+1] global start of each contig;
    codes: uint8 mapping codes of all contigs concatenated (non-ACGT is 4);
    checksum: hex digest of the names and sequences (identifies the reference for an index);
    fasta: file_fingerprint of the FASTA it was read from (None: not from a file);
    index: the index file it was taken from (None: read from the FASTA);
    lazy: LazyCodes when the codes are decoded on demand from an index's packed copy (see ensure)."""
    names: list
    offsets: np.ndarray
    codes: np.ndarray
    checksum: str
    path: str = None
    fasta: dict = None
    index: str = None
    lazy: "LazyCodes" = None

    @property
    def lengths(self):
        return np.diff(self.offsets)

    def __len__(self):
        return len(self.names)

    @property
    def on_demand(self):
        """True when the codes are decoded on demand (ensure does something)."""
        return self.lazy is not None

    def ensure(self, starts, ends):
        """Make codes[starts[i]:ends[i]] readable for every i (arrays of global positions, clamped to
        the genome). A no-op unless the codes are decoded on demand (a large reference loaded from its
        index): every stage that reads the reference works inside windows its caller ensured."""
        if self.lazy is not None:
            self.lazy.ensure(starts, ends)

    def decode_all(self):
        """Make every code readable (a seeder's index build reads the whole sequence)."""
        if self.lazy is not None:
            self.lazy.decode_all()

    def trim_wanted(self):
        """True when the decoded part of a reference decoded on demand passes DECODED_LIMIT bytes."""
        return self.lazy is not None and self.lazy.over(DECODED_LIMIT)

    def trim(self):
        """With no batch in flight: drop the decoded blocks of a reference decoded on demand once they
        exceed DECODED_LIMIT bytes (a no-op otherwise)."""
        if self.lazy is not None:
            self.lazy.trim(DECODED_LIMIT)

    def contig_of(self, pos):
        """Contig index holding each global position (array)."""
        return np.searchsorted(self.offsets, pos, side="right") - 1


def _read_fasta_file(path):
    """read_fasta on a plain or gzip file (a plain one's size preallocates the codes)."""
    try:
        with open(path, "rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
            fh.seek(0)
            if gz:
                with gzip.GzipFile(fileobj=fh) as stream:
                    return read_fasta(stream, path)
            return read_fasta(fh, path, size_hint=os.fstat(fh.fileno()).st_size)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except (EOFError, OSError, zlib.error) as exc:
        raise InputError(f"{path}: damaged gzip data ({exc})") from None


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


#: bytes of FASTA text handled at a time: the reader's memory is the codes plus a few of these
READ_CHUNK = 1 << 24
_SKIP = np.zeros(256, bool)
_SKIP[[9, 10, 13, 32]] = True          # tab, newline, CR and space inside sequence lines


def parse_fasta(data, source="reference"):
    """FASTA bytes -> Reference (see read_fasta)."""
    import io
    return read_fasta(io.BytesIO(data), source, size_hint=len(data))


def read_fasta(fh, source="reference", size_hint=None):
    """A FASTA stream -> Reference, read in chunks of READ_CHUNK bytes: memory is the codes (one
    byte per base; with size_hint, the file size, allocated once) plus a few chunks, not several
    copies of the file. The first word of a header line is the contig name; empty contigs are
    left out (@SQ cannot hold LN:0), with a note on stderr."""
    out = np.empty(size_hint if size_hint is not None else 0, np.uint8)
    filled = 0
    names, starts = [], []
    pending, first, at_line_start = b"", True, True
    while True:
        data = fh.read(READ_CHUNK)
        buf = pending + data
        if not data:
            if not buf:
                break
            buf += b"\n"
        cut = buf.rfind(b"\n") + 1
        if cut == 0 and not (at_line_start and buf[:1] == b">"):
            cut = len(buf)           # a piece of one long (unwrapped) sequence line: take it whole
        lines, pending = buf[:cut], buf[cut:]
        if first and lines.strip():
            if b"\x00" in lines[:65536]:
                raise InputError(f"{source}: not a FASTA file (binary data)")
            if not lines.lstrip().startswith(b">"):
                raise InputError(f"{source}: not a FASTA file (first line does not start with '>')")
            first = False
        codes, heads, at = _sequence_of(lines, source, at_line_start)
        at_line_start = lines.endswith(b"\n") if lines else at_line_start
        for head, pos in zip(heads, at):
            names.append(head)
            starts.append(filled + pos)
        if filled + codes.size > out.size:
            out = np.concatenate([out[:filled], np.empty(max(codes.size, filled), np.uint8)])
        out[filled:filled + codes.size] = codes
        filled += codes.size
        if not data:
            break
    if first:
        raise InputError(f"{source}: empty reference")
    return _reference(names, np.array(starts + [filled], np.int64), out[:filled], source)


def _sequence_of(lines, source, at_line_start=True):
    """(codes of the sequence bytes, header lines, where each header's contig starts in the codes) of
    FASTA text cut after a newline (or a piece of one long sequence line). at_line_start: the text
    begins a line (else its first bytes continue the previous piece's line)."""
    arr = np.frombuffer(lines, np.uint8)
    if arr.size == 0:
        return arr, [], []
    nl = np.flatnonzero(arr == 10)
    line_starts = np.concatenate([[0] if at_line_start else [], nl + 1]).astype(np.int64)
    line_starts = line_starts[line_starts < arr.size]
    hs = line_starts[arr[line_starts] == 62]                                            # '>'
    he = nl[np.searchsorted(nl, hs)] if hs.size else hs
    inside = np.zeros(arr.size + 1, np.int32)
    np.add.at(inside, hs, 1)
    np.add.at(inside, he + 1, -1)
    keep = (np.cumsum(inside[:-1]) == 0) & ~_SKIP[arr]
    seq = arr[keep]
    if seq.size and (seq.min() < 33 or seq.max() > 126):
        raise InputError(f"{source}: sequence holds non-printable bytes")
    before = np.concatenate([[0], np.cumsum(keep)])
    heads = [bytes(arr[a + 1:b]) for a, b in zip(hs, he)]
    return ASCII_TO_CODE[seq], heads, before[hs].tolist()


def _reference(heads, starts, codes, source):
    """Reference from header lines, the start of each one's sequence in codes, and the codes."""
    names, seen, keep, empty = [], set(), [], []
    for i, header in enumerate(heads):
        words = header.split()
        if not words:
            raise InputError(f"{source}: a FASTA header has no name (record {i + 1})")
        if any(c < 33 or c > 126 for c in words[0]):
            raise InputError(f"{source}: contig name {words[0].decode('ascii', 'replace')!r} holds a control or "
                             f"non-ASCII character (SAM allows printable ASCII only)")
        name = words[0].decode("ascii")
        if name in seen:
            raise InputError(f"{source}: duplicate contig name {name!r}")
        seen.add(name)
        if starts[i + 1] == starts[i]:
            empty.append(name)
            continue
        names.append(name)
        keep.append(i)
    if not names:
        raise InputError(f"{source}: reference has no sequence")
    if empty:
        # nothing to map to, and @SQ cannot hold LN:0 (samtools faidx leaves them out too)
        shown = ", ".join(empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
        print(f"[pymap] note: {source}: contig(s) without bases left out of the header: {shown}", file=sys.stderr)
    keep = np.array(keep)
    offsets = np.zeros(len(names) + 1, np.int64)
    np.cumsum(starts[keep + 1] - starts[keep], out=offsets[1:])
    digest = hashlib.sha1()
    for name, length in zip(names, np.diff(offsets)):
        digest.update(f"{name}\t{length}\n".encode())
    digest.update(memoryview(codes))
    return Reference(names, offsets, codes, digest.hexdigest())


def load_reference(path, index_paths=()):
    """The reference of a FASTA or gzipped FASTA file. It is taken from the first of `index_paths`
    that carries it packed and was built from this very file (same file_fingerprint: a check whose
    cost does not grow with the genome); otherwise the FASTA is read."""
    path = str(path)
    for index_path in index_paths:
        ref = from_index(path, index_path)
        if ref is not None:
            return ref
    ref = _read_fasta_file(path)
    ref.path = path
    if path != "-" and os.path.isfile(path):
        ref.fasta = file_fingerprint(path)
    return ref


#: what the SAM specification allows as a reference name (RNAME, @SQ SN)
SAM_NAME = re.compile(r"[0-9A-Za-z!#$%&+./:;?@^_|~-][0-9A-Za-z!#$%&*+./:;=?@^_|~-]*")


def note_unusual_names(names, source):
    """A note on stderr for contig names the SAM specification does not allow (a comma, brackets,
    quotes, a leading * or =): pymap writes them as they are, as bwa mem does, but some tools that
    read the SAM (samtools region strings, Picard, GATK) may refuse or misread them."""
    odd = [n for n in names if not SAM_NAME.fullmatch(n)]
    if odd:
        shown = ", ".join(repr(n) for n in odd[:3]) + (f" and {len(odd) - 3} more" if len(odd) > 3 else "")
        print(f"[pymap] note: {source}: contig name(s) the SAM specification does not allow, written as they "
              f"are: {shown}", file=sys.stderr)


#: bytes read from each of FINGERPRINT_SAMPLES places of the FASTA for its fingerprint
FINGERPRINT_BLOCK = 1 << 16
FINGERPRINT_SAMPLES = 64
#: references up to this many bases are decoded whole when loaded from an index; longer ones block by
#: block as candidates reach them (Reference.ensure)
EAGER_BASES = 1 << 28
#: bytes of memory pages that decoded blocks may occupy between batches (past it they are decoded afresh)
DECODED_LIMIT = 1 << 30


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


def packed_arrays(reference):
    """The arrays an index stores the reference in: {"ref_pac", "ref_amb"} (kernels/packed_ref.py)."""
    if reference.lazy is not None:
        return {"ref_pac": reference.lazy.pac, "ref_amb": reference.lazy.amb}
    pac, amb = pack(reference.codes)
    return {"ref_pac": pac, "ref_amb": amb}


def from_index(path, index_path):
    """The Reference kept in an index file built from the FASTA at path, or None (no such index, one
    of another file or an older pymap, damaged, or not pymap's container at all, as a third-party
    seeder's own: the FASTA is read instead)."""
    from pymap import index as idxfile
    from pymap.errors import IndexCorrupt, IndexMismatch
    if path == "-" or not os.path.isfile(path) or not os.path.isfile(index_path):
        return None
    try:
        with open(index_path, "rb") as fh:
            if fh.read(len(idxfile.MAGIC)) != idxfile.MAGIC:
                return None
        meta, _ = idxfile.read_header(index_path)
        if not isinstance(meta, dict) or meta.get("fasta") != file_fingerprint(path):
            return None
        meta, arrays = idxfile.load_index(index_path, only=("ref_pac", "ref_amb"), random_access=("ref_pac",))
        contigs, checksum = meta.get("contigs"), meta.get("reference_checksum")
        names, lengths = contigs["names"], contigs["lengths"]
        pac, amb = arrays["ref_pac"], arrays["ref_amb"]
        offsets = np.zeros(len(names) + 1, np.int64)
        np.cumsum(np.asarray(lengths, np.int64), out=offsets[1:])
        n = int(offsets[-1])
        if (not isinstance(checksum, str) or len(names) != len(lengths) or not names
                or np.any(offsets[1:] <= offsets[:-1]) or pac.dtype != np.uint8 or pac.shape != ((n + 3) // 4,)
                or amb.dtype != np.int64 or amb.ndim != 2 or amb.shape[1] != 2
                or (amb.size and (amb[0, 0] < 0 or amb[-1, 1] > n or np.any(amb[:, 1] <= amb[:, 0])
                                  or np.any(amb[1:, 0] < amb[:-1, 1])))):
            raise IndexCorrupt(f"{index_path}: inconsistent packed reference")
    except IndexCorrupt as exc:
        print(f"[pymap] {exc}; reading {path} instead", file=sys.stderr)
        return None
    except (IndexMismatch, KeyError, TypeError, ValueError, OSError):
        return None
    lazy = LazyCodes(pac, amb, n)
    if n <= EAGER_BASES:
        lazy.decode_all()
        return Reference(list(names), offsets, lazy.codes, checksum, path, meta.get("fasta"), index_path)
    return Reference(list(names), offsets, lazy.codes, checksum, path, meta.get("fasta"), index_path, lazy)
