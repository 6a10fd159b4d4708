"""The `shouji` filter: Shouji (Alser et al., Bioinformatics 2019) on the CPU (Numba, batch-parallel)."""
import numpy as np

from pymap.kernels.shouji import shouji_batch
from pymap.plugins import Filter, PluginError, check_pairs


def _int_option(plugin, option, value, minimum):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise PluginError(f"{plugin} option {option!r} must be an integer >= {minimum}, got {value!r}")
    return int(value)


UNDEFINED_CHOICES = ("accept", "compare")


def _undefined_option(plugin, value):
    """The `undefined` option -> the kernels' compare flag (False: accept, True: compare)."""
    if not isinstance(value, str) or value not in UNDEFINED_CHOICES:
        names = ", ".join(repr(c) for c in UNDEFINED_CHOICES)
        raise PluginError(f"{plugin} option 'undefined' must be one of {names}, got {value!r}")
    return value == "compare"


def _threshold(max_edits):
    e = int(max_edits)
    if e < 0:
        raise ValueError(f"max_edits must be >= 0, got {max_edits!r}")
    return e


class ShoujiFilter(Filter):
    """Shouji: sliding-window search for the longest common subsequences of the 2E+1 diagonals."""
    name = "shouji"
    concurrent = True

    def __init__(self, window=4, undefined="accept"):
        self.window = _int_option("shouji", "window", window, 1)
        # accept: pairs with non-ACGT characters pass unfiltered (estimate -2), case folded;
        # compare: raw characters compared like the authors' C code (N matches N, case-sensitive)
        self._compare = _undefined_option("shouji", undefined)
        self.undefined = undefined

    def filter_pairs(self, reads, refs, max_edits):
        reads, refs = check_pairs(reads, refs)
        e = _threshold(max_edits)
        n, length = reads.shape
        if length == 0:
            return np.ones(n, np.bool_), np.zeros(n, np.int32)
        return shouji_batch(reads, refs, e, self.window, self._compare)
