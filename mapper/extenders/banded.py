"""The edit-distance extender: banded semi-global edit distance in Numba (kernels.banded); --all uses it."""
from pymap.batch import Alignments
from pymap.plugins import Extender


class BandedExtender(Extender):
    """Banded semi-global edit distance (bit-parallel Numba, exact within the window; --all default)."""
    name = "banded"
    scoring = "edits"

    def extend(self, cands, traceback=False):
        from pymap.kernels.banded import banded_align, banded_distances
        if traceback:
            dist, start, cigar, cigar_offsets = banded_align(*cands.arrays())
        else:
            dist, start = banded_distances(*cands.arrays())
            cigar = cigar_offsets = None
        return Alignments(found=dist >= 0, score=-dist, edits=dist, start=start, cigar=cigar,
                          cigar_offsets=cigar_offsets)
