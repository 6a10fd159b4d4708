"""The filter threshold on the mapping path, measured instead of declared by the plugin.

A filter sees the read against the equal-length reference segment on the candidate's diagonal. A
read that aligns semi-globally within e edits can be up to one edit per indel base further from that
segment (the seed's diagonal may be the alignment's first or last diagonal), so a filter that is
exact for the equal-length problem needs threshold 2e to keep every such read. Most filters model
indels (shifted masks) and need less. `SlackTable` finds, per filter and (read length L, e), the
smallest allowance k <= e for which the filter accepts every pair of a fixed worst-case set at
threshold e + k: reads with 1..e indel bases (insertions and deletions, in one or several gaps, at
the left end, the right end and in the middle), the remaining edits as substitutions, each seen
from the alignment's first and its last diagonal. The set depends only on (L, e), so the threshold
and the output do not depend on batches, threads or workers.

Measuring costs about 0.1 s per (L, e) (trimmed reads bring a hundred lengths), so the allowances
are kept in the user's cache (~/.cache/pymap/slack), keyed by the filter's class, options (not
its device) and source: a value found there is the value the measurement gives. The first
measurement of a run says so on stderr (a first run on trimmed reads measures for seconds).
"""
import contextlib
import hashlib
import inspect
import json
import os
import sys
import threading

import numpy as np

_BASES = np.frombuffer(b"ACGT", np.uint8)


def worst_case_pairs(length, e, reps=6):
    """(reads, refs) uint8 ASCII arrays (n, length): reads within e edits (semi-global) of a
    reference stretch, each paired with the equal-length segment at its first or last diagonal."""
    rng = np.random.default_rng(length * 1009 + e)
    reads, refs = [], []
    if e == 0 or length < 4 * e + 8:
        return np.empty((0, length), np.uint8), np.empty((0, length), np.uint8)
    for k in range(1, e + 1):                      # indel bases
        for where in ("left", "middle", "right"):
            for kind in (b"I", b"D", b"M"):        # insertions, deletions, mixed
                for rep in range(reps):
                    ngaps = 1 if rep == 0 else int(rng.integers(1, k + 1))
                    subs = 0 if rep == 0 else int(rng.integers(0, e - k + 1))
                    pair = _make_case(rng, length, k, ngaps, subs, where, kind)
                    if pair is not None:
                        for read, ref in pair:
                            reads.append(read)
                            refs.append(ref)
    if not reads:
        return np.empty((0, length), np.uint8), np.empty((0, length), np.uint8)
    return np.stack(reads), np.stack(refs)


def _make_case(rng, length, k, ngaps, subs, where, kind):
    window = rng.choice(_BASES, size=length + 3 * k + 8)
    # gap sizes summing to k, and each gap's type
    cuts = np.sort(rng.choice(np.arange(1, k), size=min(ngaps, k) - 1, replace=False)) if k > 1 else []
    sizes = np.diff(np.concatenate([[0], cuts, [k]])).astype(int)
    if kind == b"M":
        types = rng.choice([b"I", b"D"], size=sizes.size)
    else:
        types = [kind] * sizes.size
    span = max(8, length // 6)
    lo = {"left": 0, "middle": length // 2 - span // 2, "right": length - span}[where]
    at = np.sort(rng.integers(lo, lo + span, size=sizes.size))
    # build the read from the window, left to right: copy runs of the window between the gaps (a
    # gap whose position an earlier insertion jumped over is dropped)
    read = []
    w = k + 4                                   # aligned start in the window
    start = w
    r = 0
    gi = 0
    while r < length:
        if gi < sizes.size and r == at[gi]:
            if types[gi] == b"I":
                read.extend(rng.choice(_BASES, size=sizes[gi]).tolist())
                r += sizes[gi]
            else:
                w += sizes[gi]
            gi += 1
            continue
        stop = at[gi] if gi < sizes.size and at[gi] > r else length
        read.extend(window[w:w + stop - r].tolist())
        w += stop - r
        r = stop
    read = np.array(read[:length], np.uint8)
    end = w
    # substitutions next to the gaps half of the time (they shorten the masks' zero runs)
    near = np.clip(np.concatenate([at - 1 - rng.integers(0, 3, at.size), at + 1 + rng.integers(0, 3, at.size)]),
                   0, length - 1)
    pool = np.unique(near) if rng.random() < 0.5 and subs <= np.unique(near).size else np.arange(length)
    for p in rng.choice(pool, size=subs, replace=False):
        read[p] = _BASES[(np.flatnonzero(_BASES == read[p])[0] + 1 + rng.integers(0, 3)) % 4]
    first = window[start:start + length]
    last = window[end - length:end] if end - length >= 0 else None
    out = [(read, first)]
    if last is not None and last.shape[0] == length:
        out.append((read.copy(), last))
    return out


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
            key = hashlib.sha1(filter_identity(self.filter).encode()).hexdigest()
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
                        print(f"[pymap] measuring filter '{getattr(self.filter, 'name', '?')}''s threshold "
                              f"allowance for read lengths not seen before (about 0.1 s each, once: kept in "
                              f"{os.path.dirname(self.cache_path or '') or 'memory'})", file=sys.stderr, flush=True)
                    self.table[key] = self._measure(*key)
            return self.table[key]

    def _measure(self, length, e):
        reads, refs = worst_case_pairs(length, e)
        if reads.shape[0] == 0:
            return e
        # a chain counts what each stage accepts for the summary: the measurement is not a run (its
        # lock keeps other batches' counts out of what is restored)
        with getattr(self.filter, "lock", contextlib.nullcontext()):
            saved = [list(self.filter.accepted), self.filter.seen] if hasattr(self.filter, "accepted") else None
            try:
                for k in range(e + 1):
                    accept, _ = self.filter.filter_pairs(reads, refs, e + k)
                    if accept.all():
                        return k
                self.lossy.add((length, e))
                return e
            finally:
                if saved is not None:
                    self.filter.accepted[:], self.filter.seen = saved

    def thresholds(self, lengths, max_edits):
        """e + slack for every candidate (int32), from its read length and e."""
        keys = lengths.astype(np.int64) * 65536 + max_edits
        uniq, inverse = np.unique(keys, return_inverse=True)
        per_key = np.array([int(k % 65536) + self.slack(int(k // 65536), int(k % 65536)) for k in uniq.tolist()],
                           np.int32)
        return per_key[inverse].astype(np.int32) if uniq.size else np.zeros(0, np.int32)

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
