"""The arrays that flow between stages: a batch of reads and its candidates."""
from dataclasses import dataclass, field

import numpy as np


@dataclass
class ReadBatch:
    """A batch of reads as concatenated arrays.

    codes: uint8 mapping codes (A=0 C=1 G=2 T=3, other 4) of every read, concatenated.
    rc_codes: reverse complement of each read, same layout (filled lazily by `with_rc`).
    offsets: int64[n+1], read i is codes[offsets[i]:offsets[i+1]].
    names: uint8 bytes of every read name concatenated, read i's at names[name_offsets[i]:...].
    quals: uint8 ASCII qualities concatenated like codes (empty array for FASTA reads).
    first_index: global index of read 0 in the input (deterministic tie-breaking).
    comments: uint8 header comments (after the name and its blanks) concatenated like names, read i's
    at comments[comment_offsets[i]:...]; None when the input gave none (FASTA, or a batch made by hand).
    """
    codes: np.ndarray
    offsets: np.ndarray
    names: np.ndarray
    name_offsets: np.ndarray
    quals: np.ndarray
    first_index: int = 0
    rc_codes: np.ndarray = field(default=None, repr=False)
    comments: np.ndarray = field(default=None, repr=False)
    comment_offsets: np.ndarray = field(default=None, repr=False)

    def __len__(self):
        return self.offsets.shape[0] - 1

    @property
    def lengths(self):
        return np.diff(self.offsets).astype(np.int32)

    def name(self, i):
        return bytes(self.names[self.name_offsets[i]:self.name_offsets[i + 1]]).decode("ascii", "replace")

    def subset(self, index):
        """A ReadBatch of the reads at `index` (names and qualities included; first_index is kept, so
        it is not for tie-breaking, which needs each read's input number)."""
        from pymap.kernels.text import gather_ranges
        index = np.asarray(index, np.int64)
        codes, offsets = gather_ranges(self.codes, self.offsets[index], self.offsets[index + 1])
        names, name_offsets = gather_ranges(self.names, self.name_offsets[index], self.name_offsets[index + 1])
        quals = (gather_ranges(self.quals, self.offsets[index], self.offsets[index + 1])[0]
                 if self.quals.size else self.quals)
        sub = ReadBatch(codes, offsets, names, name_offsets, quals, self.first_index)
        if self.comments is not None:
            sub.comments, sub.comment_offsets = gather_ranges(self.comments, self.comment_offsets[index],
                                                              self.comment_offsets[index + 1])
        if self.rc_codes is not None:
            sub.rc_codes = gather_ranges(self.rc_codes, self.offsets[index], self.offsets[index + 1])[0]
        return sub

    def with_rc(self):
        if self.rc_codes is None:
            from pymap.kernels.encoding import reverse_complement_batch
            self.rc_codes = reverse_complement_batch(self.codes, self.offsets)
        return self


@dataclass
class Candidates:
    """Candidate locations: (read index within batch, strand, global reference position).

    strand 0: the read aligns forward; 1: its reverse complement aligns forward.
    pos: global coordinate of the first base of the (oriented) read on the diagonal; may lie
    outside the contig when the seed sits near an end (the pipeline clamps windows).
    Sorted by (read, strand, pos) and unique.
    mapq_cap: optional, per read of the batch, the highest MAPQ its seeding supports (a seeder that
    leaves out over-represented seeds sets it for reads seeded through few of theirs: other copies
    may have been missed); None: no cap.
    """
    read: np.ndarray    # int32
    strand: np.ndarray  # int8
    pos: np.ndarray     # int64
    mapq_cap: np.ndarray = None

    def __len__(self):
        return self.read.shape[0]

    def take(self, mask_or_index):
        return Candidates(self.read[mask_or_index], self.strand[mask_or_index], self.pos[mask_or_index])

    @staticmethod
    def empty():
        return Candidates(np.empty(0, np.int32), np.empty(0, np.int8), np.empty(0, np.int64))


@dataclass
class CandidateBatch:
    """What a filter or an extender works on: a batch of reads, the reference, and candidates.

    Candidate i pairs read `read[i]` (its reverse complement when `strand[i]` is 1) with the
    reference around global position `pos[i]` (where the oriented read's first base sits on the
    candidate's diagonal). `lo[i]`, `hi[i]` bound its contig: nothing outside [lo, hi) is reference.
    `max_edits[i]` is the threshold the stage must honour for that candidate: a filter must not
    reject a pair whose global edit distance is within it, an extender reports alignments within it.
    `min_score[i]` (optional, scoring extenders): the mapper needs no alignment scoring below it, so
    an extender may stop early and report none (it may also ignore it).

    reads: the ReadBatch (codes, rc_codes, offsets), ref_codes: the reference's mapping codes.
    """
    reads: ReadBatch
    ref_codes: np.ndarray
    read: np.ndarray        # int32
    strand: np.ndarray      # int8
    pos: np.ndarray         # int64
    lo: np.ndarray          # int64
    hi: np.ndarray          # int64
    max_edits: np.ndarray   # int32
    min_score: np.ndarray = None    # int64 or None: a scoring extender may report nothing below it
    bands: np.ndarray = None        # int32 or None: per candidate, a band a scoring extender widens to

    def __post_init__(self):
        self.reads.with_rc()
        self.read = np.ascontiguousarray(self.read, np.int32)
        self.strand = np.ascontiguousarray(self.strand, np.int8)
        self.pos = np.ascontiguousarray(self.pos, np.int64)
        self.lo = np.ascontiguousarray(self.lo, np.int64)
        self.hi = np.ascontiguousarray(self.hi, np.int64)
        self.max_edits = np.ascontiguousarray(self.max_edits, np.int32)
        n = self.read.shape[0]
        for name in ("strand", "pos", "lo", "hi", "max_edits"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"CandidateBatch.{name} must hold {n} values")

    def __len__(self):
        return self.read.shape[0]

    @property
    def lengths(self):
        """Read length of every candidate (int64)."""
        offs = self.reads.offsets
        return (offs[1:] - offs[:-1])[self.read]

    def arrays(self):
        """The plain arrays the kernels take, in their order: read_codes, rc_codes, read_offsets,
        ref_codes, read, strand, pos, lo, hi, max_edits."""
        r = self.reads
        return (r.codes, r.rc_codes, r.offsets, self.ref_codes, self.read, self.strand, self.pos,
                self.lo, self.hi, self.max_edits)

    def take(self, index):
        return CandidateBatch(self.reads, self.ref_codes, self.read[index], self.strand[index], self.pos[index],
                              self.lo[index], self.hi[index], self.max_edits[index],
                              None if self.min_score is None else self.min_score[index],
                              None if self.bands is None else self.bands[index])

    def with_max_edits(self, max_edits):
        return CandidateBatch(self.reads, self.ref_codes, self.read, self.strand, self.pos, self.lo, self.hi,
                              max_edits)

    def band(self, band=None):
        """Per candidate, the band w of a scoring extender: `band` when given, else
        max(max_edits, MIN_BAND), or `bands` where wider (the mapper's second try of a read split by
        a long indel); its window is [pos - w, pos + L + w) clamped to [lo, hi)."""
        if band is not None:
            w = np.full(len(self), int(band), np.int32)
        else:
            w = np.maximum(self.max_edits, MIN_BAND).astype(np.int32)
        return w if self.bands is None else np.maximum(w, self.bands).astype(np.int32)


#: the narrowest band of the scoring extenders: an indel of up to 16 bases fits whatever e is
MIN_BAND = 16
#: the widest band of the second try of a read split by a long indel (bwa mem's -w)
WIDE_BAND = 100


@dataclass
class Alignments:
    """An extender's answer, one entry per candidate.

    found: bool, an alignment exists (edit-distance extenders: within the candidate's max_edits;
    scoring extenders: with a score of at least their minimum);
    score: int32, larger is better (AS; the edit-distance extenders report -edits);
    edits: int32, edit distance over the aligned part (NM; clipped bases do not count);
    start: int64, global reference position of the first aligned (not clipped) base;
    cigar, cigar_offsets: with traceback only: BAM-style uint32 ops (length << 4 | op; M=0 I=1 D=2
    S=4), candidate i's at cigar[cigar_offsets[i]:cigar_offsets[i + 1]], empty when not found.
    Entries where found is False carry no meaning.
    """
    found: np.ndarray
    score: np.ndarray
    edits: np.ndarray
    start: np.ndarray
    cigar: np.ndarray = None
    cigar_offsets: np.ndarray = None

    def __len__(self):
        return self.found.shape[0]

    @staticmethod
    def join(parts):
        """The entries of every Alignments in parts, in turn (CIGARs included when all have them), each
        array joined once."""
        if len(parts) == 1:
            return parts[0]
        cat = lambda name: np.concatenate([getattr(a, name) for a in parts])   # noqa: E731
        out = Alignments(cat("found"), cat("score"), cat("edits"), cat("start"))
        if all(a.cigar is not None for a in parts):
            out.cigar = cat("cigar")
            ends = np.cumsum([0] + [a.cigar_offsets[-1] for a in parts[:-1]])
            out.cigar_offsets = np.concatenate([parts[0].cigar_offsets[:1]]
                                               + [a.cigar_offsets[1:] + e for a, e in zip(parts, ends)])
        return out

    def take(self, index):
        """A subset, without the CIGARs."""
        return Alignments(self.found[index], self.score[index], self.edits[index], self.start[index])
