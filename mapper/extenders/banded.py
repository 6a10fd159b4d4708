"""The default extender: banded semi-global edit distance in Numba (kernels.banded)."""
import numpy as np

from pymap.plugins import Extender


def _prepare(read_codes, read_rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_maxe):
    if read_rc_codes is None:
        from pymap.kernels.encoding import reverse_complement_batch
        read_rc_codes = reverse_complement_batch(np.ascontiguousarray(read_codes, np.uint8),
                                                 np.ascontiguousarray(read_offsets, np.int64))
    return (np.ascontiguousarray(read_codes, np.uint8), np.ascontiguousarray(read_rc_codes, np.uint8),
            np.ascontiguousarray(read_offsets, np.int64), np.ascontiguousarray(ref_codes, np.uint8),
            np.ascontiguousarray(c_read, np.int32), np.ascontiguousarray(c_strand, np.int8),
            np.ascontiguousarray(c_pos, np.int64), np.ascontiguousarray(c_lo, np.int64),
            np.ascontiguousarray(c_hi, np.int64), np.ascontiguousarray(c_maxe, np.int32))


class BandedExtender(Extender):
    """Banded semi-global edit distance (bit-parallel Numba, exact within the window; default)."""
    name = "banded"

    def __init__(self):
        pass

    def distances(self, read_codes, read_rc_codes, read_offsets, ref_codes,
                  c_read, c_strand, c_pos, c_lo, c_hi, c_maxe):
        from pymap.kernels.banded import banded_distances
        return banded_distances(*_prepare(read_codes, read_rc_codes, read_offsets, ref_codes,
                                          c_read, c_strand, c_pos, c_lo, c_hi, c_maxe))

    def align(self, read_codes, read_rc_codes, read_offsets, ref_codes,
              c_read, c_strand, c_pos, c_lo, c_hi, c_maxe):
        from pymap.kernels.banded import banded_align
        return banded_align(*_prepare(read_codes, read_rc_codes, read_offsets, ref_codes,
                                      c_read, c_strand, c_pos, c_lo, c_hi, c_maxe))
