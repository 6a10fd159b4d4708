"""The filter threshold on the mapping path, measured instead of declared by the plugin.

A filter sees the read against the equal-length reference segment on the candidate's diagonal. A
read that aligns semi-globally within e edits can be up to one edit per indel base further from that
segment (the seed's diagonal may be the alignment's first or last diagonal), so a filter that is
exact for the equal-length problem needs threshold 2e to keep every such read. Most filters model
indels (shifted masks) and need less. `SlackTable` finds, per filter and (read length L, e), the
smallest allowance k <= e for which the filter accepts every pair of a fixed worst-case set at
threshold e + k: reads with 1..e indel bases (insertions and deletions, in one or several gaps, at
the left end, the right end and in the middle), the remaining edits as substitutions, each seen
from the alignment's first and its last diagonal (pymap.kernels.worst_cases). The set depends only
on (L, e), so the threshold and the output do not depend on batches, threads or workers.

Measuring costs 3-90 ms per (L, e), most of it the filter's own calls (trimmed reads bring a
hundred lengths or more), so the allowances are kept in the user's cache (~/.cache/pymap/slack),
keyed by the filter's class, options (not its device) and source and the set's version: a value
found there is the value the measurement gives. The first measurement of a run says so on stderr.
"""
import contextlib
import hashlib
import inspect
import json
import os
import sys
import threading

import numpy as np

from pymap import plugins
from pymap.kernels import segments, worst_cases


def filter_identity(filt):
    """What a filter's measured allowances depend on: class, options and source text (a chain: its
    stages')."""
    stages = getattr(filt, "stages", None)
    if stages is not None:
        return "chain[" + ";".join(filter_identity(f) for f in stages) + "]"
    cls = type(filt)
    module = sys.modules[cls.__module__]
    names = {cls.__module__}
    for value in vars(module).values():          # the pymap modules it uses (its kernels)
        name = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", None)
        if isinstance(name, str) and name.startswith("pymap."):
            names.add(name)
    digest = hashlib.sha1()
    for name in sorted(names):
        with open(inspect.getsourcefile(sys.modules[name]), "rb") as fh:
            digest.update(fh.read())
    source = digest.hexdigest()
    # not the device: a filter decides the same on either (pymap's CUDA kernels and CPU twins are
    # tested bit-identical), so --device cpu and gpu share the measurements
    options = sorted((k, repr(v)) for k, v in getattr(filt, "plugin_options", {}).items() if k != "device")
    return f"{cls.__module__}.{cls.__qualname__}|{options}|{source}"


class SlackTable:
    """Measured allowance per (L, e) for one filter; `notes` says when a filter needed all of e."""

    def __init__(self, filt, fixed=None, whole_e=False):
        self.filter = filt
        self.fixed = fixed
        self.whole_e = whole_e
        self.table = {}
        self.lossy = set()
        self.cache_path = None
        self.cached = {}
        self.announced = False
        self.lock = threading.Lock()          # batches mapped side by side ask at once
        if fixed is None and not whole_e and not getattr(filt, "accepts_all", False):
            self._load_cache()

    def _load_cache(self):
        from pymap.jitcache import cache_dir
        try:
            key = hashlib.sha1(f"{filter_identity(self.filter)}|cases {worst_cases.VERSION}".encode()).hexdigest()
        except (TypeError, OSError):
            return                          # a filter whose source cannot be read: measure each run
        self.cache_path = os.path.join(cache_dir("slack"), key + ".json")
        try:
            with open(self.cache_path) as fh:
                self.cached = {tuple(int(x) for x in k.split(",")): v for k, v in json.load(fh).items()}
        except (OSError, ValueError, AttributeError):
            self.cached = {}

    def save(self):
        """Add this run's measurements to the cache (best effort: a read-only home just measures)."""
        new = {k: (-1 if k in self.lossy else v) for k, v in self.table.items() if k not in self.cached}
        if self.cache_path is None or not new:
            return
        self.cached.update(new)
        tmp = f"{self.cache_path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.cache_path), exist_ok=True)
            with open(tmp, "w") as fh:
                json.dump({f"{L},{e}": v for (L, e), v in sorted(self.cached.items())}, fh)
            os.replace(tmp, self.cache_path)
        except OSError:
            pass

    def slack(self, length, e):
        if self.fixed is not None:
            return self.fixed
        if getattr(self.filter, "accepts_all", False):
            return 0
        if self.whole_e:
            return int(e)
        key = (int(length), int(e))
        with self.lock:
            if key not in self.table:
                if key in self.cached:              # -1: lossy even at 2e
                    k = self.cached[key]
                    if k < 0:
                        self.lossy.add(key)
                    self.table[key] = e if k < 0 else k
                else:
                    if not self.announced:
                        self.announced = True
                        print(f"[pymap] measuring the threshold allowance of filter "
                              f"'{getattr(self.filter, 'name', '?')}' for read lengths not seen before "
                              f"(milliseconds each, once: kept in "
                              f"{os.path.dirname(self.cache_path or '') or 'memory'})", file=sys.stderr, flush=True)
                    self.table[key] = self._measure(*key)
            return self.table[key]

    def _measure(self, length, e):
        reads, refs = worst_cases.worst_case_pairs(length, e)
        if reads.shape[0] == 0:
            return e
        # a chain counts what each stage accepts for the summary: the measurement is not a run (its
        # lock keeps other batches' counts out of what is restored)
        with getattr(self.filter, "lock", contextlib.nullcontext()):
            saved = [list(self.filter.accepted), self.filter.seen] if hasattr(self.filter, "accepted") else None
            try:
                for k in range(e + 1):
                    accept, _ = plugins.checked_filter_pairs(self.filter, reads, refs, e + k)
                    if accept.all():
                        return k
                self.lossy.add((length, e))
                return e
            finally:
                if saved is not None:
                    self.filter.accepted[:], self.filter.seen = saved

    def thresholds(self, lengths, max_edits):
        """e + slack for every candidate (int32), from its read length and e."""
        length, e, index = segments.distinct_pairs(lengths, max_edits)
        per_pair = np.array([x + self.slack(n, x) for n, x in zip(length.tolist(), e.tolist())], np.int32)
        return per_pair[index]

    def notes(self):
        if not self.lossy:
            return []
        length, e = sorted(self.lossy)[0]
        return [f"filter '{getattr(self.filter, 'name', '?')}' rejected worst-case reads within e even at "
                f"threshold 2e (e.g. {length} bp, e={e}): it can lose alignments"]

    def used(self):
        """The allowances the filter ran at: those measured for the (L, e) seen, the fixed one, or
        "e" where the filter runs at the whole threshold (--all)."""
        if self.whole_e and self.fixed is None:
            return ["e"]
        return sorted(set(self.table.values())) if self.fixed is None else [self.fixed]

    def summary(self):
        """'k' or 'k1..k2' over the allowances used, for the run summary."""
        return span_text(self.used())


def span_text(allowances):
    """'k' or 'k1..k2' over the allowances, None for none: the run summary's filter allowance."""
    vals = sorted(set(allowances))
    if not vals:
        return None
    return str(vals[0]) if len(vals) == 1 else f"{vals[0]}..{vals[-1]}"
