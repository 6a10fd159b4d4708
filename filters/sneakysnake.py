"""The `sneakysnake` filter: SneakySnake (Alser et al., Bioinformatics 2020) on the CPU (Numba)."""
import numpy as np

from pymap.filters.shouji import _int_option, _threshold, _undefined_option
from pymap.kernels.sneakysnake import sneakysnake_batch
from pymap.plugins import Filter, check_pairs


class SneakySnakeFilter(Filter):
    """SneakySnake: greedy longest-diagonal-run path through the 2E+1 diagonals, counting obstacles."""
    name = "sneakysnake"
    concurrent = True

    def __init__(self, kmer_size=0, iterations=0, undefined="accept"):
        # 0 = the read length: the authors' short-read setting (one partition, IterationNo = L)
        self.kmer_size = _int_option("sneakysnake", "kmer_size", kmer_size, 0)
        self.iterations = _int_option("sneakysnake", "iterations", iterations, 0)
        # accept: pairs with non-ACGT characters pass unfiltered (estimate -2), case folded;
        # compare: raw characters compared like the authors' C code (N matches N, case-sensitive)
        self._compare = _undefined_option("sneakysnake", undefined)
        self.undefined = undefined

    def filter_pairs(self, reads, refs, max_edits):
        reads, refs = check_pairs(reads, refs)
        e = _threshold(max_edits)
        n, length = reads.shape
        if length == 0:
            return np.ones(n, np.bool_), np.zeros(n, np.int32)
        return sneakysnake_batch(reads, refs, e, self.kmer_size, self.iterations, self._compare)
