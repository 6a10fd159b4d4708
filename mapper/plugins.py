"""Plugin contracts and the registry (entry-point groups pymap.seeders, pymap.filters, pymap.extenders).

Built-in stages are registered through the same entry points as third-party ones. Every plugin class
takes its options as keyword arguments (validated in __init__, raising ValueError naming the option),
and has a class attribute `name` and a one-line docstring that `pymap plugins` prints.
"""
from importlib.metadata import entry_points

import numpy as np

GROUPS = {"seeder": "pymap.seeders", "filter": "pymap.filters", "extender": "pymap.extenders"}


class PluginError(ValueError):
    """Unknown plugin or bad plugin option (a usage error)."""


class Seeder:
    """Finds candidate locations of reads. Owns its index (build, save, load).

    all_locations_defaults: options used under `--all` (every location within e wanted) unless the
    user sets them; run_notes(): lines for the end-of-run summary (e.g. limits that were hit)."""
    name = None
    all_locations_defaults = {}

    def run_notes(self):
        return []

    def index_path(self, ref_path):
        """Where the index for this reference is kept."""
        raise NotImplementedError

    def build_index(self, reference):
        """Build an index for a `pymap.reference.Reference`."""
        raise NotImplementedError

    def save_index(self, index, path):
        raise NotImplementedError

    def load_index(self, path, reference):
        """Load an index; raise pymap.errors.IndexMismatch / IndexCorrupt when it does not fit."""
        raise NotImplementedError

    def candidates(self, index, batch, max_edits):
        """Candidates (pymap.batch.Candidates) for a ReadBatch; max_edits is int32[n] per read."""
        raise NotImplementedError


class Filter:
    """A pre-alignment filter: accept/reject (read, reference segment) pairs of equal length.

    filter_pairs(reads, refs, max_edits) takes two uint8 arrays of shape (n, L) holding ASCII
    bases and an int threshold E, and returns (accept: bool[n], estimate: int32[n]) where the
    estimate is the filter's edit estimate when accepted, -1 when rejected and -2 for an
    undefined pair (a non-ACGT character; accepted without filtering).

    mapper_slack: how many edits beyond e the mapper allows this filter, because a read aligned
    semi-globally within e can be further than e from the equal-length segment (one edit per indel
    at most). None: e, safe for any filter that never rejects a pair within its threshold by the
    global edit distance; a filter that measured safe with less says so (AlignOptions.filter_slack).
    """
    name = None
    mapper_slack = None

    def filter_pairs(self, reads, refs, max_edits):
        raise NotImplementedError

    def filter_candidates(self, read_codes, read_rc_codes, read_offsets, ref_codes,
                          c_read, c_strand, c_pos, c_lo, c_hi, c_maxe):
        """Filter mapper candidates (arrays as in Extender); returns (accept, estimate).

        The pair for candidate i is the oriented read (length L) and ref[pos:pos+L], with 'N'
        outside the contig [lo, hi). This default cuts the pairs on the host, one group per
        (L, E); a GPU filter may override it to cut segments from a device-resident reference.
        """
        from pymap.kernels.gather import gather_pairs
        n = c_read.shape[0]
        accept = np.zeros(n, dtype=np.bool_)
        estimate = np.full(n, -1, dtype=np.int32)
        if n == 0:
            return accept, estimate
        lengths = (read_offsets[1:] - read_offsets[:-1])[c_read]
        keys = lengths.astype(np.int64) * 65536 + c_maxe
        for key in np.unique(keys):
            idx = np.flatnonzero(keys == key)
            length, e = int(key // 65536), int(key % 65536)
            reads = np.empty((idx.size, length), np.uint8)
            refs = np.empty((idx.size, length), np.uint8)
            gather_pairs(read_codes, read_rc_codes, read_offsets, ref_codes, c_read[idx], c_strand[idx],
                         c_pos[idx], c_lo[idx], c_hi[idx], length, reads, refs)
            acc, est = self.filter_pairs(reads, refs, e)
            accept[idx] = acc
            estimate[idx] = est
        return accept, estimate

    def close(self):
        """Release devices or pools (optional)."""


class Extender:
    """Aligns a read to a reference window around a candidate.

    Both methods take: read_codes, read_rc_codes, read_offsets (the batch), ref_codes (global),
    and per candidate: read index c_read (int32), strand c_strand (int8), diagonal start c_pos
    (int64, global), contig bounds c_lo, c_hi (int64, window is clamped to [c_lo, c_hi)), and
    c_maxe (int32, the threshold e for that read). The window is [pos - e, pos + L + e].

    distances(...) -> (dist int32[n], start int64[n]): edit distance of the best semi-global
    alignment (whole read, free reference ends) within e, -1 if none; start is its global start.

    align(...) -> (dist, start, cigar, cigar_offsets): the same plus a CIGAR as BAM-style uint32
    (length << 4 | op, ops M=0 I=1 D=2 ... '='=7, X=8) concatenated, candidate i's ops at
    cigar[cigar_offsets[i]:cigar_offsets[i+1]]. Only M, I, D are emitted.
    """
    name = None

    def distances(self, read_codes, read_rc_codes, read_offsets, ref_codes,
                  c_read, c_strand, c_pos, c_lo, c_hi, c_maxe):
        raise NotImplementedError

    def align(self, read_codes, read_rc_codes, read_offsets, ref_codes,
              c_read, c_strand, c_pos, c_lo, c_hi, c_maxe):
        raise NotImplementedError


def _group(kind):
    try:
        return GROUPS[kind]
    except KeyError:
        raise PluginError(f"unknown plugin kind {kind!r}") from None


def available(kind):
    """{name: entry point} of installed plugins of one kind."""
    eps = entry_points(group=_group(kind))
    return {ep.name: ep for ep in sorted(eps, key=lambda e: e.name)}


def load_class(kind, name):
    eps = available(kind)
    if name not in eps:
        known = ", ".join(eps) or "none installed"
        raise PluginError(f"unknown {kind} {name!r} (installed: {known})")
    return eps[name].load()


def parse_options(items):
    """['k=v', ...] -> dict with ints/floats/bools converted."""
    out = {}
    for item in items or ():
        if "=" not in item:
            raise PluginError(f"plugin option {item!r} is not key=value")
        key, value = item.split("=", 1)
        out[key.strip().replace("-", "_")] = _convert(value.strip())
    return out


def _convert(value):
    low = value.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def create(kind, name, **options):
    """Instantiate a plugin by name with keyword options (PluginError on bad ones)."""
    cls = load_class(kind, name)
    try:
        return cls(**options)
    except TypeError as exc:
        raise PluginError(f"{kind} {name!r}: {exc}") from None


def check_pairs(reads, refs):
    """Validate filter_pairs inputs; returns them as C-contiguous uint8 2-D arrays."""
    reads = np.ascontiguousarray(reads, dtype=np.uint8)
    refs = np.ascontiguousarray(refs, dtype=np.uint8)
    if reads.ndim != 2 or reads.shape != refs.shape:
        raise ValueError("reads and refs must be uint8 arrays of the same shape (n, L)")
    return reads, refs
