"""Filter `qgram`: the q-gram lemma (Jokinen & Ukkonen 1991) as a pre-alignment filter.

Two strings of length L within E edits share at least L + 1 - q(E + 1) q-grams (each edit destroys
at most q of the L - q + 1 q-grams of either string), counted as the multiset intersection of
their q-grams. A q-gram holding a character other than ACGT (any case) never counts as shared; as
Edlib compares raw bytes ('N' equals 'N'), the bound is lowered by the q-grams lost that way
(the smaller count of the two strings), so no pair within E is ever rejected.

Everything is NumPy over the whole (n, L) batch: q passes build the q-gram codes, one sort per
row orders them, and one np.intersect1d counts the shared occurrences of all rows at once.
"""
import numpy as np

from pymap.plugins import Filter, check_pairs

#: ASCII byte -> 0..3 for A, C, G, T (either case), 4 for anything else
_CODE = np.full(256, 4, np.uint8)
for _i, _b in enumerate(b"ACGT"):
    _CODE[_b] = _i
    _CODE[_b + 32] = _i

_MAX_Q = 12                 # 4**12 codes: keys stay far inside int64
_CHUNK = 1 << 22            # q-gram occurrences per chunk of rows (bounds the temporaries)


def qgram_codes(seqs, q):
    """(n, L) uint8 ASCII -> (codes int64 (n, m), invalid bool (n, m)), m = L - q + 1: the q-gram
    starting at column j packed 2 bits per base, invalid where it holds a non-ACGT character."""
    c = _CODE[seqs]
    m = c.shape[1] - q + 1
    codes = np.zeros((c.shape[0], m), np.int64)
    invalid = np.zeros((c.shape[0], m), np.bool_)
    for t in range(q):                       # q passes over the batch, no loop over pairs
        col = c[:, t:t + m]
        codes = codes * 4 + (col & 3)
        invalid |= col == 4
    return codes, invalid


def _occurrence_keys(codes, invalid, sentinel, base):
    """One int64 key per q-gram occurrence, (row, q-gram, k-th occurrence in its row), sorted.
    Invalid q-grams get `sentinel` (different for reads and references, so they never meet)."""
    n, m = codes.shape
    s = np.sort(np.where(invalid, sentinel, codes), axis=1)
    col = np.arange(m)
    new = np.ones((n, m), np.bool_)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    rank = col - np.maximum.accumulate(np.where(new, col, 0), axis=1)
    return ((np.arange(n, dtype=np.int64)[:, None] * base + s) * m + rank).ravel()


def shared_qgrams(reads, refs, q):
    """(shared int64[n], lost int64[n]): the multiset intersection size of the valid q-grams of
    each pair, and min(invalid q-grams of the read, of the reference)."""
    n, length = reads.shape
    m = length - q + 1
    shared = np.zeros(n, np.int64)
    lost = np.zeros(n, np.int64)
    base = 4 ** q + 2
    step = max(1, _CHUNK // max(m, 1))
    for a in range(0, n, step):              # chunks of rows, not pairs
        b = min(n, a + step)
        rc, ri = qgram_codes(reads[a:b], q)
        fc, fi = qgram_codes(refs[a:b], q)
        common = np.intersect1d(_occurrence_keys(rc, ri, 4 ** q, base),
                                _occurrence_keys(fc, fi, 4 ** q + 1, base), assume_unique=True)
        shared[a:b] = np.bincount(common // (base * m), minlength=b - a)
        lost[a:b] = np.minimum(ri.sum(axis=1), fi.sum(axis=1))
    return shared, lost


class QGramFilter(Filter):
    """q-gram lemma (Jokinen-Ukkonen): accept iff the pair shares >= L+1-q(E+1) q-grams (option q)."""
    name = "qgram"

    def __init__(self, q=4):
        if isinstance(q, bool) or not isinstance(q, (int, np.integer)) or not 1 <= q <= _MAX_Q:
            raise ValueError(f"option 'q' must be an integer from 1 to {_MAX_Q}, not {q!r}")
        self.q = int(q)

    def filter_pairs(self, reads, refs, max_edits):
        reads, refs = check_pairs(reads, refs)
        e = int(max_edits)
        if e < 0:
            raise ValueError(f"max_edits must be >= 0, not {max_edits!r}")
        n, length = reads.shape
        q = self.q
        if length < q:                       # no q-gram at all: nothing to filter on
            return np.ones(n, np.bool_), np.zeros(n, np.int32)
        shared, lost = shared_qgrams(reads, refs, q)
        accept = shared >= length + 1 - q * (e + 1) - lost
        # the lemma read backwards: d >= (L + 1 - lost - shared) / q - 1, a lower bound on edits
        bound = np.maximum(0, -((shared + lost - length - 1) // q) - 1)
        estimate = np.where(accept, bound, -1).astype(np.int32)
        return accept, estimate
