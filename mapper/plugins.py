"""Plugin contracts and the registry (entry-point groups pymap.seeders, pymap.filters, pymap.extenders).

Built-in stages are registered through the same entry points as third-party ones. Every plugin class
takes its options as keyword arguments (validated in __init__, raising ValueError naming the option),
and has a class attribute `name` and a one-line docstring that `pymap plugins` prints.

A stage class sets `concurrent = True` when it may work on two batches at once from two threads: its
mapping calls change no state of the instance, or guard what they change (counters: with a lock, as
pymap.kernels.threads.tally does). The mapper maps batches side by side (--batches) only when every
stage allows it; the default, False, keeps a third-party stage to one batch at a time.
"""
import functools
import inspect
from importlib.metadata import entry_points

import numpy as np

from pymap.errors import PluginContractError, PluginError  # noqa: F401  (also named plugins.PluginError)

GROUPS = {"seeder": "pymap.seeders", "filter": "pymap.filters", "extender": "pymap.extenders"}


def int_option(name, value, lo, hi=None):
    """A plugin option that must be an integer >= lo (and <= hi): the int, or ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise ValueError(f"{name} must be {rng}, got {value}")
    return value


def choice_option(name, value, choices):
    """A plugin option that must be one of `choices` (strings), or ValueError naming it."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def gpu_usable():
    """True when a CUDA GPU (or Numba's simulator, NUMBA_ENABLE_CUDASIM=1) can run kernels. On Linux
    without NVIDIA device files the answer is False without importing numba.cuda, which costs 0.2 s
    of every run's start-up."""
    from pymap.workers import cuda_simulated, no_gpu_files
    if not cuda_simulated() and no_gpu_files():
        return False
    from pymap.kernels.cuda_support import cuda_available
    return cuda_available()


def resolve_device(device):
    """A stage's device option ("cpu", "gpu" or "auto") as "cpu" or "gpu"; "gpu" without a usable
    CUDA GPU is a ValueError."""
    choice_option("device", device, ("auto", "cpu", "gpu"))
    if device == "cpu":
        return "cpu"
    if gpu_usable():
        return "gpu"
    if device == "gpu":
        raise ValueError("option 'device' is 'gpu' but no CUDA GPU is available (use device=cpu or auto)")
    return "cpu"


class Seeder:
    """Finds candidate locations of reads. Owns its index (build, save, load).

    all_locations_defaults: options used under `--all` (every location within e wanted) unless the
    user sets them; run_notes(): lines for the end-of-run summary (e.g. limits that were hit).
    concurrent: see the module docstring."""
    name = None
    all_locations_defaults = {}
    concurrent = False

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
        """Candidates (pymap.batch.Candidates, sorted by read, strand, pos and unique) for a
        ReadBatch; max_edits is int32[n], the threshold e of each read. The mapper passes only reads
        it can map (length within limits, not too many N)."""
        raise NotImplementedError


class Filter:
    """A pre-alignment filter: accept or reject (read, reference segment) pairs of equal length.

    One method is required, filter_pairs(reads, refs, max_edits): two uint8 arrays of shape (n, L)
    holding ASCII bases and an int threshold E; returns (accept: bool[n], estimate: int32[n]) where
    the estimate is the filter's edit estimate when accepted, -1 when rejected and -2 for an
    undefined pair (accepted without filtering). The contract: never reject a pair whose global
    (Levenshtein) edit distance is at most E, counting N as matching nothing, N against N included
    (as the mapper's NM does); a filter may instead accept every pair that holds an N (undefined).

    filter_candidates(cands) filters a pymap.batch.CandidateBatch: candidate i is the oriented read
    against ref[pos:pos+L] ('N' outside the contig) at threshold cands.max_edits[i]. The default
    cuts the pairs on the host and calls filter_pairs; a filter may override it (a GPU filter cuts
    segments from a device-resident reference).

    The mapper chooses the threshold: a read aligned semi-globally within e can be further than e
    from the equal-length segment on its seed's diagonal (up to one edit per indel base), so the
    mapper measures, per filter and (read length, e), the smallest extra allowance that keeps every
    such read on a fixed set of worst cases (pymap.slack), never above e. A plugin declares nothing.
    concurrent: see the module docstring.
    """
    name = None
    concurrent = False

    def filter_pairs(self, reads, refs, max_edits):
        raise NotImplementedError

    def filter_candidates(self, cands):
        from pymap.kernels.gather import gather_pairs
        n = len(cands)
        accept = np.zeros(n, dtype=np.bool_)
        estimate = np.full(n, -1, dtype=np.int32)
        if n == 0:
            return accept, estimate
        for idx, length, e in group_by_length_and_edits(cands):
            reads = np.empty((idx.size, length), np.uint8)
            refs = np.empty((idx.size, length), np.uint8)
            r = cands.reads
            gather_pairs(r.codes, r.rc_codes, r.offsets, cands.ref_codes, cands.read[idx], cands.strand[idx],
                         cands.pos[idx], cands.lo[idx], cands.hi[idx], length, reads, refs)
            acc, est = checked_filter_pairs(self, reads, refs, e)
            accept[idx] = acc
            estimate[idx] = est
        return accept, estimate

    def close(self):
        """Release devices or pools (optional)."""


def checked_filter_pairs(filt, reads, refs, max_edits):
    """filt.filter_pairs(reads, refs, max_edits) as (bool array, int32 array), or PluginContractError
    naming the filter when it does not return one decision and one estimate per pair."""
    acc, est = filt.filter_pairs(reads, refs, max_edits)
    n = reads.shape[0]
    if np.shape(acc) != (n,) or np.shape(est) != (n,):
        raise PluginContractError(f"filter {getattr(filt, 'name', None) or type(filt).__name__!r} returned "
                                  f"{np.shape(acc)} decisions and {np.shape(est)} estimates for {n} pairs")
    return np.asarray(acc, np.bool_), np.asarray(est, np.int32)


def group_by_length_and_edits(cands):
    """[(candidate indices, read length, threshold)] for each (L, E) in a CandidateBatch."""
    from pymap.kernels import segments     # Numba's kernels: not loaded when the CLI starts
    length, e, index = segments.distinct_pairs(cands.lengths, cands.max_edits)
    bounds, order, _ = segments.group_order(index, length.size)
    return [(order[bounds[k]:bounds[k + 1]], n, x) for k, (n, x) in enumerate(zip(length.tolist(), e.tolist()))]


class Extender:
    """Aligns reads to the reference around candidates.

    extend(cands, traceback) -> pymap.batch.Alignments for a CandidateBatch. The mapper calls it
    once per batch with traceback=True (CIGARs wanted); traceback=False (found/score/edits/start
    only) serves evaluations. The alignment of candidate i stays in its contig [lo, hi), within
    [pos - e, pos + L + e] for an edit-distance extender (e = max_edits[i]). The mapper checks that
    every CIGAR spans the whole read (M/I/S ops, S at the ends), stays in the contig and gives the
    reported NM (pymap.errors.PluginContractError); docs/plugins.md has the whole contract.

    scoring: "edits" when score = -edits (edit-distance extenders), "affine" when the score is an
    alignment score (higher is better, not derived from the edit count). A scoring extender also
    sets match_score (the score of one matching base) and edit_cost (what one mismatch costs: the
    match it loses plus its penalty); the mapper's MAPQ and its rescue of filter-rejected
    candidates work in these units. concurrent: see the module docstring.
    """
    name = None
    concurrent = False
    scoring = "edits"
    match_score = 0
    edit_cost = 1

    def extend(self, cands, traceback=False):
        raise NotImplementedError


def _group(kind):
    try:
        return GROUPS[kind]
    except KeyError:
        raise PluginError(f"unknown plugin kind {kind!r}") from None


def available(kind):
    """{name: entry point} of installed plugins of one kind."""
    eps = _installed().select(group=_group(kind))
    return {ep.name: ep for ep in sorted(eps, key=lambda e: e.name)}


@functools.lru_cache(maxsize=1)
def _installed():
    """Every installed entry point, read once a process (a run asks for its stages' classes several
    times; each read goes through every installed distribution's metadata)."""
    return entry_points()


def load_class(kind, name):
    eps = available(kind)
    if name not in eps:
        known = ", ".join(eps) or "none installed"
        raise PluginError(f"unknown {kind} {name!r} (installed: {known})")
    try:
        cls = eps[name].load()
    except Exception as exc:
        if eps[name].value.startswith("pymap."):
            raise
        raise PluginError(f"the {kind} plugin {name!r} cannot be loaded ({eps[name].value}): "
                          f"{type(exc).__name__}: {exc}") from None
    if not cls.__module__.startswith("pymap."):
        _OTHERS[cls.__module__] = f"{kind} plugin {name!r}"
    return cls


#: module -> "filter plugin 'x'" of the plugins loaded from other packages (blamed_plugin)
_OTHERS = {}


def blamed_plugin(exc):
    """'filter plugin 'x'' when exc was raised while code of a plugin from another package ran (a
    frame of its module in the traceback), else None."""
    tb = exc.__traceback__
    blamed = None
    while tb is not None:
        blamed = _OTHERS.get(tb.tb_frame.f_globals.get("__name__"), blamed)
        tb = tb.tb_next
    return blamed


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
    accepted = option_names(cls)
    unknown = [k for k in options if accepted is not None and k not in accepted]
    if unknown:
        takes = ", ".join(sorted(accepted)) or "no options"
        raise PluginError(f"{kind} {name!r} has no option {unknown[0]!r} (it takes: {takes})")
    try:
        obj = cls(**options)
    except (TypeError, ValueError) as exc:
        raise PluginError(f"{kind} {name!r}: {exc}") from None
    obj.plugin_options = dict(options)       # what it was built with (pymap.slack keys its cache on it)
    return obj


def option_names(cls):
    """The keyword options a plugin class takes (None when it takes **kwargs)."""
    if cls.__init__ is object.__init__:
        return set()
    params = inspect.signature(cls.__init__).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    return {n for n, p in params.items() if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def check_pairs(reads, refs):
    """Validate filter_pairs inputs; returns them as C-contiguous uint8 2-D arrays."""
    reads = np.ascontiguousarray(reads, dtype=np.uint8)
    refs = np.ascontiguousarray(refs, dtype=np.uint8)
    if reads.ndim != 2 or reads.shape != refs.shape:
        raise ValueError("reads and refs must be uint8 arrays of the same shape (n, L)")
    return reads, refs
