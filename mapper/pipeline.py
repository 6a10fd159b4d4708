"""The mapping pipeline: one batch of reads through seeder, filter, extender, selection and SAM text."""
import time
from dataclasses import dataclass, field

import numpy as np

from pymap.kernels.sam import REASONS, format_sam
from pymap.kernels.select import select_hits

REASON = {name: i for i, name in enumerate(REASONS)}


@dataclass
class RunStats:
    """Counters of a run, printed as the summary at the end."""
    reads: int = 0
    mapped: int = 0
    unmapped: dict = field(default_factory=lambda: {r: 0 for r in REASONS[1:]})
    candidates: int = 0
    accepted: int = 0          # candidates the filter passed
    aligned: int = 0
    secondary: int = 0
    seconds: dict = field(default_factory=dict)

    def add_time(self, key, dt):
        self.seconds[key] = self.seconds.get(key, 0.0) + dt


class Pipeline:
    """Holds the reference, the index and one instance of each stage; maps batches."""

    def __init__(self, reference, index, seeder, filt, extender, options):
        self.ref = reference
        self.index = index
        self.seeder = seeder
        self.filter = filt
        self.extender = extender
        self.opt = options
        self.stats = RunStats()
        self.ctg_names = np.frombuffer("".join(reference.names).encode(), dtype=np.uint8).copy()
        self.ctg_name_offsets = np.zeros(len(reference.names) + 1, np.int64)
        np.cumsum([len(n.encode()) for n in reference.names], out=self.ctg_name_offsets[1:])
        rg = options.read_group_id
        self.rg = np.frombuffer(rg.encode(), dtype=np.uint8).copy() if rg else np.empty(0, np.uint8)

    def _timed(self, key, t0):
        t1 = time.perf_counter()
        self.stats.add_time(key, t1 - t0)
        return t1

    def read_limits(self, batch):
        """Per-read threshold e and the reason a read cannot be mapped (0 = it can)."""
        lengths = batch.lengths
        e = self.opt.max_edits
        if e >= 1:
            maxe = np.full(lengths.shape, int(e), np.int32)
        else:
            maxe = np.floor(lengths * e + 0.5).astype(np.int32)
        maxe = np.minimum(maxe, lengths // 2).astype(np.int32)
        ncum = np.zeros(batch.codes.shape[0] + 1, np.int64)
        np.cumsum(batch.codes == 4, out=ncum[1:])
        n_count = ncum[batch.offsets[1:]] - ncum[batch.offsets[:-1]]
        reason = np.zeros(lengths.shape, np.int8)
        reason[n_count > maxe] = REASON["too_many_n"]
        reason[lengths > self.opt.max_length] = REASON["too_long"]
        reason[lengths < self.opt.min_length] = REASON["too_short"]
        return maxe, reason

    def candidates(self, batch, maxe, reason):
        """Seeding, restricted to mappable reads, with each candidate's contig bounds."""
        cands = self.seeder.candidates(self.index, batch, maxe)
        keep = reason[cands.read] == 0
        lengths = batch.lengths
        L = lengths[cands.read].astype(np.int64)
        e = maxe[cands.read].astype(np.int64)
        offs = self.ref.offsets
        ctg = np.clip(np.searchsorted(offs, cands.pos + L // 2, side="right") - 1, 0, len(offs) - 2)
        lo, hi = offs[ctg], offs[ctg + 1]
        span = np.minimum(hi, cands.pos + L + e) - np.maximum(lo, cands.pos - e)
        keep &= span >= L - e
        idx = np.flatnonzero(keep)
        return cands.take(idx), lo[idx], hi[idx], e[idx].astype(np.int32)

    def map_batch(self, batch):
        """SAM text (bytes) for a batch, every read exactly once as primary or unmapped."""
        opt = self.opt
        st = self.stats
        t = time.perf_counter()
        batch.with_rc()
        n = len(batch)
        maxe, reason = self.read_limits(batch)
        cands, c_lo, c_hi, c_maxe = self.candidates(batch, maxe, reason)
        has_cand = np.zeros(n, np.bool_)
        has_cand[cands.read] = True
        st.candidates += len(cands)
        t = self._timed("seed", t)

        args = (batch.codes, batch.rc_codes, batch.offsets, self.ref.codes)
        slack = opt.filter_slack
        if slack is None:
            slack = self.filter.mapper_slack
            if slack is None or opt.report_all:
                slack = c_maxe
        accept, _ = self.filter.filter_candidates(*args, cands.read, cands.strand, cands.pos,
                                                  c_lo, c_hi, (c_maxe + slack).astype(np.int32))
        acc = np.flatnonzero(accept)
        st.accepted += acc.size
        cands, c_lo, c_hi, c_maxe = cands.take(acc), c_lo[acc], c_hi[acc], c_maxe[acc]
        t = self._timed("filter", t)

        dist, start = self.extender.distances(*args, cands.read, cands.strand, cands.pos, c_lo, c_hi, c_maxe)
        ok = np.flatnonzero(dist >= 0)
        st.aligned += ok.size
        hits = cands.take(ok)
        h_dist, h_start, h_lo, h_hi, h_maxe = dist[ok], start[ok], c_lo[ok], c_hi[ok], c_maxe[ok]
        order = np.lexsort((h_start, hits.strand, hits.read))
        hits = hits.take(order)
        h_dist, h_start, h_lo, h_hi, h_maxe = (a[order] for a in (h_dist, h_start, h_lo, h_hi, h_maxe))
        t = self._timed("extend", t)

        max_hits = opt.max_hits
        best, n_best, sub, mapq, rep_offsets, rep_hit = select_hits(
            hits.read, hits.strand, h_start, h_dist, n, maxe, batch.lengths, batch.first_index,
            opt.seed, max_hits, opt.report_all)
        mapped = best >= 0
        reason[(reason == 0) & ~mapped] = np.where(has_cand[(reason == 0) & ~mapped],
                                                   REASON["over_max_edits"], REASON["no_seed_hit"])

        # one record per reported hit, and one unmapped record for reads without any
        n_rep = np.diff(rep_offsets)
        per_read = np.maximum(n_rep, 1)
        rec_read = np.repeat(np.arange(n, dtype=np.int64), per_read)
        rec_first = np.zeros(n + 1, np.int64)
        np.cumsum(per_read, out=rec_first[1:])
        rank = np.arange(rec_read.size) - rec_first[rec_read]
        rec_hit = np.full(rec_read.size, -1, np.int64)
        m = n_rep[rec_read] > 0
        rec_hit[m] = rep_hit[rep_offsets[rec_read[m]] + rank[m]]
        aligned_recs = np.flatnonzero(rec_hit >= 0)
        hk = rec_hit[aligned_recs]
        d2, s2, cigar, cig_off = self.extender.align(
            *args, hits.read[hk], hits.strand[hk], hits.pos[hk], h_lo[hk], h_hi[hk], h_maxe[hk])
        rec_cig_off = np.zeros(rec_read.size + 1, np.int64)
        counts = np.zeros(rec_read.size, np.int64)
        counts[aligned_recs] = np.diff(cig_off)
        np.cumsum(counts, out=rec_cig_off[1:])
        # the traceback pass must agree with the distance pass it re-runs
        h_start = h_start.copy()
        h_start[hk] = s2
        flag = np.where(rec_hit >= 0, 0, 4).astype(np.int64)
        flag[rec_hit >= 0] |= hits.strand[rec_hit[rec_hit >= 0]].astype(np.int64) * 16
        flag[(rec_hit >= 0) & (rank > 0)] |= 256
        rec_mapq = np.where(rank == 0, mapq[rec_read], 0).astype(np.int64)
        rec_mapq[rec_hit < 0] = 0
        rec_sub = np.where(rank == 0, sub[rec_read], -1).astype(np.int32)
        rec_reason = reason[rec_read].astype(np.int64)
        t = self._timed("select", t)

        quals = batch.quals
        text = format_sam(rec_read, flag, rec_hit, rec_mapq, rec_reason, rec_sub,
                          batch.names, batch.name_offsets, batch.codes, batch.rc_codes, batch.offsets,
                          quals, self.ref.codes, self.ctg_names, self.ctg_name_offsets, self.ref.offsets,
                          hits.strand, h_start, h_dist, cigar, rec_cig_off, self.rg)
        self._timed("sam", t)
        st.reads += n
        st.mapped += int(mapped.sum())
        st.secondary += int((rank > 0).sum())
        for code, name in enumerate(REASONS):
            if code:
                st.unmapped[name] += int((reason == code).sum())
        return text.tobytes()
