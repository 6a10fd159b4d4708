"""Exact affine-gap extender with end clipping on parasail (a per-candidate loop: slower, exact).

The problem is the one of `pymap.kernels.affine` (see its docstring), solved by full, unbanded
dynamic programming over the candidate's whole reference window instead of a band:

  * the oriented read R (length L; strand 1: the reverse-complement codes) against the window
    [pos - w, pos + L + w) clamped to the candidate's contig [lo, hi), w = `band` if given, else
    max(max_edits, 16) (`CandidateBatch.band`);
  * match +a, mismatch -b, N (code 4) in read or reference -1, a gap of k bases open + k * ext;
  * reference ends free, the read end to end except that each read end may be soft-clipped at
    clip_left / clip_right per clipped end (bwa -L); no terminal I or D: an alignment starts and
    ends with an aligned base (M);
  * objective = raw - clip_left * [left clipped] - clip_right * [right clipped], maximised, ties
    broken as the kernel does: fewer clipped ends, then an unclipped right end; the reported score
    is the raw score (bwa AS); found iff raw >= 1.

How parasail gives the exact optimum. Split the alignments by which read ends they clip:

  none   read global, reference ends free: parasail `sg_dx` (s1 = read, s2 = window);
  both   local alignment: parasail `sw`, minus clip_left + clip_right;
  left   start anywhere, end with the read's last base aligned: `sw` ending on the last row, minus
         clip_left;
  right  start with the read's first base aligned, end anywhere: the mirror image, minus clip_right.

Used plainly this is not exact. parasail has no mode "local at one read end, read-global with a
free reference at the other" (its semi-global variants free whole sequence ends: sg_qb_db frees the
read prefix or the reference prefix at a cell, never both, and reversing both sequences only
mirrors the problem), so max(sg_dx, sw - clip_left - clip_right) misses the one-sided cases (a
quarter of the simulated reads in tests/test_parasail_extender.py under the defaults). And `sg_dx`
and `sw` allow a terminal insertion (a read end against a gap), which the kernel forbids: with clip
penalties above open + ext, or gap_open 0, plain `sg_dx` can beat every kernel alignment.

Both are fixed exactly by *anchoring*: the read's first and/or last base is written with a
separate letter (V W X Y Z for A C G T N) whose substitution scores are the ordinary ones plus a
bonus BIG larger than the spread of all alignment scores of the read (BIG = 2 (L a + 2 max(b, 1) +
open + L ext + 1), L rounded up to 64). An optimal parasail alignment then aligns every anchored base
with an M whenever some alignment can (one window base suffices; two for `none` with L >= 2; else
the case is void), and the score minus BIG per anchor is exactly the best score among the
alignments whose anchored read ends are aligned bases:

  none   `sg_dx` with both end bases anchored: the read runs from an M to an M, no terminal
         insertion; terminal deletions are free reference ends (dropped from the CIGAR);
  left   `sw` with the last base anchored, minus clip_left;
  right  `sw` with the first base anchored, minus clip_right;
  both   plain `sw` (an optimal local alignment never starts or ends with a gap or a losing base).

The `left`, `right`, `both` values are relaxations (an `sw` alignment may in fact start at the
read's first base or end at its last, i.e. clip fewer ends than its case charges); each is at most
the objective of a real alignment and at least the best objective of its own case, so the best of
the four is the exact optimum. Ties are broken in the kernel's order (more objective, then fewer
clipped ends, then an unclipped right end), which is distinct per case; the winning case is then
the kernel's clip pattern and its raw score the kernel's score. Scores, found and which ends are
clipped are therefore exact for every option value (while 2 BIG + L a < 2^29: a ValueError beyond,
reads of some 50 million bases under the defaults). Not the kernel's: among co-optimal alignments of
the winning case parasail's traceback picks its own (clip lengths, gap placement in repeats, which
of equal end positions), so start, NM and CIGAR equal the kernel's only where the optimum is unique.
The winner's traceback is re-scored: it must give the reported score and clip pattern (RuntimeError
otherwise; never seen in testing).

Matrices: parasail's scan/striped code reads matrix[s2 letter][s1 letter], its reference and diag
code matrix[s1 letter][s2 letter]: the matrices here are symmetric.

Cost: up to four parasail score calls (scan, 32-bit) per candidate (cases that cannot beat the best
so far are skipped by the bound "raw <= sw score") plus one traceback call, in a Python loop: a
reference extender for tests and small runs (like `edlib`), not the mapping hot path.
"""
import numpy as np
import parasail

from pymap.batch import Alignments
from pymap.extenders.affine import parse_clip
from pymap.plugins import Extender


_ASCII = np.frombuffer(b"ACGTN", np.uint8)
_ALPHABET = "ACGTNVWXYZ"                 # ACGTN, then the anchored (boosted) read bases
_ANCHOR = {ord(c): ord(a) for c, a in zip("ACGTN", "VWXYZ")}
_N_SCORE = -1
_MIN_SCORE = 1
_LIMIT = 1 << 29                         # scores stay far from parasail's int32 -infinity

# parasail CIGAR op codes (BAM order "MIDNSHP=X"): M, =, X -> M; I (1) and D (2) as in BAM
_P_M, _P_EQ, _P_X = 0, 7, 8
OP_M, OP_I, OP_D, OP_S = 0, 1, 2, 4

# clip patterns: (left clipped, right clipped)
_NONE, _LEFT, _RIGHT, _BOTH = (0, 0), (1, 0), (0, 1), (1, 1)


def _int_option(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise ValueError(f"option '{name}' must be an integer from {lo} to {hi}, not {value!r}")
    return int(value)


class ParasailExtender(Extender):
    """parasail full-window affine-gap alignment with end clipping (bwa-mem scores): slower, exact."""
    name = "parasail"
    concurrent = True
    scoring = "affine"

    def __init__(self, match=1, mismatch=4, gap_open=6, gap_ext=1, clip=5, min_score=30, band=None):
        self.match = _int_option("match", match, 0, 1000)
        self.mismatch = _int_option("mismatch", mismatch, 0, 1000)
        self.gap_open = _int_option("gap_open", gap_open, 0, 1000)
        self.gap_ext = _int_option("gap_ext", gap_ext, 0, 1000)
        self.clip = parse_clip(clip)
        self.min_score = _int_option("min_score", min_score, 1, 10**8)
        self.band = None if band is None else _int_option("band", band, 0, 1 << 40)
        self.match_score = self.match                   # the mapper's units (see pymap.plugins.Extender)
        self.edit_cost = self.match + self.mismatch
        self._matrices = {}

    # ------------------------------------------------------------------ scoring
    def _big(self, L):
        """Anchor bonus for reads of length <= L (rounded up: few distinct matrices)."""
        L = -(-max(L, 1) // 64) * 64
        worst = 2 * max(self.mismatch, 1) + self.gap_open + L * self.gap_ext
        big = 2 * (L * self.match + worst + 1)
        if 2 * big + L * self.match >= _LIMIT:
            raise ValueError(f"extender 'parasail': reads of {L} bases are too long for int32 scores")
        return big

    def _matrix(self, big):
        m = self._matrices.get(big)
        if m is None:
            # symmetric: parasail's scan/striped code reads matrix[s2 letter][s1 letter], its
            # reference and diag code matrix[s1 letter][s2 letter]
            m = parasail.matrix_create(_ALPHABET, self.match, -self.mismatch)
            for i in range(10):                 # read letter (ACGTN, then anchored VWXYZ)
                for k in range(5):              # reference letter ACGTN
                    base = i % 5
                    s = _N_SCORE if base == 4 or k == 4 else (self.match if base == k else -self.mismatch)
                    m.set_value(i, k, s + (big if i >= 5 else 0))
                    m.set_value(k, i, s + (big if i >= 5 else 0))
            for i in range(5, 10):              # anchored against anchored: never occurs
                for k in range(5, 10):
                    m.set_value(i, k, -self.mismatch)
            self._matrices[big] = m
        return m

    def _sub(self, a, b):
        """Substitution scores of code arrays a (read) against b (reference)."""
        n = (a >= 4) | (b >= 4)
        return np.where(n, _N_SCORE, np.where(a == b, self.match, -self.mismatch))

    # ------------------------------------------------------------------ one candidate
    def _align(self, read, q, ref, w0, t):
        """read: oriented read codes, q: its ASCII; ref: reference codes, t: ASCII window starting at
        global w0. Returns (raw score, global start, NM, [BAM ops]) or None."""
        L = len(q)
        if L == 0 or len(t) == 0:
            return None
        o, e = self.gap_open + self.gap_ext, self.gap_ext     # parasail: gap of k = open + (k-1) ext
        cl, cr = self.clip
        big = self._big(L)
        m = self._matrix(big)
        top = parasail.sw_scan_32(q, t, o, e, m).score       # >= raw of every alignment
        if top < _MIN_SCORE:
            return None
        first, last = bytes([_ANCHOR[q[0]]]), bytes([_ANCHOR[q[-1]]])
        # key (objective, -clipped ends, right end unclipped): the kernel's order; distinct per case
        best = ((top - cl - cr, -2, 0), _BOTH, q, parasail.sw_trace_scan_32, top)
        cases = [((top, 0, 1), _NONE, first if L == 1 else first + q[1:-1] + last,
                  parasail.sg_dx_scan_32, parasail.sg_dx_trace_scan_32, 1 if L == 1 else 2)]
        if L >= 2:
            cases.append(((top - cl, -1, 1), _LEFT, q[:-1] + last, parasail.sw_scan_32,
                          parasail.sw_trace_scan_32, 1))
            cases.append(((top - cr, -1, 0), _RIGHT, first + q[1:], parasail.sw_scan_32,
                          parasail.sw_trace_scan_32, 1))
        for bound, pattern, query, score_fn, trace_fn, anchors in cases:
            if bound <= best[0]:
                continue                         # cannot win (keys of different cases never tie)
            s = score_fn(query, t, o, e, m).score
            v = s - anchors * big
            if v < -big // 2:                    # the anchored bases cannot all be aligned
                continue
            key = (v - cl * pattern[0] - cr * pattern[1], bound[1], bound[2])
            if key > best[0]:
                best = (key, pattern, query, trace_fn, s)
        (obj, _, _), pattern, query, trace_fn, s = best
        raw = obj + cl * pattern[0] + cr * pattern[1]
        if raw < _MIN_SCORE:
            return None
        res = trace_fn(query, t, o, e, m)
        if res.score != s:
            raise RuntimeError(f"extender 'parasail': traceback score {res.score} != score {s}")
        return self._from_trace(res, read, ref, w0, L, raw, pattern)

    def _from_trace(self, res, read, ref, w0, L, raw, pattern):
        cig = res.cigar
        ops = []
        for x in cig.seq.tolist():
            op, n = x & 15, x >> 4
            op = OP_M if op in (_P_M, _P_EQ, _P_X) else op
            if n == 0:
                continue
            if ops and ops[-1][0] == op:
                ops[-1][1] += n
            else:
                ops.append([op, n])
        j, c = int(cig.beg_query), int(cig.beg_ref)
        while ops and ops[0][0] != OP_M:         # free reference start; (a read-end gap: clip it)
            if ops[0][0] == OP_D:
                c += ops[0][1]
            else:
                j += ops[0][1]
            ops.pop(0)
        while ops and ops[-1][0] != OP_M:
            ops.pop()
        if not ops:
            raise RuntimeError("extender 'parasail': traceback without an aligned base")
        start = w0 + c
        score, nm, q, r = 0, 0, j, start
        for op, n in ops:
            if op == OP_M:
                a, b = read[q:q + n], ref[r:r + n]
                score += int(self._sub(a, b).sum())
                nm += int(((a >= 4) | (b >= 4) | (a != b)).sum())
                q += n
                r += n
            elif op == OP_I:
                score -= self.gap_open + n * self.gap_ext
                nm += n
                q += n
            else:
                score -= self.gap_open + n * self.gap_ext
                nm += n
                r += n
        left, right = j, L - q
        if score != raw or ((left > 0), (right > 0)) != (bool(pattern[0]), bool(pattern[1])) or right < 0:
            raise RuntimeError(f"extender 'parasail': traceback {cig.decode!r} re-scores to {score} with "
                               f"clips {left}/{right}, expected {raw} with clip pattern {pattern}")
        bam = ([left << 4 | OP_S] if left else []) + [n << 4 | op for op, n in ops] + \
              ([right << 4 | OP_S] if right else [])
        return raw, start, nm, bam

    # ------------------------------------------------------------------ the batch
    def extend(self, cands, traceback=False):
        n = len(cands)
        found = np.zeros(n, np.bool_)
        score = np.zeros(n, np.int32)
        edits = np.full(n, -1, np.int32)
        start = np.full(n, -1, np.int64)
        counts = np.zeros(n, np.int64)
        ops = []
        reads, ref = cands.reads, cands.ref_codes
        offsets = reads.offsets
        fwd = _ASCII[np.minimum(reads.codes, 4)].tobytes()
        rev = _ASCII[np.minimum(reads.rc_codes, 4)].tobytes()
        w = cands.band(self.band).astype(np.int64)
        # one parasail call set per candidate: the slow reference extender, not a hot path
        for i in range(n):
            r = int(cands.read[i])
            a, b = int(offsets[r]), int(offsets[r + 1])
            L, pos = b - a, int(cands.pos[i])
            w0 = max(int(cands.lo[i]), pos - int(w[i]))
            w1 = min(int(cands.hi[i]), pos + L + int(w[i]))
            if L == 0 or w1 <= w0:
                continue
            codes = reads.rc_codes if cands.strand[i] else reads.codes
            res = self._align(codes[a:b], (rev if cands.strand[i] else fwd)[a:b], ref, w0,
                              _ASCII[np.minimum(ref[w0:w1], 4)].tobytes())
            if res is None or res[0] < self.min_score:
                continue
            found[i] = True
            score[i], start[i], edits[i] = res[0], res[1], res[2]
            if traceback:
                ops.extend(res[3])
                counts[i] = len(res[3])
        cigar = cigar_offsets = None
        if traceback:
            cigar_offsets = np.zeros(n + 1, np.int64)
            np.cumsum(counts, out=cigar_offsets[1:])
            cigar = np.array(ops, dtype=np.uint32)
        return Alignments(found=found, score=score, edits=edits, start=start, cigar=cigar,
                          cigar_offsets=cigar_offsets)
