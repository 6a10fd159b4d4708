"""The mapping pipeline: one batch of reads through seeder, filter, extender, selection and SAM text."""
import time
from dataclasses import dataclass, field

import numpy as np

from pymap.batch import CandidateBatch
from pymap.errors import PluginContractError
from pymap.kernels.cigar import cigar_spans
from pymap.kernels.sam import REASONS, format_sam
from pymap.kernels.select import select_hits
from pymap.slack import SlackTable

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
    filter_slack: str = None   # the allowance the filter ran with ("0", "0..1", "e")

    def add_time(self, key, dt):
        self.seconds[key] = self.seconds.get(key, 0.0) + dt


class Pipeline:
    """Holds the reference, the index and one instance of each stage; maps batches."""

    def __init__(self, reference, index, seeder, filt, extender, options):
        self.ref = reference
        self.index = index
        self.seeder = seeder
        self.filt = filt
        self.extender = extender
        # --all: no location within e may be lost, so the filter always runs at 2e
        self.slack = SlackTable(filt, fixed=options.filter_slack, whole_e=options.report_all)
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
        """Seeding of the mappable reads, as a CandidateBatch at threshold e (contig bounds set)."""
        mappable = np.flatnonzero(reason == 0)
        if mappable.size == len(batch):
            cands = self.seeder.candidates(self.index, batch, maxe)
        else:                      # unmappable reads (too long, too many N) never reach the seeder
            cands = self.seeder.candidates(self.index, batch.subset(mappable), maxe[mappable])
            cands.read = mappable[cands.read].astype(np.int32)
        lengths = batch.lengths
        L = lengths[cands.read].astype(np.int64)
        e = maxe[cands.read].astype(np.int64)
        offs = self.ref.offsets
        ctg = np.clip(np.searchsorted(offs, cands.pos + L // 2, side="right") - 1, 0, len(offs) - 2)
        lo, hi = offs[ctg], offs[ctg + 1]
        span = np.minimum(hi, cands.pos + L + e) - np.maximum(lo, cands.pos - e)
        idx = np.flatnonzero(span >= L - e)
        c = cands.take(idx)
        return CandidateBatch(batch, self.ref.codes, c.read, c.strand, c.pos, lo[idx], hi[idx], e[idx])

    def filter(self, cands):
        """The candidates the filter accepts, run at e + the measured (or --filter-slack) allowance."""
        thresholds = self.slack.thresholds(cands.lengths, cands.max_edits)
        accept, _ = self.filt.filter_candidates(cands.with_max_edits(thresholds))
        accept = np.asarray(accept, np.bool_)
        if accept.shape != (len(cands),):
            raise PluginContractError(f"filter {self.filt.name!r} returned {accept.shape} decisions for "
                                      f"{len(cands)} candidates")
        return cands.take(np.flatnonzero(accept))

    def extend(self, cands, traceback):
        """The extender's Alignments, checked against the contract."""
        aln = self.extender.extend(cands, traceback=traceback)
        check_alignments(self.extender, cands, aln, traceback)
        return aln

    def map_batch(self, batch):
        """SAM text (bytes) for a batch, every read exactly once as primary or unmapped."""
        opt = self.opt
        st = self.stats
        t = time.perf_counter()
        batch.with_rc()
        n = len(batch)
        maxe, reason = self.read_limits(batch)
        cands = self.candidates(batch, maxe, reason)
        has_cand = np.zeros(n, np.bool_)
        has_cand[cands.read] = True
        st.candidates += len(cands)
        t = self._timed("seed", t)

        cands = self.filter(cands)
        st.accepted += len(cands)
        t = self._timed("filter", t)

        aln = self.extend(cands, traceback=False)
        ok = np.flatnonzero(aln.found)
        st.aligned += ok.size
        hits, aln = cands.take(ok), aln.take(ok)
        order = np.lexsort((aln.start, hits.strand, hits.read))
        hits, aln = hits.take(order), aln.take(order)
        t = self._timed("extend", t)

        max_hits = opt.max_hits
        best, n_best, sub, mapq, rep_offsets, rep_hit = select_hits(
            hits.read, hits.strand, aln.start, -aln.score, n, maxe, batch.lengths, batch.first_index,
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
        t = self._timed("select", t)
        traced = self.extend(hits.take(hk), traceback=True)
        if not (np.array_equal(traced.found, np.ones(hk.size, np.bool_))
                and np.array_equal(traced.score, aln.score[hk]) and np.array_equal(traced.start, aln.start[hk])):
            raise PluginContractError(f"extender {self.extender.name!r}: the traceback pass disagrees with "
                                      f"the score pass on the same candidates")
        t = self._timed("extend", t)
        rec_cig_off = np.zeros(rec_read.size + 1, np.int64)
        counts = np.zeros(rec_read.size, np.int64)
        counts[aligned_recs] = np.diff(traced.cigar_offsets)
        np.cumsum(counts, out=rec_cig_off[1:])
        flag = np.where(rec_hit >= 0, 0, 4).astype(np.int64)
        flag[rec_hit >= 0] |= hits.strand[rec_hit[rec_hit >= 0]].astype(np.int64) * 16
        flag[(rec_hit >= 0) & (rank > 0)] |= 256
        rec_mapq = np.where(rank == 0, mapq[rec_read], 0).astype(np.int64)
        rec_mapq[rec_hit < 0] = 0
        rec_sub = np.where(rank == 0, sub[rec_read], -1).astype(np.int32)
        rec_reason = reason[rec_read].astype(np.int64)

        quals = batch.quals
        text = format_sam(rec_read, flag, rec_hit, rec_mapq, rec_reason, rec_sub,
                          batch.names, batch.name_offsets, batch.codes, batch.rc_codes, batch.offsets,
                          quals, self.ref.codes, self.ctg_names, self.ctg_name_offsets, self.ref.offsets,
                          hits.strand, aln.start, aln.edits, traced.cigar, rec_cig_off, self.rg)
        self._timed("sam", t)
        st.reads += n
        st.mapped += int(mapped.sum())
        st.secondary += int((rank > 0).sum())
        for code, name in enumerate(REASONS):
            if code:
                st.unmapped[name] += int((reason == code).sum())
        return text.tobytes()


def check_alignments(extender, cands, aln, traceback):
    """Raise PluginContractError when an extender's answer breaks the contract (pymap.plugins.Extender)."""
    n = len(cands)
    who = f"extender {getattr(extender, 'name', '?')!r}"
    for name in ("found", "score", "edits", "start"):
        if np.shape(getattr(aln, name)) != (n,):
            raise PluginContractError(f"{who}: Alignments.{name} must hold {n} values")
    aln.found = np.asarray(aln.found, np.bool_)
    aln.score = np.asarray(aln.score, np.int32)
    aln.edits = np.asarray(aln.edits, np.int32)
    aln.start = np.asarray(aln.start, np.int64)
    f = aln.found
    if np.any(aln.edits[f] > cands.max_edits[f]) or np.any(aln.edits[f] < 0):
        raise PluginContractError(f"{who}: an alignment has more edits than its threshold")
    if np.any(aln.start[f] < cands.lo[f]) or np.any(aln.start[f] >= np.maximum(cands.hi[f], cands.lo[f] + 1)):
        raise PluginContractError(f"{who}: an alignment starts outside its contig")
    if not traceback:
        return
    if aln.cigar is None or aln.cigar_offsets is None or np.shape(aln.cigar_offsets) != (n + 1,):
        raise PluginContractError(f"{who}: traceback=True needs cigar and cigar_offsets ({n + 1} offsets)")
    aln.cigar = np.ascontiguousarray(aln.cigar, np.uint32)
    aln.cigar_offsets = np.ascontiguousarray(aln.cigar_offsets, np.int64)
    offs = aln.cigar_offsets
    if offs[0] != 0 or np.any(np.diff(offs) < 0) or offs[-1] != aln.cigar.shape[0]:
        raise PluginContractError(f"{who}: cigar_offsets are not monotone from 0 to len(cigar)")
    qlen, rlen, bad = cigar_spans(aln.cigar, offs)
    fi = np.flatnonzero(f)
    if bad.any():
        raise PluginContractError(f"{who}: a CIGAR holds an op other than M, I, D, S, or S inside")
    if np.any(qlen[fi] != cands.lengths[fi]):
        i = fi[np.flatnonzero(qlen[fi] != cands.lengths[fi])[0]]
        raise PluginContractError(f"{who}: a CIGAR covers {qlen[i]} read bases of {cands.lengths[i]}")
    if np.any(aln.start[fi] + rlen[fi] > cands.hi[fi]):
        raise PluginContractError(f"{who}: an alignment runs past its contig's end")
