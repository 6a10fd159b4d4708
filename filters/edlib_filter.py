"""The `edlib` filter: exact, accept iff Edlib's global (NW) edit distance is at most E."""
import edlib
import numpy as np

from pymap.plugins import Filter, check_pairs


class EdlibFilter(Filter):
    """Exact filter: Edlib global edit distance <= E (the ground truth for every other filter)."""
    name = "edlib"
    concurrent = True

    def filter_pairs(self, reads, refs, max_edits):
        reads, refs = check_pairs(reads, refs)
        n = reads.shape[0]
        accept = np.zeros(n, dtype=np.bool_)
        estimate = np.full(n, -1, dtype=np.int32)
        k = int(max_edits)
        # Edlib is a C library called once per pair; it is the slow exact reference, not a hot path.
        for i in range(n):
            d = edlib.align(reads[i].tobytes(), refs[i].tobytes(), mode="NW", task="distance", k=k)["editDistance"]
            if 0 <= d <= k:
                accept[i] = True
                estimate[i] = d
        return accept, estimate
