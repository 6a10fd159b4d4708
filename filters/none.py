"""The `none` filter: accepts every pair."""
import numpy as np

from pymap.plugins import Filter, check_pairs


class NoFilter(Filter):
    """Accept every pair (estimate 0); the extender does all the work."""
    name = "none"
    concurrent = True
    accepts_all = True          # the mapper skips measuring a threshold allowance (pymap.slack)

    def filter_pairs(self, reads, refs, max_edits):
        reads, refs = check_pairs(reads, refs)
        n = reads.shape[0]
        return np.ones(n, dtype=np.bool_), np.zeros(n, dtype=np.int32)
