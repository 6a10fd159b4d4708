"""Seeder `kmer`: an exact k-mer index (sorted packed k-mers and their positions) in NumPy.

Index: every k-mer of the reference that lies inside one contig and holds no N, packed 2 bits per
base into an int64, sorted (stable, so the positions of one k-mer stay increasing), saved with
np.savez to REF.kmer{k}.npz together with the reference's checksum.

Query: the k-mers starting every `step` bases of each read, on both strands, are looked up with
np.searchsorted; each hit at reference position p from read offset j votes for the diagonal
p - j. Each (read, strand) keeps its `max_cands` diagonals with the most votes. k-mers with more
than `max_occ` positions are skipped (repeats). All steps run on whole batches.
"""
import os
import zipfile

import numpy as np

from pymap.batch import Candidates
from pymap.errors import IndexCorrupt, IndexMismatch
from pymap.plugins import Seeder

FORMAT = 1                  # bumped when the file's content changes meaning


def _int_option(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise ValueError(f"option {name!r} must be an integer from {lo} to {hi}, not {value!r}")
    return int(value)


def pack_kmers(codes, starts, k):
    """Packed k-mers (int64) of codes[s:s+k] for each start, and whether each holds an N (code 4).
    The caller guarantees s + k <= len(codes)."""
    kmers = np.zeros(starts.shape[0], np.int64)
    has_n = np.zeros(starts.shape[0], np.bool_)
    for t in range(k):                       # k passes over all starts, no loop over reads
        c = codes[starts + t]
        kmers = (kmers << 2) | (c & 3).astype(np.int64)
        has_n |= c > 3
    return kmers, has_n


class KmerIndex:
    """kmers int64[n] sorted, positions int64[n] (global reference coordinates), k, checksum."""

    def __init__(self, kmers, positions, k, checksum):
        self.kmers, self.positions, self.k, self.checksum = kmers, positions, int(k), str(checksum)

    def __repr__(self):
        return f"KmerIndex(k={self.k}, kmers={self.kmers.shape[0]})"


class KmerSeeder(Seeder):
    """Exact k-mer index (sorted packed k-mers, np.searchsorted); options k, step, max_occ, max_cands."""
    name = "kmer"
    #: under `pymap align --all` (every location within e): every k-mer and many more candidates
    all_locations_defaults = {"step": 1, "max_cands": 1000}

    def __init__(self, k=15, step=4, max_occ=1000, max_cands=16):
        self.k = _int_option("k", k, 4, 31)
        self.step = _int_option("step", step, 1, 1000)
        self.max_occ = _int_option("max_occ", max_occ, 1, 1 << 30)
        self.max_cands = _int_option("max_cands", max_cands, 1, 100_000)
        self.skipped = 0                     # k-mer lookups above max_occ, for run_notes()

    # ------------------------------------------------------------------ index
    def index_path(self, ref_path):
        return f"{ref_path}.kmer{self.k}.npz"

    def build_index(self, reference):
        codes, offsets, k = reference.codes, reference.offsets, self.k
        # starts whose k-mer stays inside its contig
        starts = np.arange(max(codes.shape[0] - k + 1, 0), dtype=np.int64)
        ctg = np.searchsorted(offsets, starts, side="right") - 1
        starts = starts[starts + k <= offsets[ctg + 1]]
        kmers, has_n = pack_kmers(codes, starts, k)
        kmers, starts = kmers[~has_n], starts[~has_n]
        order = np.argsort(kmers, kind="stable")
        return KmerIndex(kmers[order], starts[order], k, reference.checksum)

    def save_index(self, index, path):
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "wb") as fh:          # a file object: np.savez adds no suffix
            np.savez(fh, kmers=index.kmers, positions=index.positions,
                     k=np.int64(index.k), format=np.int64(FORMAT), checksum=np.array(index.checksum))
        os.replace(tmp, path)                # the index appears only when complete

    def load_index(self, path, reference):
        try:
            with np.load(path, allow_pickle=False) as z:
                kmers, positions = z["kmers"], z["positions"]
                k, fmt, checksum = int(z["k"]), int(z["format"]), str(z["checksum"])
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise IndexCorrupt(f"{path}: not a readable kmer index ({exc})") from None
        if fmt != FORMAT or k != self.k:
            raise IndexMismatch(f"{path}: kmer index format {fmt}, k={k}; "
                                f"expected format {FORMAT}, k={self.k}")
        if reference is not None and checksum != reference.checksum:
            raise IndexMismatch(f"{path}: kmer index of another reference (checksum differs)")
        if kmers.shape != positions.shape or kmers.ndim != 1 or np.any(kmers[1:] < kmers[:-1]):
            raise IndexCorrupt(f"{path}: kmer index arrays are damaged")
        return KmerIndex(kmers.astype(np.int64), positions.astype(np.int64), k, checksum)

    # ------------------------------------------------------------------ queries
    def candidates(self, index, batch, max_edits):
        batch.with_rc()
        n, k = len(batch), self.k
        lengths = batch.lengths.astype(np.int64)
        # sampled offsets j = 0, step, 2 step, ... <= L - k of every read, as flat arrays
        per_read = np.where(lengths >= k, (lengths - k) // self.step + 1, 0)
        read = np.repeat(np.arange(n, dtype=np.int64), per_read)
        first = np.cumsum(per_read) - per_read
        j = (np.arange(read.shape[0]) - first[read]) * self.step
        starts = batch.offsets[:-1][read] + j
        reads, strands, diags = [], [], []
        for strand, codes in ((0, batch.codes), (1, batch.rc_codes)):
            kmers, has_n = pack_kmers(codes, starts, k)
            lo = np.searchsorted(index.kmers, kmers, side="left")
            hi = np.searchsorted(index.kmers, kmers, side="right")
            occ = np.where(has_n, 0, hi - lo)
            self.skipped += int(np.count_nonzero(occ > self.max_occ))
            occ[occ > self.max_occ] = 0
            # one row per hit: the lookup it came from and its index entry
            src = np.repeat(np.arange(occ.shape[0]), occ)
            entry = lo[src] + np.arange(src.shape[0]) - (np.cumsum(occ) - occ)[src]
            reads.append(read[src])
            strands.append(np.full(src.shape[0], strand, np.int64))
            diags.append(index.positions[entry] - j[src])
        read, strand, diag = (np.concatenate(x) for x in (reads, strands, diags))
        if read.shape[0] == 0:
            return Candidates.empty()
        # votes per distinct (read, strand, diagonal)
        order = np.lexsort((diag, strand, read))
        read, strand, diag = read[order], strand[order], diag[order]
        new = np.ones(read.shape[0], np.bool_)
        new[1:] = (read[1:] != read[:-1]) | (strand[1:] != strand[:-1]) | (diag[1:] != diag[:-1])
        first = np.flatnonzero(new)
        votes = np.diff(np.append(first, read.shape[0]))
        read, strand, diag = read[first], strand[first], diag[first]
        # the max_cands best-voted diagonals of each (read, strand); ties: the smaller diagonal
        order = np.lexsort((diag, -votes, strand, read))
        read, strand, diag = read[order], strand[order], diag[order]
        group = np.ones(read.shape[0], np.bool_)
        group[1:] = (read[1:] != read[:-1]) | (strand[1:] != strand[:-1])
        idx = np.arange(read.shape[0])
        rank = idx - np.maximum.accumulate(np.where(group, idx, 0))
        keep = rank < self.max_cands
        read, strand, diag = read[keep], strand[keep], diag[keep]
        order = np.lexsort((diag, strand, read))    # the contract: sorted by (read, strand, pos)
        return Candidates(read[order].astype(np.int32), strand[order].astype(np.int8),
                          diag[order].astype(np.int64))

    def run_notes(self):
        if not self.skipped:
            return []
        return [f"{self.skipped} k-mer lookups skipped: more than max_occ={self.max_occ} positions"]
