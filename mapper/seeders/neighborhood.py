"""The neighborhood seeder: MAROSE's neighborhood index addressed by BDZ perfect hashing.

Every read (both strands) is cut into patterns s_i b_i at a step; each neighborhood b_i and its
degenerated neighborhoods (within e_nb substitutions) are looked up in nb_block(s_i); every hit
position p gives the diagonal p - offset. Diagonals of a read/strand within max_edits of each other
are merged (one candidate per cluster: the diagonal hit by the most patterns). See docs/seeding.md
for the measurements behind the defaults.

    >>> from pymap.reference import load_reference
    >>> from pymap.seeders.neighborhood import NeighborhoodSeeder
    >>> ref = load_reference("ecoli.fa.gz")                       # doctest: +SKIP
    >>> seeder = NeighborhoodSeeder()                             # doctest: +SKIP
    >>> index = seeder.build_index(ref)                           # doctest: +SKIP
    >>> cands = seeder.candidates(index, batch, max_edits)        # doctest: +SKIP
"""
import math

import numpy as np

from pymap.kernels.diagonal_clusters import HIT_BIAS
from pymap.kernels.nbindex_build import build as build_arrays
from pymap.kernels.nbindex_layouts import bsearch_layout, list_layout
from pymap.kernels.nbindex_query import LOOKUPS, compact, edits_to_break, from_counts, query_batch
from pymap.kernels.select import MAPQ_MAX
from pymap.kernels.threads import tally
from pymap import index as idxfile
from pymap.batch import Candidates
from pymap.errors import IndexCorrupt, IndexMismatch
from pymap.plugins import Seeder, choice_option, int_option, resolve_device

#: bumped when the index content changes meaning (hash family, layout); part of the mismatch check
INDEX_VERSION = 2
HASH_RATIO = 1.23
HASH_EXTRA = 1

# Query defaults, chosen by measurement on E. coli with Mason 100 bp reads (docs/seeding.md).
DEFAULT_STEP = 6
DEFAULT_E_NB = 0
DEFAULT_MAX_OCC = 1000
DEFAULT_MAX_CANDS = 64
DEFAULT_MIN_HITS = 1
#: a read whose patterns all have more than max_occ positions is placed from this many of each
#: pattern's positions, evenly spaced (bwa mem samples max_occ occurrences of such seeds likewise)
DEFAULT_SAMPLE_OCC = 64
#: candidate slots (reads x 2 strands x max_cands) of one query call: a batch is queried in parts of
#: at most this many, which bounds the per-read output buffers to 128 MiB
QUERY_SLOTS = 1 << 24
DEFAULT_LOOKUP = "phf"
#: pattern length s+b = ceil(log4(genome length)) + PATTERN_MARGIN (16 for E. coli)
PATTERN_MARGIN = 4
#: seed length = floor(log4(genome length)) - SEED_MARGIN (9 for E. coli: ~18 positions per block)
SEED_MARGIN = 2
MAX_CARE = 13           # 4**13 blocks = 64 Mi rows of the block table


def default_build_params(genome_len):
    """(seed_len, nb_len) for a genome of genome_len bases: the pattern length s+b grows as
    ceil(log4(genome_len)) + PATTERN_MARGIN (few random hits), the seed takes
    floor(log4(genome_len)) - SEED_MARGIN bases (blocks of ~16 positions: a small block table and
    little per-block vertex overhead) and the neighborhood the rest (4..16).
    E. coli (4.6 Mbp): (9, 7); lambda (48.5 kbp): (5, 7); human (3.1 Gbp): (13, 7)."""
    lg = math.log(max(genome_len, 16), 4)
    total = math.ceil(lg) + PATTERN_MARGIN
    ls = int(min(MAX_CARE, max(4, math.floor(lg) - SEED_MARGIN)))
    ln = int(min(16, max(4, total - ls)))
    return ls, ln


def parse_pattern(pattern):
    """'######-##' -> (care offsets int64, span). '#' or '1' = care, '-' or '0' = don't care."""
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"pattern must be a non-empty string of '#' and '-', got {pattern!r}")
    table = {"#": 1, "1": 1, "-": 0, "0": 0, "_": 0}
    bad = [ch for ch in pattern if ch not in table]
    if bad:
        raise ValueError(f"pattern {pattern!r}: unexpected character {bad[0]!r} (use '#' for care, "
                         f"'-' for don't care)")
    care = np.array([i for i, ch in enumerate(pattern) if table[ch]], dtype=np.int64)
    if care.size == 0:
        raise ValueError(f"pattern {pattern!r} has no care position ('#')")
    if care.size > MAX_CARE:
        raise ValueError(f"pattern {pattern!r} has {care.size} care positions, at most {MAX_CARE}")
    return care, len(pattern)


class NeighborhoodIndex:
    """A built or loaded neighborhood index: build parameters (`params`), reference identity and the
    arrays blk, g, slots, pos (kernels/nbindex_build.py documents them). The comparison layouts for
    lookup='bsearch' and 'list' are derived on first use."""

    def __init__(self, params, reference_info, arrays):
        self.params = dict(params)
        self.reference = dict(reference_info)
        self.arrays = arrays
        self.care, self.span = parse_pattern(self.params["pattern"])
        self.ln = int(self.params["nb_len"])
        self._bsearch = None
        self._list = None
        self._check()

    def _check(self):
        a = self.arrays
        need = ("blk", "g", "slots", "pos")
        if any(name not in a for name in need):
            raise IndexCorrupt(f"index lacks arrays {[n for n in need if n not in a]}")
        nblk = 4 ** self.care.size
        blk, g, slots, pos = a["blk"], a["g"], a["slots"], a["pos"]
        ok = (blk.ndim == 2 and blk.shape == (nblk + 1, 2) and slots.ndim == 2 and slots.shape[1] == 2
              and g.ndim == 1 and pos.ndim == 1 and blk.dtype == slots.dtype == pos.dtype
              and g.dtype == np.uint8)
        if ok:
            V = slots.shape[0] - 1
            ok = (int(blk[-1, 0]) == V and g.shape[0] == (V + 3) // 4 and int(slots[-1, 1]) == pos.shape[0])
        if not ok:
            raise IndexCorrupt("index arrays are inconsistent (damaged file?); rebuild with `pymap index REF`")

    @property
    def nbytes(self):
        return sum(int(x.nbytes) for x in self.arrays.values())

    @property
    def n_positions(self):
        return int(self.arrays["pos"].shape[0])

    @property
    def n_vertices(self):
        return int(self.arrays["slots"].shape[0] - 1)

    def layout(self, lookup):
        """(blk_d, dist, pos_nb) for the lookup mode, None where unused: the query kernels select the
        layout by which of them are given, so a run compiles only its own layout's code."""
        slots = self.arrays["slots"]
        blk_d = dist = pos_nb = None
        if lookup == "bsearch":
            if self._bsearch is None:
                self._bsearch = bsearch_layout(self.arrays["blk"], slots)
            blk_d, dist = self._bsearch
        elif lookup == "list":
            if self._list is None:
                self._list = list_layout(slots, self.n_positions)
            pos_nb = self._list
        return blk_d, dist, pos_nb

    def __repr__(self):
        return (f"NeighborhoodIndex(pattern={self.params['pattern']!r}, nb_len={self.ln}, "
                f"positions={self.n_positions}, vertices={self.n_vertices}, {self.nbytes / 2**20:.1f} MiB)")


class NeighborhoodSeeder(Seeder):
    """Neighborhood index with BDZ perfect hashing (MAROSE): seed blocks of right neighborhoods.
    device (cpu, gpu or auto): the 'phf' queries on a CUDA GPU, the index resident there (the same
    candidates; the other lookups stay on the CPU)."""
    name = "neighborhood"
    concurrent = True
    #: `--all`: every location within e, so no step that e edits can defeat and roomy caps
    all_locations_defaults = {"lossless": True, "max_cands": 1000, "max_occ": 20000}

    def __init__(self, seed_len=None, nb_len=None, pattern=None, step=DEFAULT_STEP, e_nb=DEFAULT_E_NB,
                 max_occ=DEFAULT_MAX_OCC, max_cands=DEFAULT_MAX_CANDS, min_hits=DEFAULT_MIN_HITS,
                 lookup=DEFAULT_LOOKUP, lossless=False, sample_occ=DEFAULT_SAMPLE_OCC, device="cpu"):
        self.seed_len = None if seed_len is None else int_option("seed_len", seed_len, 1, MAX_CARE)
        self.nb_len = None if nb_len is None else int_option("nb_len", nb_len, 1, 16)
        if pattern is not None:
            care, span = parse_pattern(pattern)
            pattern = "".join("#" if i in set(care.tolist()) else "-" for i in range(span))
            if seed_len is not None and seed_len != len(pattern):
                raise ValueError(f"seed_len={seed_len} contradicts pattern {pattern!r} (span {len(pattern)}); "
                                 f"give one of them")
        self.pattern = pattern
        self.step = int_option("step", step, 1, 1 << 16)
        self.e_nb = int_option("e_nb", e_nb, 0, 3)
        if self.nb_len is not None and self.e_nb > self.nb_len:
            raise ValueError(f"e_nb ({e_nb}) must not exceed nb_len ({self.nb_len})")
        self.max_occ = int_option("max_occ", max_occ, 1)
        self.sample_occ = int_option("sample_occ", sample_occ, 0, 1 << 20)
        self.max_cands = int_option("max_cands", max_cands, 1, 100_000)
        self.min_hits = int_option("min_hits", min_hits, 1)
        if lookup not in LOOKUPS:
            raise ValueError(f"lookup must be one of {', '.join(LOOKUPS)}, got {lookup!r}")
        self.lookup = lookup
        if not isinstance(lossless, bool):
            raise ValueError(f"lossless must be true or false, got {lossless!r}")
        self.lossless = lossless
        self.device = resolve_device(device) if lookup == "phf" else choice_option("device", device, ("cpu",))
        self.timing = {}               # on the GPU: kernel_ms, cpu_reads (hits over the device buffers)
        self.beyond_guarantee = {}     # (read length, e) -> reads, for lossless runs
        self.stats = {"sampled": 0}    # reads placed from a sample of over-represented patterns' positions

    # ---------------------------------------------------------------- parameters
    def build_params(self, genome_len):
        """The build parameters (stored in the index) for a genome of genome_len bases."""
        auto_ls, auto_ln = default_build_params(genome_len)
        ln = self.nb_len if self.nb_len is not None else auto_ln
        if self.pattern is not None:
            pattern = self.pattern
        else:
            pattern = "#" * (self.seed_len if self.seed_len is not None else auto_ls)
        if self.e_nb > ln:
            raise ValueError(f"e_nb ({self.e_nb}) must not exceed nb_len ({ln})")
        care, span = parse_pattern(pattern)
        return {"pattern": pattern, "seed_len": span, "care": int(care.size), "nb_len": int(ln),
                "hash": "jenkins-lookup2", "vertex_ratio": HASH_RATIO, "vertex_extra": HASH_EXTRA}

    def _explicit_params(self):
        out = {}
        if self.pattern is not None:
            out["pattern"] = self.pattern
        elif self.seed_len is not None:
            out["pattern"] = "#" * self.seed_len
        if self.nb_len is not None:
            out["nb_len"] = self.nb_len
        return out

    # ---------------------------------------------------------------- index
    def index_path(self, ref_path):
        return f"{ref_path}.pymap.idx"

    def build_index(self, reference):
        genome_len = int(reference.codes.shape[0])
        params = self.build_params(genome_len)
        care, span = parse_pattern(params["pattern"])
        arrays = build_arrays(reference.codes, reference.offsets, care, span, params["nb_len"],
                              ratio=HASH_RATIO, extra=HASH_EXTRA)
        return NeighborhoodIndex(params, idxfile.reference_info(reference), arrays)

    def save_index(self, index, path):
        idxfile.save_seeder_index(path, self.name, INDEX_VERSION, index.params, index.reference, index.arrays)

    def load_index(self, path, reference, verify=True):
        def check(params):
            parse_pattern(params.get("pattern"))
            int_option("nb_len", params.get("nb_len"), 1, 16)
            return params
        params, info, arrays = idxfile.load_seeder_index(path, self.name, INDEX_VERSION, reference,
                                                         self._explicit_params(), check, verify)
        if self.e_nb > params["nb_len"]:
            raise ValueError(f"e_nb ({self.e_nb}) must not exceed the index's nb_len ({params['nb_len']})")
        try:
            return NeighborhoodIndex(params, info, arrays)
        except IndexCorrupt as exc:
            raise IndexCorrupt(f"{path}: {exc}") from None
        except (ValueError, KeyError) as exc:
            raise IndexMismatch(f"{path}: unusable index parameters ({exc}); rebuild with `pymap index REF`") \
                from None

    # ---------------------------------------------------------------- queries
    def candidates(self, index, batch, max_edits):
        batch.with_rc()
        n = len(batch)
        if n == 0:
            return Candidates.empty()
        max_edits = np.ascontiguousarray(max_edits, dtype=np.int32)
        if max_edits.shape != (n,):
            raise ValueError(f"max_edits must hold one value per read ({n}), got shape {max_edits.shape}")
        if self.e_nb > index.ln:
            raise ValueError(f"e_nb ({self.e_nb}) must not exceed the index's nb_len ({index.ln})")
        if n and int(np.max(np.diff(batch.offsets))) >= HIT_BIAS:
            raise ValueError(f"reads must be shorter than {HIT_BIAS} bases for the neighborhood seeder")
        if self.lossless:
            self._count_beyond_guarantee(index, np.diff(batch.offsets), max_edits)
        read, strand, pos = self._query(index, batch, max_edits, self.device, 0)
        cap = None
        if self.sample_occ:
            # reads without candidates: where their patterns were all over max_occ (repeat arrays,
            # satellites), a sample of those positions places them, at MAPQ 0 (more copies exist)
            empty = np.flatnonzero(np.bincount(read, minlength=n) == 0)
            if empty.size:
                more = self._query(index, batch.subset(empty), max_edits[empty], "cpu", self.sample_occ)
                read, strand, pos = idxfile.with_requeried(read, strand, pos, empty, more)
                sampled = np.unique(empty[more[0]])
                cap = np.full(n, MAPQ_MAX, np.int64)
                cap[sampled] = 0
                tally(self.stats, "sampled", int(sampled.size))
        return Candidates(read, strand, pos, mapq_cap=cap)

    def _query(self, index, batch, max_edits, device, sample):
        """(read, strand, pos) of the index query, sorted by read (query_batch; sample as there)."""
        n = len(batch)
        blk_d, dist, pos_nb = index.layout(self.lookup)
        a = index.arrays
        offsets = np.ascontiguousarray(batch.offsets, dtype=np.int64)
        codes = batch.codes
        rc = batch.rc_codes
        mc = self.max_cands
        sub = max(1, QUERY_SLOTS // (2 * mc))
        parts = []
        for r0 in range(0, n, sub):
            r1 = min(n, r0 + sub)
            offs = offsets[r0:r1 + 1] - offsets[r0]
            sl = slice(int(offsets[r0]), int(offsets[r1]))
            m = r1 - r0
            if device == "gpu":
                from pymap.kernels.nbindex_cuda import query_batch_cuda
                # the batch's own arrays, whatever the part: the device copy the filter and the
                # extender use too (resident keys on the array), not a second one of each part's view
                counts, found = query_batch_cuda(codes, rc, offsets, max_edits, index.care, index.span, index.ln,
                                                 self.step, self.lossless, self.e_nb, self.max_occ, mc,
                                                 self.min_hits, a["blk"], a["g"], a["slots"], a["pos"],
                                                 timing=self.timing, reads=(r0, r1))
                parts.append(from_counts(counts, found, r0))
                continue
            out_pos = np.empty(2 * m * mc, np.int64)
            out_cnt = np.zeros(2 * m, np.int64)
            query_batch(codes[sl], rc[sl], offs, max_edits[r0:r1], index.care, index.span, index.ln,
                        self.step, self.lossless, self.e_nb, self.max_occ, mc, self.min_hits,
                        a["blk"], a["g"], a["slots"], a["pos"], blk_d, dist, pos_nb, out_pos, out_cnt, sample)
            parts.append(compact(out_pos, out_cnt, mc, r0))
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))

    def guaranteed_edits(self, index, length):
        """The most edits a read of `length` bases may have and still keep an exact pattern at
        step 1 (the lossless limit of this index's pattern length, before caps)."""
        return int(edits_to_break(int(length), index.span + index.ln, 1)) - 1

    def _count_beyond_guarantee(self, index, lengths, max_edits):
        pairs, counts = np.unique(np.stack([lengths, max_edits], axis=1), axis=0, return_counts=True)
        for (length, e), count in zip(pairs.tolist(), counts.tolist()):
            if e > self.guaranteed_edits(index, length):
                k = (length, e)
                tally(self.beyond_guarantee, k, count)

    def run_notes(self):
        notes = []
        if self.stats["sampled"]:
            notes.append(f"{self.stats['sampled']} read(s) had only patterns with more than max_occ positions "
                         f"(repeat arrays): seeded from {self.sample_occ} of each pattern's positions, MAPQ 0")
        if not self.beyond_guarantee:
            return notes
        n = sum(self.beyond_guarantee.values())
        (length, e), _ = max(self.beyond_guarantee.items(), key=lambda kv: kv[1])
        return notes + [f"{n} read(s) have more edits allowed than this index's patterns can guarantee to find "
                        f"(e.g. e={e} in {length} bp); they were searched at step 1 but some locations may be "
                        f"missed: build the index with a smaller --seeder-opt nb_len for complete results"]
