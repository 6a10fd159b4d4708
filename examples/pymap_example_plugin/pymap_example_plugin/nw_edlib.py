"""Extender `nw-edlib`: Edlib infix (HW) alignment of each read against its candidate window.

A slow, simple reference extender. It loops over candidates in Python and calls Edlib once per
candidate (twice with traceback). That is acceptable only because this is an example meant to be
read; a real extender works on the whole batch in NumPy/Numba (see pymap.extenders.banded).

For candidate i (read length L, threshold e = max_edits[i]) the window is
[max(lo, pos - e), min(hi, pos + L + e)); the read, reverse-complemented when strand is 1, is
aligned anywhere inside it with at most e edits. N (code 4) mismatches everything, N included,
so the edit count agrees with the MD tag the mapper writes. Among equally good locations the one
starting nearest `pos` wins (then the leftmost): the choice depends only on the candidate, so the
score pass and the traceback pass agree, as the mapper checks.
"""
import re

import edlib
import numpy as np

from pymap.batch import Alignments
from pymap.plugins import Extender

# mapping code -> ASCII; N is 'N' in the read and 'n' in the reference, so it never matches
_READ_ASCII = np.frombuffer(b"ACGTN", np.uint8)
_REF_ASCII = np.frombuffer(b"ACGTn", np.uint8)

# Edlib's CIGAR letters (query = read, target = reference) -> BAM op codes M=0, I=1, D=2
_BAM_OP = {"=": 0, "X": 0, "M": 0, "I": 1, "D": 2}
_CIGAR_RE = re.compile(r"(\d+)([=XMID])")


def cigar_ops(text):
    """Edlib CIGAR text ('3=1X2I4=') -> BAM-style ops [length << 4 | op], '=' and 'X' merged to M."""
    ops = []
    for count, letter in _CIGAR_RE.findall(text):
        op, length = _BAM_OP[letter], int(count)
        if ops and ops[-1] & 0xF == op:
            ops[-1] += length << 4
        else:
            ops.append(length << 4 | op)
    return ops


class NwEdlibExtender(Extender):
    """Edlib HW (infix) alignment per candidate in a Python loop (a slow, readable example)."""
    name = "nw-edlib"
    scoring = "edits"                        # score = -edits

    def extend(self, cands, traceback=False):
        n = len(cands)
        edits = np.full(n, -1, np.int32)
        start = np.full(n, -1, np.int64)
        counts = np.zeros(n, np.int64)
        ops = []
        batch = cands.reads
        fwd = _READ_ASCII[batch.codes].tobytes()
        rev = _READ_ASCII[batch.rc_codes].tobytes()
        for i in range(n):                   # the per-candidate loop: fine here only (an example)
            r = int(cands.read[i])
            a, b = int(batch.offsets[r]), int(batch.offsets[r + 1])
            length, pos, e = b - a, int(cands.pos[i]), int(cands.max_edits[i])
            w0, w1 = max(int(cands.lo[i]), pos - e), min(int(cands.hi[i]), pos + length + e)
            if length == 0 or e < 0 or w1 - w0 < length - e:
                continue
            query = (rev if cands.strand[i] else fwd)[a:b]
            target = _REF_ASCII[cands.ref_codes[w0:w1]].tobytes()
            res = edlib.align(query, target, mode="HW", task="locations", k=e)
            if res["editDistance"] < 0:
                continue
            s, t = min(res["locations"], key=lambda st: (abs(w0 + st[0] - pos), st[0], st[1]))
            edits[i] = res["editDistance"]
            start[i] = w0 + s
            if traceback:                    # the path of exactly that location
                path = edlib.align(query, target[s:t + 1], mode="NW", task="path")
                cigar = cigar_ops(path["cigar"])
                ops.extend(cigar)
                counts[i] = len(cigar)
        cigar = cigar_offsets = None
        if traceback:
            cigar_offsets = np.zeros(n + 1, np.int64)
            np.cumsum(counts, out=cigar_offsets[1:])
            cigar = np.array(ops, np.uint32)
        return Alignments(found=edits >= 0, score=-edits, edits=edits, start=start, cigar=cigar,
                          cigar_offsets=cigar_offsets)
