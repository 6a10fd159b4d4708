"""Filter chains: `--filter a,b` runs a first, then b only on what a accepted."""
import threading

import numpy as np

from pymap.plugins import Filter


class FilterChain(Filter):
    """Applies filters in order; a pair is accepted when every stage accepts it. The estimate is
    the last stage's. `accepted[i]` counts the pairs stage i accepted (`pymap filter` reports it);
    `lock` guards the counts; last_passed() gives this thread's last call's counts per stage (a
    batch's, for the run summary)."""
    name = "chain"

    def __init__(self, stages, names):
        self.stages = list(stages)
        self.names = list(names)
        self.accepted = [0] * len(self.stages)
        self.seen = 0
        self.lock = threading.RLock()
        self._last = threading.local()

    @property
    def concurrent(self):
        return all(getattr(s, "concurrent", False) for s in self.stages)

    def _run(self, call, n):
        accept = np.ones(n, dtype=np.bool_)
        estimate = np.zeros(n, dtype=np.int32)
        idx = np.arange(n)
        passed = [0] * len(self.stages)
        for k, stage in enumerate(self.stages):
            if idx.size == 0:
                break
            acc, est = call(stage, idx)
            estimate[idx] = est
            accept[idx[~acc]] = False
            idx = idx[acc]
            passed[k] = idx.size
        with self.lock:
            self.seen += n
            for k, m in enumerate(passed):
                self.accepted[k] += m
        self._last.passed = passed
        return accept, estimate

    def last_passed(self):
        """[(stage name, pairs it accepted)] of this thread's last call."""
        return list(zip(self.names, getattr(self._last, "passed", [0] * len(self.stages))))

    def filter_pairs(self, reads, refs, max_edits):
        return self._run(lambda s, i: s.filter_pairs(reads[i], refs[i], max_edits), reads.shape[0])

    def filter_candidates(self, cands):
        return self._run(lambda s, i: s.filter_candidates(cands.take(i)), len(cands))

    def close(self):
        for s in self.stages:
            s.close()
