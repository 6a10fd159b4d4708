"""Reference extender: Edlib infix (HW) alignment of the read against the candidate window."""
import re

import edlib
import numpy as np

from pymap.batch import Alignments
from pymap.plugins import Extender

# Distinct symbols for N in the read ('N') and in the reference ('n'): N then mismatches everything.
_READ_ASCII = np.frombuffer(b"ACGTN", dtype=np.uint8).copy()
_REF_ASCII = np.frombuffer(b"ACGTn", dtype=np.uint8).copy()
_OPS = {"=": 0, "X": 0, "M": 0, "I": 1, "D": 2}
_CIGAR_RE = re.compile(r"(\d+)([=XMID])")


def _convert_cigar(text):
    """Edlib extended CIGAR ('=', 'X', 'I', 'D') -> merged BAM-style M/I/D uint32 ops."""
    out = []
    for n, c in _CIGAR_RE.findall(text):
        op, n = _OPS[c], int(n)
        if out and (out[-1] & 15) == op:
            out[-1] += n << 4
        else:
            out.append((n << 4) | op)
    return out


class EdlibExtender(Extender):
    """Edlib HW (infix) alignment per candidate on the same window (reference extender, slow)."""
    name = "edlib"
    concurrent = True

    def extend(self, cands, traceback=False):
        n = len(cands)
        dist = np.full(n, -1, np.int32)
        start = np.full(n, -1, np.int64)
        ops = []
        counts = np.zeros(n, np.int64)
        reads, ref_codes = cands.reads, cands.ref_codes
        fwd = _READ_ASCII[reads.codes].tobytes()
        rev = _READ_ASCII[reads.rc_codes].tobytes()
        offsets = reads.offsets
        task = "path" if traceback else "locations"
        # Edlib is called once per candidate: this is the slow reference extender, not a hot path
        for i in range(n):
            r = int(cands.read[i])
            a, b = int(offsets[r]), int(offsets[r + 1])
            L = b - a
            pos, e = int(cands.pos[i]), int(cands.max_edits[i])
            lo, hi = max(int(cands.lo[i]), pos - e), min(int(cands.hi[i]), pos + L + e)
            if e < 0 or hi - lo < L - e or hi < lo:
                continue
            query = (rev if cands.strand[i] else fwd)[a:b]
            target = _REF_ASCII[ref_codes[lo:hi]].tobytes()
            res = edlib.align(query, target, mode="HW", task=task, k=e)
            d = res["editDistance"]
            if d < 0:
                continue
            # same end preference as the banded kernel: end diagonal closest to the candidate's
            locs = res["locations"]
            best = min(range(len(locs)), key=lambda t: (abs(lo + locs[t][1] + 1 - pos - L), locs[t][1]))
            s, t = locs[best]
            if s is None:                      # empty read
                s = t + 1
            dist[i] = d
            start[i] = lo + s
            if traceback:
                cig = res["cigar"]
                if best != 0:
                    cig = edlib.align(query, target[s:t + 1], mode="NW", task="path")["cigar"]
                conv = _convert_cigar(cig)
                ops.extend(conv)
                counts[i] = len(conv)
        cigar = cigar_offsets = None
        if traceback:
            cigar_offsets = np.zeros(n + 1, np.int64)
            np.cumsum(counts, out=cigar_offsets[1:])
            cigar = np.array(ops, dtype=np.uint32)
        return Alignments(found=dist >= 0, score=-dist, edits=dist, start=start, cigar=cigar,
                          cigar_offsets=cigar_offsets)
