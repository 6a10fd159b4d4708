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
    """
    codes: np.ndarray
    offsets: np.ndarray
    names: np.ndarray
    name_offsets: np.ndarray
    quals: np.ndarray
    first_index: int = 0
    rc_codes: np.ndarray = field(default=None, repr=False)

    def __len__(self):
        return self.offsets.shape[0] - 1

    @property
    def lengths(self):
        return np.diff(self.offsets).astype(np.int32)

    def name(self, i):
        return bytes(self.names[self.name_offsets[i]:self.name_offsets[i + 1]]).decode("ascii", "replace")

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
    """
    read: np.ndarray    # int32
    strand: np.ndarray  # int8
    pos: np.ndarray     # int64

    def __len__(self):
        return self.read.shape[0]

    def take(self, mask_or_index):
        return Candidates(self.read[mask_or_index], self.strand[mask_or_index], self.pos[mask_or_index])

    @staticmethod
    def empty():
        return Candidates(np.empty(0, np.int32), np.empty(0, np.int8), np.empty(0, np.int64))
