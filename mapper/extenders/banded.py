"""The edit-distance extender: banded semi-global edit distance in Numba (kernels.banded); --all uses it."""
import numpy as np

from pymap.batch import Alignments
from pymap.plugins import Extender, resolve_device

OP_I, OP_S = 1, 4


def clip_end_insertions(found, edits, cigar, cigar_offsets):
    """Read bases that run past a contig end come out of the kernel as a leading or trailing
    insertion (there is no reference base to align them to); SAM tools expect them soft-clipped,
    as bwa and minimap2 write them. Turns such I ops into S and takes them out of the edit count
    (NM counts the aligned part only). In place; returns edits."""
    has = np.flatnonzero(found & (cigar_offsets[1:] > cigar_offsets[:-1]))
    for at in (cigar_offsets[:-1][has], cigar_offsets[1:][has] - 1):
        ops = cigar[at]
        end_ins = (ops & 0xF) == OP_I
        cigar[at[end_ins]] = (ops[end_ins] & ~np.uint32(0xF)) | np.uint32(OP_S)
        edits[has[end_ins]] -= (ops[end_ins] >> 4).astype(edits.dtype)
    return edits


class BandedExtender(Extender):
    """Banded semi-global edit distance (bit-parallel Numba, exact within the window; --all default).

    With traceback, read bases past a contig end are soft-clipped and not counted (distances
    without traceback count them as insertions). device: cpu, gpu or auto (the same routine on a
    CUDA GPU, the same results)."""
    name = "banded"
    concurrent = True
    scoring = "edits"

    def __init__(self, device="cpu"):
        self.device = resolve_device(device)
        self.timing = {}                 # on the GPU: kernel_ms, the kernel's time (CUDA events)

    def extend(self, cands, traceback=False):
        if self.device == "gpu":
            from pymap.kernels.banded_cuda import banded_cuda
            out = banded_cuda(*cands.arrays(), traceback=traceback, timing=self.timing)
        else:
            from pymap.kernels.banded import banded_align, banded_distances
            out = (banded_align if traceback else banded_distances)(*cands.arrays())
        if traceback:
            dist, start, cigar, cigar_offsets = out
            cigar = np.array(cigar, dtype=np.uint32)             # writable: the clipping edits it
            dist = clip_end_insertions(dist >= 0, np.array(dist), cigar, cigar_offsets)
        else:
            dist, start = out
            cigar = cigar_offsets = None
        return Alignments(found=dist >= 0, score=-dist, edits=dist, start=start, cigar=cigar,
                          cigar_offsets=cigar_offsets)
