"""The minimizer seeder: (w, m) minimizers with a signature rule, every occurrence indexed, diagonals
clustered into candidates.

Minimizers are those of kernels/minimizers.py (canonical m-mers, the RapidGKC signature rule, so that
low-complexity m-mers such as AAA... are never chosen; windows of w consecutive m-mers), every tied
minimum of a window kept so that both strands share them. The index (kernels/minimizer_index.py) stores
every occurrence (position, orientation) under its minimizer, up to rescue_occ occurrences (a minimizer
with more keeps only its count). Seeding masks minimizers with more than max_occ occurrences; a read
whose minimizers are mostly or all masked is seeded again with those up to rescue_occ (as minimap2's
max_max_occ: a read inside a repeat family still reaches its own copy); a read still without candidates
whose minimizers hit keys over rescue_occ is placed from the evenly spaced sample of occurrences the index
keeps of such keys (kernels/minimizer_index.py SAMPLE_KEPT), at MAPQ 0, as bwa mem samples the
occurrences of over-frequent seeds (reads made of telomere or satellite repeats). A read is cut into the same
minimizers (a stretch of w + m - 1 bases shared with the reference always shares one), each hit gives a
diagonal on a strand, and the diagonals are clustered as in the neighborhood seeder
(kernels/diagonal_clusters.py). docs/seeding.md ("minimizer seeder") has the measurements behind the
defaults.

    >>> from pymap.reference import load_reference
    >>> from pymap.seeders.minimizer import MinimizerSeeder
    >>> ref = load_reference("ecoli.fa.gz")                       # doctest: +SKIP
    >>> seeder = MinimizerSeeder(w=8)                             # doctest: +SKIP
    >>> index = seeder.build_index(ref)                           # doctest: +SKIP
    >>> cands = seeder.candidates(index, batch, max_edits)        # doctest: +SKIP
    >>> cands, rep = seeder.candidates(index, batch, max_edits, repeats=True)   # doctest: +SKIP
    >>> rep["masked"]      # per read: minimizers that hit a masked (over-represented) key  # doctest: +SKIP
"""
import math

import numpy as np

from pymap import index as idxfile
from pymap.batch import Candidates
from pymap.errors import IndexCorrupt, IndexMismatch
from pymap.kernels.diagonal_clusters import HIT_BIAS
from pymap.kernels.minimizer_index import (ORDERS, build as build_arrays, flag_of, low_bits_of, query_batch,
                                           table_consistent, wide_values)
from pymap.kernels.minimizers import RULES
from pymap.kernels.select import MAPQ_MAX
from pymap.kernels.threads import tally
from pymap.plugins import Seeder, choice_option, int_option, resolve_device

#: bumped when the index content changes meaning (hash, layout); part of the mismatch check
INDEX_VERSION = 4
HASH_NAME = "mm2-hash64/bucketed-sorted"

# Defaults measured on E. coli, the 30 Mbp genome and the divergent sets (docs/seeding.md).
DEFAULT_W = 8
DEFAULT_RULE = "rapidgkc"
DEFAULT_ORDER = "lex"
DEFAULT_MAX_OCC = 1000
DEFAULT_RESCUE_OCC = 4096
#: reads seeded again with the keys up to rescue_occ keep up to this many times max_cands candidates
RESCUE_CANDS = 4
DEFAULT_MAX_CANDS = 64
DEFAULT_MIN_HITS = 1
DEFAULT_MIN_FRAC = 0.2
#: m = ceil(log4(genome length)) + M_MARGIN, made odd (upwards), within M_MIN..M_MAX
M_MARGIN = 1
M_MIN = 11
M_MAX = 27


BUILD_KEYS = ("m", "w", "rule", "order", "rescue_occ")


def default_m(genome_len):
    """m for a genome of genome_len bases: ceil(log4(genome_len)) + M_MARGIN, odd, in M_MIN..M_MAX.
    E. coli (4.6 Mbp): 13; 30 Mbp: 15; 1 Gbp: 17; human (3.1 Gbp): 17."""
    m = math.ceil(math.log(max(genome_len, 16), 4)) + M_MARGIN
    m += 1 - m % 2
    return int(min(M_MAX, max(M_MIN, m)))


def _m_option(m):
    m = int_option("m", m, 3, M_MAX)
    if m % 2 == 0:
        raise ValueError(f"m must be odd (an even m-mer can be its own reverse complement, whose strand is "
                         f"undefined), got {m}")
    return m


def check_build_params(m, w, rule, order, rescue_occ):
    """Validated build parameters (ValueError naming the option)."""
    return {"m": _m_option(m), "w": int_option("w", w, 1, 255), "rule": choice_option("rule", rule, RULES),
            "order": choice_option("order", order, ORDERS),
            "rescue_occ": int_option("rescue_occ", rescue_occ, 1, 1 << 31)}


def repeat_mapq_cap(seeds, masked):
    """Per read, the highest MAPQ its seeds support: 60 while at most half of its minimizers were masked
    repeats (keys over max_occ, left out of the index), then down in proportion to the share that was
    not, to 0 when all were: the copies such a read has elsewhere may not be among its candidates."""
    seeds = np.asarray(seeds, np.int64)
    unmasked = seeds - np.asarray(masked, np.int64)
    return np.where(seeds > 0, np.minimum(2 * MAPQ_MAX * unmasked // np.maximum(seeds, 1), MAPQ_MAX), MAPQ_MAX)


class MinimizerIndex:
    """A built or loaded minimizer index: build parameters (`params`), reference identity and the arrays
    of kernels/minimizer_index.py (bucket, keys, val, val_hi, multi, multi_hi)."""

    def __init__(self, params, reference_info, arrays):
        self.params = dict(params)
        self.reference = dict(reference_info)
        self.arrays = arrays
        self._check()

    def _check(self):
        """Every array the kernels index with is in range (a damaged index must not crash them)."""
        a = self.arrays
        need = ("bucket", "keys", "val", "val_hi", "multi", "multi_hi")
        missing = [name for name in need if name not in a]
        if missing:
            raise IndexCorrupt(f"index lacks arrays {missing}")
        if not self._consistent(a):
            raise IndexCorrupt("index arrays are inconsistent (damaged file?); "
                               "rebuild with `pymap index REF`")

    def _consistent(self, a):
        bucket, keys, val, multi = a["bucket"], a["keys"], a["val"], a["multi"]
        val_hi, multi_hi = a["val_hi"], a["multi_hi"]
        m = int(self.params["m"])
        genome = int(sum(self.reference.get("lengths") or []))
        if not all(x.ndim == 1 for x in (bucket, keys, val, val_hi, multi, multi_hi)):
            return False
        if bucket.dtype not in (np.uint32, np.uint64) or keys.dtype not in (np.uint16, np.uint32, np.uint64) \
                or val.dtype != np.uint32 or multi.dtype != np.uint32 or val_hi.dtype != np.uint8 \
                or multi_hi.dtype != np.uint8:
            return False
        nb = bucket.shape[0] - 1
        if nb < 1 or nb & (nb - 1) or nb.bit_length() - 1 > min(2 * m, 30):
            return False
        return bool(table_consistent(bucket, keys, val, val_hi, multi, multi_hi, flag_of(wide_values(a)),
                                     int(self.params["rescue_occ"]), genome, low_bits_of(a, m)))

    @property
    def nbytes(self):
        return sum(int(x.nbytes) for x in self.arrays.values())

    @property
    def n_keys(self):
        return int(self.arrays["keys"].shape[0])

    def _records(self):
        a = self.arrays
        wide = wide_values(a)
        flag = flag_of(wide)

        def values(lo, hi, at=slice(None)):
            v = lo[at].astype(np.int64)
            return v | (hi[at].astype(np.int64) << 32) if wide else v
        v = values(a["val"], a["val_hi"])
        rec = v[(v & flag) != 0] & ~flag
        return rec, values(a["multi"], a["multi_hi"], rec)

    @property
    def n_occurrences(self):
        """Occurrences stored (those of keys over rescue_occ not counted)."""
        _, counts = self._records()
        return self.n_keys - counts.size + int(counts[counts <= int(self.params["rescue_occ"])].sum())

    @property
    def masked_counts(self):
        """Occurrence counts of the keys stored without occurrences (over rescue_occ; int64, key order)."""
        _, counts = self._records()
        return counts[counts > int(self.params["rescue_occ"])]

    @property
    def n_masked(self):
        return int(self.masked_counts.size)

    def __repr__(self):
        p = self.params
        return (f"MinimizerIndex(m={p['m']}, w={p['w']}, rule={p['rule']!r}, order={p['order']!r}, "
                f"keys={self.n_keys}, occurrences={self.n_occurrences}, masked keys={self.n_masked}, "
                f"{self.nbytes / 2**20:.1f} MiB)")


class MinimizerSeeder(Seeder):
    """Signature-restricted (w, m) minimizers, all occurrences indexed, hits chained by diagonal.
    device (cpu, gpu or auto): the queries on a CUDA GPU, the table resident there (the same candidates)."""
    name = "minimizer"
    concurrent = True
    #: `--all`: every location within e wanted: room for many candidates a read, none dropped for weak support
    all_locations_defaults = {"max_cands": 1000, "min_frac": 0.0}

    def __init__(self, m=None, w=None, rule=None, order=None, max_occ=DEFAULT_MAX_OCC, rescue_occ=None,
                 max_cands=DEFAULT_MAX_CANDS, min_hits=DEFAULT_MIN_HITS, min_frac=DEFAULT_MIN_FRAC, sample=True,
                 device="cpu"):
        self.m = None if m is None else _m_option(m)
        self.w = None if w is None else int_option("w", w, 1, 255)
        self.rule = None if rule is None else choice_option("rule", rule, RULES)
        self.order = None if order is None else choice_option("order", order, ORDERS)
        self.max_occ = int_option("max_occ", max_occ, 1, 1 << 31)
        self.rescue_occ = None if rescue_occ is None else int_option("rescue_occ", rescue_occ, 1, 1 << 31)
        if (self.rule or DEFAULT_RULE) != "none" and self.m is not None and self.m < 3:
            raise ValueError(f"signature rules need m >= 3, got m={self.m} (use rule=none)")
        self.max_cands = int_option("max_cands", max_cands, 1, 100_000)
        self.min_hits = int_option("min_hits", min_hits, 1)
        if isinstance(min_frac, bool) or not isinstance(min_frac, (int, float, np.integer, np.floating)) \
                or not 0 <= float(min_frac) <= 1:
            raise ValueError(f"min_frac must be a number in 0..1, got {min_frac!r}")
        self.min_frac = float(min_frac)
        if not isinstance(sample, bool):
            raise ValueError(f"sample must be true or false, got {sample!r}")
        self.sample = sample
        self.device = resolve_device(device)
        self.timing = {}               # on the GPU: kernel_ms, cpu_reads (hits over the device buffers)
        self.stats = {"reads": 0, "no_minimizer": 0, "all_masked": 0, "rescued": 0, "mostly_masked": 0,
                      "sampled": 0}

    # ---------------------------------------------------------------- parameters
    def build_params(self, genome_len):
        """The build parameters (stored in the index): explicit options, defaults for the rest."""
        p = check_build_params(self.m if self.m is not None else default_m(genome_len),
                               self.w if self.w is not None else DEFAULT_W,
                               self.rule if self.rule is not None else DEFAULT_RULE,
                               self.order if self.order is not None else DEFAULT_ORDER,
                               self.rescue_occ if self.rescue_occ is not None
                               else max(DEFAULT_RESCUE_OCC, self.max_occ))
        p["hash"] = HASH_NAME
        return p

    # ---------------------------------------------------------------- index
    def index_path(self, ref_path):
        return f"{ref_path}.pymap.minimizer.idx"

    def build_index(self, reference):
        p = self.build_params(int(reference.codes.shape[0]))
        arrays = build_arrays(reference.codes, reference.offsets, p["m"], p["w"], RULES[p["rule"]],
                              ORDERS[p["order"]], p["rescue_occ"])
        return MinimizerIndex(p, idxfile.reference_info(reference), arrays)

    def save_index(self, index, path):
        idxfile.save_seeder_index(path, self.name, INDEX_VERSION, index.params, index.reference, index.arrays)

    def load_index(self, path, reference, verify=True):
        index = idxfile.load_keyed_seeder_index(path, self, INDEX_VERSION, reference, BUILD_KEYS,
                                                check_build_params, HASH_NAME, MinimizerIndex, verify)
        if self.max_occ > index.params["rescue_occ"]:
            raise IndexMismatch(f"{path}: the index keeps occurrences of minimizers seen up to "
                                f"{index.params['rescue_occ']} times, max_occ={self.max_occ} needs more; "
                                f"{idxfile.REBUILD_HINT}")
        return index

    # ---------------------------------------------------------------- queries
    def candidates(self, index, batch, max_edits, repeats=False):
        """Candidates of a ReadBatch (sorted by read, strand, pos and unique). With repeats, also a dict
        of per-read int64 arrays: `seeds` (minimizers of the read), `masked` (those whose key was masked
        at build time: more than max_occ occurrences in the reference) and `masked_max` (the largest
        such count): a read whose seeds are mostly masked repeats is not unique even when its few
        other seeds hit one locus."""
        n = len(batch)
        if n == 0:
            c = Candidates.empty()
            z = np.zeros(0, np.int64)
            return (c, {"seeds": z, "masked": z, "masked_max": z}) if repeats else c
        max_edits = np.ascontiguousarray(max_edits, dtype=np.int32)
        if max_edits.shape != (n,):
            raise ValueError(f"max_edits must hold one value per read ({n}), got shape {max_edits.shape}")
        if int(np.max(np.diff(batch.offsets))) >= HIT_BIAS:
            raise ValueError(f"reads must be shorter than {HIT_BIAS} bases for the minimizer seeder")
        p = index.params
        mask_occ = min(self.max_occ, p["rescue_occ"])

        def query_with(max_occ, max_cands, device, sample=False):
            def query(codes, offsets, max_e):
                args = (codes, offsets, max_e, p["m"], p["w"], RULES[p["rule"]], ORDERS[p["order"]], max_occ,
                        self.min_hits, self.min_frac, max_cands, index.arrays)
                if device == "gpu":
                    from pymap.kernels.minimizer_index_cuda import query_batch_cuda
                    read, strand, pos, rep = query_batch_cuda(*args, timing=self.timing)
                else:
                    read, strand, pos, rep = query_batch(*args, sample=sample)
                return (read, strand, pos, *rep)
            return query
        cat = idxfile.in_read_ranges(batch, max_edits, self.max_cands,
                                     query_with(mask_occ, self.max_cands, self.device))
        read, strand, pos, seeds, masked, masked_max = cat
        ncand = np.bincount(read, minlength=n)
        cap = repeat_mapq_cap(seeds, masked)
        # reads seeded by a minority of their minimizers (the rest masked), or by none: seeded again with
        # the keys up to rescue_occ, so that a read inside a repeat family reaches its own copy
        redo = np.flatnonzero((masked > 0) & ((ncand == 0) | (2 * masked > seeds)))
        if redo.size and p["rescue_occ"] > mask_occ:
            wide = RESCUE_CANDS * self.max_cands       # a family's copies outnumber a unique read's hits
            more = idxfile.in_read_ranges(batch.subset(redo), max_edits[redo], wide,
                                          query_with(p["rescue_occ"], wide, self.device))
            read, strand, pos = idxfile.with_requeried(read, strand, pos, redo, more)
            none = redo[ncand[redo] == 0]
            tally(self.stats, "rescued", int(np.isin(none, redo[more[0]]).sum()))
            cap[none] = 0            # their copies may outnumber the candidates a read can have
        # reads still without candidates, their minimizers masked beyond rescue_occ: placed from the
        # sample the index keeps of each such key (on the CPU, whatever the device)
        left = np.flatnonzero((masked > 0) & (np.bincount(read, minlength=n) == 0))
        if left.size and self.sample:
            wide = RESCUE_CANDS * self.max_cands
            more = idxfile.in_read_ranges(batch.subset(left), max_edits[left], wide,
                                          query_with(p["rescue_occ"], wide, "cpu", sample=True))
            read, strand, pos = idxfile.with_requeried(read, strand, pos, left, more)
            placed = np.unique(left[more[0]])
            tally(self.stats, "sampled", int(placed.size))
            cap[placed] = 0
        c = Candidates(read, strand, pos, mapq_cap=cap)
        self._count(seeds, masked, ncand)
        if repeats:
            return c, {"seeds": seeds, "masked": masked, "masked_max": masked_max}
        return c

    def _count(self, seeds, masked, ncand):
        s = self.stats
        tally(s, "reads", int(seeds.shape[0]))
        tally(s, "no_minimizer", int(np.count_nonzero(seeds == 0)))
        tally(s, "all_masked", int(np.count_nonzero((seeds > 0) & (masked == seeds))))
        tally(s, "mostly_masked", int(np.count_nonzero((ncand > 0) & (2 * masked > seeds))))

    def run_notes(self):
        s = self.stats
        notes = []
        if self.timing.get("cpu_reads"):
            from pymap.kernels.minimizer_index_cuda import HIT_CAPACITIES
            notes.append(f"{self.timing['cpu_reads']} read(s) had more seed hits than the GPU's widest pass holds "
                         f"({HIT_CAPACITIES[-1]}): seeded on the CPU")
        if s["all_masked"]:
            notes.append(f"{s['all_masked']} read(s) had only over-represented minimizers (more than max_occ "
                         f"occurrences in the reference)")
        if s["rescued"]:
            notes.append(f"{s['rescued']} read(s) without candidates from their other minimizers were seeded "
                         f"by those with up to rescue_occ occurrences (MAPQ 0: more copies may exist)")
        if s["sampled"]:
            notes.append(f"{s['sampled']} read(s) had only minimizers with more than rescue_occ occurrences "
                         f"(repeat arrays): seeded from the sample of their occurrences the index keeps, MAPQ 0")
        if s["mostly_masked"]:
            notes.append(f"{s['mostly_masked']} read(s) had most of their minimizers masked (repeats): seeded "
                         f"again with those up to rescue_occ occurrences; as copies over rescue_occ may be "
                         f"missing, their MAPQ is capped by the share of their minimizers that were not masked")
        return notes
