"""The minhash seeder: MetaCache's window sketches and top-candidate selection as a candidate generator.

The reference is cut into overlapping windows, each sketched by the s smallest hashes of its canonical
k-mers; a hash table maps each sketch value to the windows (and the k-mer's offset in them) that hold
it. A read is sketched the same way, its sketch values looked up, the hits counted per window, the best
ranges of contiguous windows chosen (MetaCache's top candidates) and each turned into the diagonal most
of its hits agree on. kernels/minhash.py has the algorithm; docs/seeding.md ("minhash seeder") the
measurements behind the defaults.

    >>> from pymap.reference import load_reference
    >>> from pymap.seeders.minhash import MinhashSeeder
    >>> ref = load_reference("ecoli.fa.gz")                       # doctest: +SKIP
    >>> seeder = MinhashSeeder(k=15, sketch=16, window=64)        # doctest: +SKIP
    >>> index = seeder.build_index(ref)                           # doctest: +SKIP
    >>> cands = seeder.candidates(index, batch, max_edits)        # doctest: +SKIP
"""
import numpy as np

from pymap import index as idxfile
from pymap.batch import Candidates
from pymap.errors import IndexCorrupt
from pymap.kernels.minhash import LOAD, MAX_K, MAX_WINDOW, build as build_arrays, query_batch
from pymap.plugins import Seeder, int_option

#: bumped when the index content changes meaning (hashes, layout); part of the mismatch check
INDEX_VERSION = 2
HASH_NAME = "fmix64-canonical/fmix64-slot/linear"

# Defaults: MetaCache's sketch size and bucket cap; k and the window adapted to short reads and measured
# on E. coli and a 30 Mbp genome (docs/seeding.md, "minhash seeder").
DEFAULT_K = 15
DEFAULT_SKETCH = 16
DEFAULT_WINDOW = 48
DEFAULT_BUCKET_CAP = 254
DEFAULT_MAX_CANDS = 16
DEFAULT_MIN_HITS = 1


BUILD_KEYS = ("k", "sketch", "window", "stride", "bucket_cap")


def check_build_params(k, sketch, window, stride, bucket_cap):
    """Validated build parameters (ValueError naming the option)."""
    k = int_option("k", k, 4, MAX_K)
    sketch = int_option("sketch", sketch, 1, 1024)
    window = int_option("window", window, k, MAX_WINDOW)
    stride = int_option("stride", stride, 1)
    if stride > window - k + 1:
        raise ValueError(f"stride must be at most window - k + 1 = {window - k + 1} (a larger stride leaves "
                         f"k-mers in no window), got {stride}")
    bucket_cap = int_option("bucket_cap", bucket_cap, 1, 65535)
    return {"k": k, "sketch": sketch, "window": window, "stride": stride, "bucket_cap": bucket_cap}


class MinhashIndex:
    """A built or loaded minhash index: build parameters (`params`), reference identity and the table
    arrays of kernels/minhash.py (keys, bstart, loc, over_slot, over_count, wstart, wctg)."""

    def __init__(self, params, reference_info, arrays):
        self.params = dict(params)
        self.reference = dict(reference_info)
        self.arrays = arrays
        self._check()

    def _check(self):
        a = self.arrays
        need = ("keys", "bstart", "loc", "over_slot", "over_count", "wstart", "wctg")
        missing = [name for name in need if name not in a]
        if missing:
            raise IndexCorrupt(f"index lacks arrays {missing}")
        keys, bstart, loc = a["keys"], a["bstart"], a["loc"]
        ws, wc, osl, ocn = a["wstart"], a["wctg"], a["over_slot"], a["over_count"]
        lengths = self.reference.get("lengths") or []
        genome = int(sum(lengths))
        ok = (keys.ndim == 1 and keys.shape[0] >= 1 and keys.dtype == np.uint64 and bstart.ndim == 1
              and bstart.shape[0] == keys.shape[0] + 1 and bstart.dtype in (np.uint32, np.uint64)
              and loc.ndim == 2 and loc.shape[1] == 2 and loc.dtype in (np.uint32, np.uint64)
              and ws.ndim == 1 and ws.dtype == np.int64 and wc.ndim == 1
              and wc.dtype == np.int32 and ws.shape == wc.shape and osl.ndim == 1 and osl.dtype == np.int64
              and ocn.shape == osl.shape and ocn.dtype == np.int64)
        if ok:
            starts = bstart
            # bucket bounds ascending from 0 to the number of locations (the kernels slice loc with them)
            ok = (int(starts[0]) == 0 and int(starts[-1]) == loc.shape[0]
                  and bool(np.all(starts[1:] >= starts[:-1])))
        if ok and loc.shape[0]:
            # the kernels index the window table with every location's window
            ok = int(loc[:, 0].max()) < ws.shape[0] and int(loc[:, 1].max() >> 1) < genome
        if ok and ws.shape[0]:
            ok = int(wc.min()) >= 0 and int(wc.max()) < len(lengths) and int(ws.min()) >= 0 \
                and int(ws.max()) < genome
        if not ok:
            raise IndexCorrupt("index arrays are inconsistent (damaged file?); "
                               "rebuild with `pymap index REF`")

    @property
    def nbytes(self):
        return sum(int(x.nbytes) for x in self.arrays.values())

    @property
    def n_keys(self):
        return int(np.count_nonzero(self.arrays["keys"] != np.uint64(0xFFFFFFFFFFFFFFFF)))

    @property
    def n_locations(self):
        return int(self.arrays["loc"].shape[0])

    @property
    def n_windows(self):
        return int(self.arrays["wstart"].shape[0])

    @property
    def n_capped(self):
        """Keys with more locations than bucket_cap (their buckets hold the first bucket_cap)."""
        return int(self.arrays["over_slot"].shape[0])

    def __repr__(self):
        p = self.params
        return (f"MinhashIndex(k={p['k']}, sketch={p['sketch']}, window={p['window']}, stride={p['stride']}, "
                f"windows={self.n_windows}, locations={self.n_locations}, capped keys={self.n_capped}, "
                f"{self.nbytes / 2**20:.1f} MiB)")


class MinhashSeeder(Seeder):
    """Minhash window sketches and top-candidate selection (MetaCache-GPU)."""
    name = "minhash"
    concurrent = True
    #: `--all`: every location within e wanted, so room for many candidates a read
    all_locations_defaults = {"max_cands": 1000}

    def __init__(self, k=None, sketch=None, window=None, stride=None, bucket_cap=None,
                 max_cands=DEFAULT_MAX_CANDS, min_hits=DEFAULT_MIN_HITS):
        self.k = None if k is None else int_option("k", k, 4, MAX_K)
        self.sketch = None if sketch is None else int_option("sketch", sketch, 1, 1024)
        self.window = None if window is None else int_option("window", window, 4, MAX_WINDOW)
        self.stride = None if stride is None else int_option("stride", stride, 1)
        self.bucket_cap = None if bucket_cap is None else int_option("bucket_cap", bucket_cap, 1, 65535)
        self.build_params()                 # the combination must make sense (k <= window, stride, ...)
        self.max_cands = int_option("max_cands", max_cands, 1, 100_000)
        self.min_hits = int_option("min_hits", min_hits, 1)

    # ---------------------------------------------------------------- parameters
    def build_params(self, genome_len=None):
        """The build parameters (stored in the index): explicit options, defaults for the rest (the
        same for every genome length, taken as the other seeders take it)."""
        k = self.k if self.k is not None else DEFAULT_K
        window = self.window if self.window is not None else max(DEFAULT_WINDOW, k)
        stride = self.stride if self.stride is not None else window - k + 1
        p = check_build_params(k, self.sketch if self.sketch is not None else DEFAULT_SKETCH, window, stride,
                               self.bucket_cap if self.bucket_cap is not None else DEFAULT_BUCKET_CAP)
        p.update(hash=HASH_NAME, load=LOAD)
        return p

    # ---------------------------------------------------------------- index
    def index_path(self, ref_path):
        return f"{ref_path}.pymap.minhash.idx"

    def build_index(self, reference):
        p = self.build_params()
        arrays = build_arrays(reference.codes, reference.offsets, p["k"], p["window"], p["stride"],
                              p["sketch"], p["bucket_cap"])
        return MinhashIndex(p, idxfile.reference_info(reference), arrays)

    def save_index(self, index, path):
        idxfile.save_seeder_index(path, self.name, INDEX_VERSION, index.params, index.reference, index.arrays)

    def load_index(self, path, reference, verify=True):
        return idxfile.load_keyed_seeder_index(path, self, INDEX_VERSION, reference, BUILD_KEYS, check_build_params,
                                               HASH_NAME, MinhashIndex, verify)

    # ---------------------------------------------------------------- queries
    def candidates(self, index, batch, max_edits, scores=False):
        """Candidates of a ReadBatch (sorted by read, strand, pos and unique); with scores, also the hit
        count of the window range each came from."""
        n = len(batch)
        if n == 0:
            return (Candidates.empty(), np.empty(0, np.int64)) if scores else Candidates.empty()
        max_edits = np.ascontiguousarray(max_edits, dtype=np.int32)
        if max_edits.shape != (n,):
            raise ValueError(f"max_edits must hold one value per read ({n}), got shape {max_edits.shape}")
        p = index.params
        cat = idxfile.in_read_ranges(batch, max_edits, self.max_cands, lambda codes, offsets, max_e: query_batch(
            codes, offsets, max_e, p["k"], p["window"], p["stride"], p["sketch"], self.min_hits, self.max_cands,
            index.arrays))
        c = Candidates(cat[0], cat[1], cat[2])
        return (c, cat[3]) if scores else c
