"""The mapping pipeline: one batch of reads through seeder, filter, extender, selection and SAM text."""
import contextlib
import copy
import dataclasses
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from numba import config as numba_config

from pymap.batch import MIN_BAND, WIDE_BAND, Alignments, CandidateBatch, ReadBatch
from pymap.errors import InputError, PluginContractError
from pymap.kernels import contracts
from pymap.kernels.cigar import cigar_spans
from pymap.kernels.contigs import place_on_contigs
from pymap.kernels.encoding import count_code
from pymap.kernels.pairing import pair_hits, rescue_anchors
from pymap.kernels.pruning import clipped_primaries, raise_bars, round_picks, weak_reads
from pymap.kernels.records import record_fields
from pymap.kernels.sam import OWN_TAGS, REASONS, bad_tag, first_bad_comment, format_sam, tag_codes
from pymap.kernels.select import (MAPQ_MAX, hit_spans, pick_supplementary, query_spans, report_order,
                                  select_hits, supplementary_mapq)
from pymap.kernels.segments import group_ranks, group_starts, swap_groups, swap_plan
from pymap.kernels.sorting import order_by_group
from pymap.kernels.text import gather_ranges, interleave_ranges
from pymap.slack import SlackTable

REASON = {name: i for i, name in enumerate(REASONS)}
#: a scoring extender's candidate must leave at least this many read bases in its contig (bwa -T 30)
MIN_ALIGNED = 30
#: a primary clipped by this many bases may hide an indel longer than the band (_split_by_indels):
#: a shorter clip beats any such indel (a deletion of d bases costs gap_open + d, a clip 5)
SPLIT_CLIP = MIN_BAND + 3
#: bases of band beyond the distance of the two diagonals, for the indel's placement and errors
SPLIT_BAND_SLACK = 4


@dataclass
class RunStats:
    """Counters of a run, printed as the summary at the end."""
    reads: int = 0
    mapped: int = 0
    unmapped: dict = field(default_factory=lambda: {r: 0 for r in REASONS[1:]})
    candidates: int = 0
    accepted: int = 0          # candidates the filter passed
    aligned: int = 0
    rescued: int = 0           # rejected candidates extended all the same (Pipeline.align)
    secondary: int = 0
    supplementary: int = 0
    proper_pairs: int = 0
    rescue_windows: int = 0        # mate rescue: windows searched, their positions, filter passes,
    rescue_candidates: int = 0     # extended candidates, pairs it made proper
    rescue_accepted: int = 0
    rescue_extended: int = 0
    rescued_pairs: int = 0
    seconds: dict = field(default_factory=dict)
    filter_slack: str = None   # the allowance the filter ran with ("0", "0..1", "e")
    on_gpu: tuple = ()         # the stages that ran on a GPU ("seed", "filter", "extend", "select")
    filter_stages: dict = field(default_factory=dict)   # a filter chain: pairs each stage accepted

    def add_time(self, key, dt):
        self.seconds[key] = self.seconds.get(key, 0.0) + dt

    def add(self, part):
        """Add the counters and stage seconds of another RunStats (a batch's, a worker's)."""
        for f in dataclasses.fields(self):
            a, b = getattr(self, f.name), getattr(part, f.name)
            if isinstance(a, int):
                setattr(self, f.name, a + b)
            elif isinstance(a, dict):
                for k, v in b.items():
                    a[k] = a.get(k, 0) + v


class Pipeline:
    """Holds the reference, the index and one instance of each stage; maps batches."""

    def __init__(self, reference, index, seeder, filt, extender, options, pair_extender=None, host_twins=None):
        self.ref = reference
        self.index = index
        self.seeder = seeder
        self.filt = filt
        self.extender = extender
        # pairs: an instance of the extender with a lower minimum score; hits below the extender's
        # own minimum are kept only as mates of a proper pair
        self.pair_extender = pair_extender
        # (filter, pair extender) on the host where those stages run on a GPU: a mate rescue's small
        # calls (rescue_windows)
        self.host_twins = host_twins
        # --all: no location within e may be lost, so the filter always runs at 2e
        self.slack = SlackTable(filt, fixed=options.filter_slack, whole_e=options.report_all)
        self.opt = options
        self.run_stats = RunStats(on_gpu=gpu_stages(seeder, filt, extender))
        self.select_device = "gpu" if "select" in self.run_stats.on_gpu else "cpu"
        self._local = threading.local()      # the batch mapped on this thread (batch)
        self._lock = threading.Lock()
        self._in_flight = 0
        # how far beyond a candidate's diagonal +- 2e a stage may read the reference (the widest band)
        bands = [getattr(x, "band", None) for x in (extender, pair_extender)]
        self.band_reach = max([MIN_BAND] + [b for b in bands if isinstance(b, int)]) + 8
        self.ctg_names = np.frombuffer("".join(reference.names).encode(), dtype=np.uint8).copy()
        self.ctg_name_offsets = np.zeros(len(reference.names) + 1, np.int64)
        np.cumsum([len(n.encode()) for n in reference.names], out=self.ctg_name_offsets[1:])
        rg = options.read_group_id
        self.rg = np.frombuffer(rg.encode(), dtype=np.uint8).copy() if rg else np.empty(0, np.uint8)
        self.own_tags = tag_codes(OWN_TAGS + ((b"RG",) if rg else ()))      # -C's comments may not repeat them

    @property
    def stats(self):
        """The counters to update: those of the batch mapped on this thread (batch), else the run's."""
        return getattr(self._local, "stats", None) or self.run_stats

    @property
    def concurrent(self):
        """Whether batches may be mapped side by side: every stage says it allows it (and no stage
        runs on Numba's CUDA simulator, which swaps module globals while a kernel runs)."""
        if self.run_stats.on_gpu and numba_config.ENABLE_CUDASIM:
            return False
        return all(getattr(x, "concurrent", False) for x in (self.seeder, self.filt, self.extender))

    @contextlib.contextmanager
    def batch(self):
        """The scope of one batch mapped on this thread, which may run beside others (api.LocalRun):
        its counters are its own (yielded) and added to the run's at its end; a batch that starts with
        no other in flight first trims the reference (Reference.trim). Nested scopes are one."""
        if getattr(self._local, "stats", None) is not None:
            yield self._local.stats
            return
        with self._lock:
            self._in_flight += 1
            if self._in_flight == 1:
                self.ref.trim()
        st = self._local.stats = RunStats()
        try:
            yield st
        finally:
            self._local.stats = None
            with self._lock:
                self._in_flight -= 1
                self.run_stats.add(st)

    def close(self):
        """At the run's end: the filter's resources released, the measured filter allowance saved."""
        self.filt.close()
        if self.host_twins is not None:
            self.host_twins[0].close()
        self.slack.save()

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
        n_count = count_code(batch.codes, batch.offsets, np.uint8(4))
        reason = np.zeros(lengths.shape, np.int8)
        reason[n_count > maxe] = REASON["too_many_n"]
        reason[lengths > self.opt.max_length] = REASON["too_long"]
        reason[lengths < self.opt.min_length] = REASON["too_short"]
        return maxe, reason

    def candidates(self, batch, maxe, reason, caps=None):
        """Seeding of the mappable reads, as a CandidateBatch at threshold e (contig bounds set).
        caps: an int64[len(batch)] array to receive each read's MAPQ cap from the seeder (MAPQ_MAX
        where it sets none)."""
        mappable = np.flatnonzero(reason == 0)
        if mappable.size == len(batch):
            cands = self.seeder.candidates(self.index, batch, maxe)
            check_candidates(self.seeder, cands, len(batch), self.ref.codes.shape[0])
        else:                      # unmappable reads (too long, too many N) never reach the seeder
            cands = self.seeder.candidates(self.index, batch.subset(mappable), maxe[mappable])
            check_candidates(self.seeder, cands, mappable.size, self.ref.codes.shape[0])
            cands.read = mappable[cands.read].astype(np.int32)
        if caps is not None and cands.mapq_cap is not None:
            cap = np.asarray(cands.mapq_cap)
            if cap.shape != (mappable.size,) or not np.issubdtype(cap.dtype, np.integer):
                raise PluginContractError(f"seeder {getattr(self.seeder, 'name', '?')!r}: mapq_cap must hold one "
                                          f"integer per read ({mappable.size}), got {cap.dtype}{list(cap.shape)}")
            caps[mappable] = np.minimum(cap.astype(np.int64), MAPQ_MAX)
        # a scoring extender aligns a read over a contig end (clipped) on both sides: a candidate per contig
        read, strand, pos = (np.ascontiguousarray(x, t) for x, t in ((cands.read, np.int32),
                                                                      (cands.strand, np.int8), (cands.pos, np.int64)))
        placed = place_on_contigs(read, strand, pos, batch.offsets, maxe,
                                  np.ascontiguousarray(self.ref.offsets, np.int64), self.extender.scoring != "edits",
                                  MIN_ALIGNED)
        return self.candidate_batch(batch, *placed)

    def candidate_batch(self, batch, read, strand, pos, lo, hi, max_edits):
        """A CandidateBatch of these candidates, the reference decoded wherever a filter or an
        extender may read it for them (Reference.ensure)."""
        if self.ref.on_demand:          # else the windows' arrays are a waste: every code is readable
            L = batch.lengths[read].astype(np.int64)
            reach = 2 * np.asarray(max_edits, np.int64) + self.band_reach
            pos = np.asarray(pos, np.int64)
            self.ref.ensure(np.maximum(lo, pos - reach), np.minimum(hi, pos + L + reach))
        return CandidateBatch(batch, self.ref.codes, read, strand, pos, lo, hi, max_edits)

    def filter(self, cands, estimates=False, filt=None):
        """Which candidates the filter (or filt: its host twin) accepts (bool mask; with estimates,
        also its edit estimates), run at e + the measured (or --filter-slack) allowance."""
        filt = self.filt if filt is None else filt
        thresholds = self.slack.thresholds(cands.lengths, cands.max_edits)
        accept, est = filt.filter_candidates(cands.with_max_edits(thresholds))
        stats = getattr(self._local, "stats", None)
        if stats is not None and hasattr(filt, "last_passed"):
            for name, n in filt.last_passed():
                stats.filter_stages[name] = stats.filter_stages.get(name, 0) + n
        accept = np.asarray(accept, np.bool_)
        if accept.shape != (len(cands),) or np.shape(est) != (len(cands),):
            raise PluginContractError(f"filter {filt.name!r} returned {accept.shape} decisions for "
                                      f"{len(cands)} candidates")
        return (accept, np.asarray(est, np.int64)) if estimates else accept

    def extend(self, cands, pairs=False, ext=None):
        """The extender's Alignments with CIGARs, checked against the contract; for mates (pairs)
        the pairs' instance, which reports down to a lower score (ext: another instance)."""
        if ext is None:
            ext = self.pair_extender if pairs and self.pair_extender is not None else self.extender
        aln = ext.extend(cands, traceback=True)
        check_alignments(ext, cands, aln, True)
        return aln

    def align(self, cands, accept, estimate, good_score, floor, pairs=False):
        """Extend the accepted candidates; then, for a scoring extender, also the rejected candidates
        of reads whose best alignment scores below good_score[read] (what e mismatches leave) or
        leaves MIN_ALIGNED or more bases clipped. The filter compares the whole read with an
        equal-length segment: it rejects a read that needs clipping (an adapter, a junk tail, a
        contig end) at its true locus, and the other part of a chimera, which clipped alignments
        may still win or report. Returns (candidate index, Alignments) of everything extended.

        Pruning (scoring extenders): each read's candidate with the smallest filter estimate is
        extended first; when it gives an unclipped alignment of score S at least floor + 4 units,
        the read's other candidates need only reach S - PRUNE_UNITS units (the extender may stop
        early below that): a runner-up further down would leave MAPQ at 60 and no supplementary
        alignment is possible, so only XS can change. For mates (pairs) the bar is lower by the
        unpaired penalty: a hit that far below its mate's best can neither be chosen for a pair
        nor come near the best pair's score."""
        idx = np.flatnonzero(accept)
        if self.extender.scoring == "edits" or idx.size == 0:
            aln = self.extend(cands.take(idx), pairs)
        else:
            margin = PRUNE_UNITS * self.extender.edit_cost
            if pairs:
                margin += UNPAIRED_PENALTY * max(self.extender.match_score, 1)
            idx, aln = self._extend_pruned(cands, idx, estimate, floor, margin, pairs)
        if self.extender.scoring == "edits" or accept.all():
            return idx, aln
        weak = weak_reads(cands.read, idx, aln.found, aln.score, aln.cigar, aln.cigar_offsets, good_score,
                          len(cands.reads), MIN_ALIGNED)
        rescue = np.flatnonzero(~accept & weak[cands.read])
        self.stats.rescued += rescue.size
        if rescue.size == 0:
            return idx, aln
        return np.concatenate([idx, rescue]), Alignments.join([aln, self.extend(cands.take(rescue), pairs)])

    def hits(self, batch, pairs=False):
        """Seed, filter, extend and select for every read of a batch (Hits, see there); pairs: the
        reads are mates (see align)."""
        st = self.stats
        t = time.perf_counter()
        batch.with_rc()
        n = len(batch)
        lengths = batch.lengths.astype(np.int64)
        maxe, reason = self.read_limits(batch)
        caps = np.full(n, MAPQ_MAX, np.int64)
        cands = self.candidates(batch, maxe, reason, caps)
        has_cand = np.zeros(n, np.bool_)
        has_cand[cands.read] = True
        st.candidates += len(cands)
        t = self._timed("seed", t)

        accept, estimate = self.filter(cands, estimates=True)
        st.accepted += int(accept.sum())
        t = self._timed("filter", t)

        # score scale: 0 / 1 for the edit-distance extenders (score = -edits)
        match, unit = self.extender.match_score, self.extender.edit_cost
        ext_idx, aln = self.align(cands, accept, estimate, lengths * match - maxe * unit,
                                  lengths * match - (maxe + 1) * unit, pairs)
        t = self._timed("extend", t)

        st.aligned += int(aln.found.sum())
        h = self.select(batch, lengths, maxe, reason, has_cand, cands.read[ext_idx], cands.strand[ext_idx], aln, caps)
        t = time.perf_counter()
        wider = self._split_by_indels(h, cands, ext_idx, aln, pairs)
        self._timed("extend", t)
        if wider is None:
            return h
        ext_idx, aln, changed = wider
        return self.reselect(h, cands.read[ext_idx], cands.strand[ext_idx], aln, changed)

    def _split_by_indels(self, h, cands, ext_idx, aln, pairs):
        """(ext_idx, aln, the reads whose alignments changed) again, or None: a read
        whose primary is clipped by SPLIT_CLIP bases or more where its contig goes on, and that has a
        candidate of the same strand and contig on another diagonal up to WIDE_BAND away (its clipped
        part seeded there), may hold an indel longer than the band (a 20-base deletion: 120M30S and
        120S30M, where bwa mem's band of 100 gives 120M20D30M). Its primary's candidate is extended
        again with a band as wide as the two diagonals are apart; the new alignment replaces the old one
        where it is better by what the extender maximises (_objective)."""
        if self.extender.scoring == "edits" or self.opt.report_all or getattr(self.extender, "band", None) is not None:
            return None                             # an extender's band given as an option is kept
        prim, lead = clipped_primaries(h.primary, h.hit_aln, h.start, h.end, h.ctg, aln.cigar, aln.cigar_offsets,
                                       np.ascontiguousarray(self.ref.offsets, np.int64), SPLIT_CLIP)
        if prim.size == 0:
            return None
        a, diag, ctg_lo = h.hit_aln[prim], h.start[prim] - lead, self.ref.offsets[h.ctg[prim]]
        # the other candidates of those reads: how far their diagonals lie from the primary's
        n = len(h.batch)
        at = np.full(n, -1, np.int64)
        at[h.read[prim]] = np.arange(prim.size)
        k = at[cands.read]
        other = np.flatnonzero((k >= 0) & (cands.strand == h.strand[prim][np.maximum(k, 0)])
                               & (cands.lo == ctg_lo[np.maximum(k, 0)]))
        apart = np.abs(cands.pos[other] - diag[k[other]])
        band = cands.band()[ext_idx[a]][k[other]]
        near = (apart > band) & (apart <= WIDE_BAND)
        need = np.zeros(prim.size, np.int64)
        np.maximum.at(need, k[other][near], apart[near])
        retry = np.flatnonzero(need > 0)
        if retry.size == 0:
            return None
        c = ext_idx[a[retry]]
        sub = cands.take(c)
        sub.bands = np.minimum(need[retry] + SPLIT_BAND_SLACK, WIDE_BAND).astype(np.int32)
        length = sub.lengths.astype(np.int64)
        self.ref.ensure(np.maximum(sub.lo, sub.pos - sub.bands), np.minimum(sub.hi, sub.pos + length + sub.bands))
        again = self.extend(sub, pairs)
        better = again.found & (self._objective(again, np.arange(retry.size), length)
                                > self._objective(aln, a[retry], length))
        if not better.any():
            return None
        found = aln.found.copy()
        found[a[retry[better]]] = False
        again.found = better
        return (np.concatenate([ext_idx, c]), Alignments.join([dataclasses.replace(aln, found=found), again]),
                cands.read[c[better]])

    def select(self, batch, lengths, maxe, reason0, has_cand, aln_read, aln_strand, aln, mapq_cap):
        """Hits of a batch from its alignments (aln_read, aln_strand: each alignment's read and
        strand) and the per-read selection (select_hits); unmapped reads get their reason; MAPQ
        at most mapq_cap (per read, from the seeder)."""
        t = time.perf_counter()
        hits, chosen = self._select_part(batch, lengths, maxe, np.flatnonzero(aln.found), aln, aln_read, aln_strand,
                                         self.select_device)
        h = Hits(batch, lengths, maxe, None, aln, *hits[:5])
        h.end, h.ctg, h.qbeg, h.qend = hits[5:]
        h.best, h.n_best, h.sub, h.has_sub, h.mapq, h.primary, h.keep, h.shadow = chosen
        h.mapq = np.minimum(h.mapq, mapq_cap)
        self._timed("select", t)
        return self._selected(h, reason0, has_cand, aln_read, aln_strand, mapq_cap)

    def reselect(self, h, aln_read, aln_strand, aln, changed_reads):
        """select() after the alignments of the reads `changed_reads` (read numbers, repeats allowed)
        changed: aln holds h.aln's alignments at their indices (found or not) and maybe more after
        them. Only those reads are selected again (on the host: they are few); the others keep their
        hits and selection, which depend on their own alignments alone. The same Hits as select() over
        everything, which it is where more than RESELECT_SHARE of the reads changed."""
        batch, n = h.batch, len(h.batch)
        changed = np.zeros(n, np.bool_)
        changed[changed_reads] = True
        reads = np.flatnonzero(changed)
        if reads.size > RESELECT_SHARE * n:
            return self.select(batch, h.lengths, h.maxe, h.reason0, h.has_cand, aln_read, aln_strand, aln, h.mapq_cap)
        t = time.perf_counter()
        part, chosen = self._select_part(batch, h.lengths, h.maxe, np.flatnonzero(aln.found & changed[aln_read]), aln,
                                         aln_read, aln_strand, "cpu", reads)
        # the changed reads' hits replaced by their new ones: where each old and new hit goes (-1: dropped)
        starts, moved, placed, runs = swap_plan(group_starts(h.read, n), group_starts(part[1], n), changed)
        old = (h.hit_aln, h.read, h.strand, h.start, h.score, h.end, h.ctg, h.qbeg, h.qend, h.keep, h.shadow)
        fields = [swap_groups(o, p, runs, starts[n]) for o, p in zip(old, part + chosen[6:])]
        g = Hits(batch, h.lengths, h.maxe, None, aln, *fields[:5])
        g.end, g.ctg, g.qbeg, g.qend, g.keep, g.shadow = fields[5:]
        g.best, g.n_best, g.sub, g.has_sub, g.mapq = (a.copy() for a in (h.best, h.n_best, h.sub, h.has_sub, h.mapq))
        g.primary = moved[h.primary]
        for out, fresh in zip((g.best, g.n_best, g.sub, g.has_sub, g.mapq), chosen[:5]):
            out[reads] = fresh[reads]
        g.mapq[reads] = np.minimum(g.mapq[reads], h.mapq_cap[reads])
        g.primary[reads] = placed[chosen[5][reads]]
        self._timed("select", t)
        return self._selected(g, h.reason0, h.has_cand, aln_read, aln_strand, h.mapq_cap)

    def _select_part(self, batch, lengths, maxe, found, aln, aln_read, aln_strand, device, reads=None):
        """(hit_aln, read, strand, start, score, end, ctg, qbeg, qend) of the alignments `found`,
        sorted by (read, strand, start) (hit k is alignment hit_aln[k]), and select_hits' outputs
        for them (reads without any: unmapped; reads: only these selected, see select_hits)."""
        match, unit = self.extender.match_score, self.extender.edit_cost
        h_read, h_strand, h_start = aln_read[found], aln_strand[found], aln.start[found]
        order = order_by_group(h_read, len(batch), h_strand, h_start)
        hit_aln, h_read, h_strand, h_start = found[order], h_read[order], h_strand[order], h_start[order]
        h_score = aln.score[hit_aln]
        end, ctg, qbeg, qend = hit_spans(aln.cigar, aln.cigar_offsets, hit_aln, h_start, h_strand, lengths[h_read],
                                         self.ref.offsets)
        chosen = select_hits(h_read, h_strand, h_start, h_score, qbeg, qend, batch.codes, batch.offsets, maxe, match,
                             unit, batch.first_index, self.opt.seed, device=device, reads=reads)
        return (hit_aln, h_read, h_strand, h_start, h_score, end, ctg, qbeg, qend), chosen

    def _selected(self, h, reason0, has_cand, aln_read, aln_strand, mapq_cap):
        """h with the reads' reasons and what a later reselect needs."""
        h.reason0, h.has_cand, h.aln_read, h.aln_strand, h.mapq_cap = reason0, has_cand, aln_read, aln_strand, mapq_cap
        h.reason = reason0.copy()
        h.reason[h.primary >= 0] = 0
        unaligned = (h.reason == 0) & (h.primary < 0)
        no_aln = REASON["over_max_edits"] if self.extender.scoring == "edits" else REASON["below_min_score"]
        h.reason[unaligned] = np.where(has_cand[unaligned], no_aln, REASON["no_seed_hit"])
        return h

    def supplementary(self, h, primary):
        """Per read, the supplementary hit (-1: none) of its primary and the supplementary's MAPQ
        (scoring extenders, not --all)."""
        n = len(h.batch)
        supp = np.full(n, -1, np.int64)
        supp_mapq = np.zeros(n, np.int64)
        if self.extender.scoring != "edits" and not self.opt.report_all and h.hit_aln.size:
            supp = pick_supplementary(h.read, h.qbeg, h.qend, h.score, h.keep, primary, n)
            ext = self.extender
            supp_mapq = supplementary_mapq(h.read, h.qbeg, h.qend, h.score, h.keep, h.shadow, primary, supp,
                                           ext.match_score, ext.edit_cost, h.maxe, h.lengths)
        return supp, supp_mapq

    def _objective(self, aln, which, length):
        """What the extender maximised for alignments `which` (reads of these lengths): the score
        less the clip penalty of each clipped end (bwa's -L; none known for a plugin's extender)."""
        score = aln.score[which].astype(np.int64)
        params = getattr(self.extender, "params", None)
        if params is None or aln.cigar is None:
            return score
        from pymap.kernels.affine import P_CLIP_L, P_CLIP_R
        lead, trail = _ref_clips(aln, which, length)
        return score - params[P_CLIP_L] * (lead > 0) - params[P_CLIP_R] * (trail > 0)

    def _extend_pruned(self, cands, idx, estimate, floor, margin, pairs):
        """(candidate index, Alignments) of the accepted candidates idx, extended in rounds (align):
        each read's candidates by increasing filter estimate, the first PRUNE_ROUNDS[k] of them in
        round k while the read has no strong alignment yet, then all the others against its bar."""
        unit = self.extender.edit_cost
        est = np.where(estimate[idx] >= 0, estimate[idx], np.iinfo(np.int32).max)
        read = cands.read[idx]
        order = order_by_group(read, len(cands.reads), est, idx)
        rank = group_ranks(read, order)
        no_bar = np.iinfo(np.int64).min // 2
        bar = np.full(len(cands.reads), no_bar, np.int64)
        done = np.zeros(idx.size, np.bool_)
        parts, alns = [], []

        def extend(take, min_score=None):
            done[take] = True
            sub = cands.take(idx[take])
            sub.min_score = None if min_score is None else min_score[sub.read]
            parts.append(idx[take])
            alns.append(self.extend(sub, pairs))
            return sub, alns[-1]

        strong = floor + 4 * unit                  # an unclipped alignment scoring this sets its read's bar
        for lo, hi in zip((0,) + PRUNE_ROUNDS[:-1], PRUNE_ROUNDS):   # reads without a bar yet
            take = round_picks(rank, read, bar, lo, hi, no_bar)
            if take.size == 0:
                continue
            sub, aln = extend(take)
            raise_bars(bar, sub.read, aln.found, aln.score, aln.cigar, aln.cigar_offsets, strong, margin)
        rest = np.flatnonzero(~done)
        if rest.size:
            extend(rest, bar)
        return np.concatenate(parts), Alignments.join(alns)

    def map_batch(self, batch):
        """SAM text for a batch (format_sam's pieces), every read exactly once as primary or unmapped."""
        with self.batch():
            h = self.hits(batch)
            supp, supp_mapq = self.supplementary(h, h.primary)
            return self.write(h, h.primary, h.mapq, supp, supp_mapq)

    def write(self, h, primary, mapq, supp, supp_mapq, pairs=None):
        """SAM text of the records of every read: primary (or unmapped), supplementary, secondaries.
        pairs: None for single reads; else (proper: bool per pair, model) for interleaved mates (read 2p is
        mate 1 of pair p), which adds the pair flags, RNEXT/PNEXT/TLEN, MC and MQ."""
        opt = self.opt
        st = self.stats
        t = time.perf_counter()
        batch = h.batch
        n = len(batch)
        rep_offsets, rep_hit = report_order(h.read, h.score, h.keep, primary, supp, n, opt.max_hits,
                                            opt.report_all)
        mapped = primary >= 0
        rec_read, rec_hit, flag, rec_mapq, rec_xs, rec_sa, rec_mate, rec_tlen = record_fields(
            rep_offsets, rep_hit, primary, mapq, h.has_sub, h.sub, supp, supp_mapq, h.strand, h.start, h.end, h.ctg,
            256 if opt.split_as_secondary else 2048, *((pairs[0], pairs[1].low, pairs[1].high) if pairs else ()))
        rec_aln = np.full(rec_hit.size, -1, np.int64)
        shown = rec_hit >= 0
        rec_aln[shown] = h.hit_aln[rec_hit[shown]]
        rec_cigar, rec_cig_off = gather_cigars(h.aln, rec_aln)
        rec_reason = h.reason[rec_read].astype(np.int64)
        t = self._timed("select", t)
        # MD strings read the reference under every alignment (decoded anew if trimmed since its extension)
        self.ref.ensure(h.start, h.end)

        text = format_sam(rec_read, flag, rec_hit, rec_mapq, rec_reason, rec_xs, rec_sa, rec_mate, rec_tlen,
                          batch.names, batch.name_offsets, batch.codes, batch.rc_codes, batch.offsets,
                          batch.quals, self.ref.codes, self.ctg_names, self.ctg_name_offsets,
                          self.ref.offsets,
                          h.strand, h.start, h.score, rec_cigar, rec_cig_off, self.rg,
                          *(checked_comments(batch, self.own_tags) if opt.append_comment else ()))
        self._timed("sam", t)
        st.reads += n
        st.mapped += int(mapped.sum())
        st.secondary += int((flag & 256 != 0).sum())         # -M: split parts count here
        st.supplementary += int((flag & 2048 != 0).sum())
        for code, name in enumerate(REASONS):
            if code:
                st.unmapped[name] += int((h.reason == code).sum())
        return text

    def pair_hits_of(self, r1, r2):
        """Hits of a batch of pairs (interleave: read 2p is mate 1 of pair p), with the pairs' extender."""
        with self.batch():
            return self.hits(interleave(r1, r2), pairs=True)

    @staticmethod
    def pair_inserts(h, use):
        """Insert sizes of the first `use` pairs of h whose mates both have one confident hit (MAPQ
        >= 20), on one contig, in FR orientation: the sample the insert-size model is learned from."""
        a, b = h.primary[0:2 * use:2], h.primary[1:2 * use:2]
        ok = (a >= 0) & (b >= 0) & (h.mapq[0:2 * use:2] >= 20) & (h.mapq[1:2 * use:2] >= 20)
        ok[ok] &= (h.ctg[a[ok]] == h.ctg[b[ok]]) & (h.strand[a[ok]] != h.strand[b[ok]])
        i, j = a[ok], b[ok]
        fwd_first = h.strand[i] == 0
        f, r = np.where(fwd_first, i, j), np.where(fwd_first, j, i)
        ins = h.end[r] - h.start[f]
        return ins[(ins > 0) & (h.start[f] <= h.start[r])]

    def pair(self, h, model, todo=None, prev=None):
        """pair_hits of h's pairs (todo, prev: only these pairs, the others as prev)."""
        match, unit = max(self.extender.match_score, 1), self.extender.edit_cost
        return pair_hits(h.read, h.strand, h.start, h.end, h.ctg, h.score, h.shadow, h.keep,
                         len(h.batch) // 2, model.mean, model.std, model.low, model.high, match, unit,
                         UNPAIRED_PENALTY * match, h.batch.first_index // 2, self.opt.seed, todo, prev)

    def rescue(self, h, model, picks):
        """Mate rescue, as bwa mem does it: from a read's hits within the unpaired penalty of its best
        whose mate has no hit making a proper pair with them, the window the insert-size model allows
        for the mate is searched (rescue_windows). Only pairs not placed at both mates' best hits are
        searched from, in rounds (RESCUE_ROUNDS: anchors a read, best first), the pairs chosen again
        after each; a hit is an anchor while the pair's score is within its reach: with the mate at
        its highest possible score in the first round, at its best found in the later ones. Returns
        (Hits, picks)."""
        n = len(h.batch)
        match = max(self.extender.match_score, 1)
        # a read with more N than e is not seeded, but its mate may place it (as bwa mem's rescue does)
        rescuable = (h.reason0 == 0) | (h.reason0 == REASON["too_many_n"])
        span = 2 * np.int64(self.ref.offsets[-1] + 1)

        def key(hits):                          # an anchor by (read, strand, start)
            return h.read[hits] * span + h.strand[hits] * (span // 2) + h.start[hits]
        done = np.empty(0, np.int64)            # the anchors searched, sorted
        done_reads = np.zeros(n, np.bool_)      # the reads they are hits of
        for cap in RESCUE_ROUNDS:
            tried = np.zeros(h.read.size, np.bool_)
            near = np.flatnonzero(done_reads[h.read])
            if near.size:                       # np.isin over all hits sorted them: 67 ms for 500,000
                at = np.minimum(np.searchsorted(done, key(near)), done.size - 1)
                tried[near] = done[at] == key(near)
            k = rescue_anchors(group_starts(h.read, n), h.strand, h.start, h.end, h.ctg, h.score, h.keep,
                               picks[0], picks[1], h.lengths * self.extender.match_score, cap != RESCUE_ROUNDS[0],
                               rescuable, tried, model.mean, model.std, model.low, model.high, match,
                               UNPAIRED_PENALTY * match, cap)
            if k.size == 0:
                continue
            done = np.union1d(done, key(k))
            done_reads[h.read[k]] = True
            mate = h.read[k] ^ 1
            # a searched mate that stays unaligned is reported as such, not as unseeded
            h.has_cand = h.has_cand.copy()
            h.has_cand[mate] = True
            searched = mate[(h.reason[mate] == REASON["no_seed_hit"])]
            unaligned = "over_max_edits" if self.extender.scoring == "edits" else "below_min_score"
            h.reason[searched] = REASON[unaligned]
            per = max(RESCUE_POSITIONS // (model.high - model.low + 1), 1)
            parts = np.split(k, read_parts(h.read[k], per))
            found = [f for f in (self.rescue_windows(h, model, part) for part in parts)
                     if f is not None and f[1].found.any()]
            if not found:
                continue        # nothing to select or pair again
            aln = Alignments.join([h.aln] + [more for _, more in found])
            h, picks = self.reselect_pairs(h, np.concatenate([h.aln_read] + [c.read for c, _ in found]),
                                           np.concatenate([h.aln_strand] + [c.strand for c, _ in found]), aln,
                                           np.concatenate([c.read[a.found] for c, a in found]), model, picks)
        return h, picks

    def reselect_pairs(self, h, aln_read, aln_strand, aln, changed_reads, model, picks):
        """reselect() of a batch of pairs, then pair() (picks: its last result) again for the pairs of
        changed_reads only; the others' picks move with their hits, which hits inserted or removed
        before them shifted. Returns (Hits, picks)."""
        g = self.reselect(h, aln_read, aln_strand, aln, changed_reads)
        n = len(h.batch)
        shift = group_starts(g.read, n) - group_starts(h.read, n)
        moved = tuple(np.where(pick >= 0, pick + shift[2 * np.arange(n // 2) + m], -1)
                      for m, pick in enumerate(picks[:2]))
        return g, self.pair(g, model, np.unique(np.asarray(changed_reads, np.int64) // 2), (*moved, picks[2]))

    def rescue_windows(self, h, model, k):
        """The mates of anchors k (hit indices; a read's all here) searched: every position of the
        window the insert-size model allows is a candidate. The filter checks them all (the
        all-positions verification GateKeeper was built for inside mrFAST); of each run of accepted
        neighbouring positions the one with the smallest estimate is extended. Returns (the extended
        candidates, their Alignments), or None when none was."""
        st = self.stats
        mate = h.read[k] ^ 1
        fwd = h.strand[k] == 0
        L = h.lengths[mate]
        # forward anchor: the mate is reverse, its end within [start + low, start + high]; reverse
        # anchor: the mate is forward, its start within [end - high, end - low]
        first = np.where(fwd, h.start[k] + model.low - L, h.end[k] - model.high)
        last = np.where(fwd, h.start[k] + model.high - L, h.end[k] - model.low)
        lo, hi = self.ref.offsets[h.ctg[k]], self.ref.offsets[h.ctg[k] + 1]
        first, last = np.maximum(first, lo), np.minimum(last, hi - L)
        width = np.maximum(last - first + 1, 0)
        idx = np.repeat(np.arange(k.size), width)
        pos = first[idx] + np.arange(idx.size) - np.repeat(np.cumsum(width) - width, width)
        # windows of one mate from neighbouring anchors overlap: each position once, by (mate, strand, pos)
        group = 2 * mate[idx] + np.where(fwd, 1, 0)[idx]
        _, once = np.unique(group * np.int64(self.ref.offsets[-1] + 1) + pos, return_index=True)
        idx, pos, group = idx[once], pos[once], group[once]
        cands = self.candidate_batch(h.batch, mate[idx], group & 1, pos, lo[idx], hi[idx], h.maxe[mate[idx]])
        st.rescue_windows += k.size
        st.rescue_candidates += len(cands)
        if len(cands) == 0:
            return None
        host = self.host_twins if len(cands) <= HOST_RESCUE_POSITIONS else None
        accept, est = self.filter(cands, estimates=True, filt=host and host[0])
        st.rescue_accepted += int(accept.sum())
        a = np.flatnonzero(accept)
        # runs of accepted neighbouring positions of one mate and strand, cut into pieces one
        # extension's band covers: keep the smallest estimate of each piece (one piece per run with a
        # sharp filter)
        run_start = np.ones(a.size, np.bool_)
        run_start[1:] = (group[a[1:]] != group[a[:-1]]) | (pos[a[1:]] - pos[a[:-1]] > 1)
        run = np.cumsum(run_start) - 1
        e = cands.max_edits[a].astype(np.int64)
        reach = 2 * (e if self.extender.scoring == "edits" else np.maximum(e, MIN_BAND)) + 1
        piece = (pos[a] - pos[a][np.flatnonzero(run_start)][run]) // reach
        run = run * (int(piece.max(initial=0)) + 1) + piece
        order = np.lexsort((pos[a], est[a], run))
        first_of_run = np.ones(order.size, np.bool_)
        first_of_run[1:] = run[order[1:]] != run[order[:-1]]
        chosen = cands.take(np.sort(a[order[first_of_run]]))
        st.rescue_extended += len(chosen)
        if len(chosen) == 0:
            return None
        aln = self.extend(chosen, pairs=True, ext=host and host[1])
        st.aligned += int(aln.found.sum())
        return chosen, aln

    def map_pairs(self, r1, r2, model, h=None):
        """SAM text for a batch of pairs (mate i of r1 with mate i of r2), mates adjacent, read 1 first.
        h: the batch's pair_hits_of when already computed."""
        with self.batch():
            return self._pairs_text(r1, r2, model, h)

    def _pairs_text(self, r1, r2, model, h):
        if h is None:
            h = self.pair_hits_of(r1, r2)
        t = time.perf_counter()
        picks = self.pair(h, model)
        t = self._timed("pair", t)
        before = int((picks[0] >= 0).sum())
        h, (pick1, pick2, pair_mapq) = self.rescue(h, model, picks)
        self.stats.rescued_pairs += int((pick1 >= 0).sum()) - before
        t = self._timed("rescue", t)
        if self.pair_extender is not None:
            # below the single-read minimum: only the mates of proper pairs keep their alignment
            weak = np.flatnonzero(h.aln.found & (h.aln.score < self.extender.min_score))
            picked = np.zeros(h.aln.found.shape[0], np.bool_)
            pp = pick1 >= 0
            picked[h.hit_aln[pick1[pp]]] = True
            picked[h.hit_aln[pick2[pp]]] = True
            drop = weak[~picked[weak]]
            if drop.size:
                aln = copy.copy(h.aln)
                aln.found = aln.found.copy()
                aln.found[drop] = False
                h, (pick1, pick2, pair_mapq) = self.reselect_pairs(h, h.aln_read, h.aln_strand, aln, h.aln_read[drop],
                                                                   model, (pick1, pick2, pair_mapq))
        proper = pick1 >= 0
        primary = h.primary.copy()
        mapq = h.mapq.astype(np.int64)
        pp = np.flatnonzero(proper)
        pair_cap = np.minimum(h.mapq_cap[2 * pp], h.mapq_cap[2 * pp + 1])
        for mate, pick in ((0, pick1), (1, pick2)):
            r = 2 * pp + mate
            own = np.where(primary[r] == pick[pp], mapq[r], 0)
            primary[r] = pick[pp]
            mapq[r] = mate_lifted_mapq(own, pair_mapq[pp], pair_cap)
        self.stats.proper_pairs += int(proper.sum())
        self._timed("pair", t)
        supp, supp_mapq = self.supplementary(h, primary)
        return self.write(h, primary, mapq, supp, supp_mapq, pairs=(proper, model))


def read_parts(read, per):
    """Where to cut a sorted array of read numbers into parts of about `per` entries (more where one
    read's entries would straddle a cut): the start of each part but the first."""
    cut = np.flatnonzero(np.diff(read) != 0) + 1
    return cut[np.flatnonzero(np.diff(np.concatenate([[0], cut // per])) != 0)]


def checked_comments(batch, reserved):
    """(comments, comment_offsets) of a batch for -C: InputError naming the first read whose comment
    is not SAM tags, and the tag, or that repeats a tag of `reserved` (tag_codes: those pymap writes
    itself); empty comments where the input had none."""
    if batch.comments is None:
        return np.empty(0, np.uint8), np.zeros(len(batch) + 1, np.int64)
    bad = first_bad_comment(batch.comments, batch.comment_offsets, reserved)
    if bad >= 0:
        j, k = bad_tag(batch.comments, batch.comment_offsets[bad], batch.comment_offsets[bad + 1], reserved)
        tag = bytes(batch.comments[j:k])
        own = len(tag) > 2 and tag_codes([tag[:2]])[0] in reserved
        why = "a tag pymap writes itself" if own else "not a SAM tag (TAG:TYPE:VALUE, e.g. BC:Z:ACGT)"
        raise InputError(f"read {batch.name(bad)}: -C copies its header comment into SAM, and "
                         f"{tag.decode('ascii', 'replace')!r} is {why}")
    return batch.comments, batch.comment_offsets


def mate_lifted_mapq(own, pair_mapq, cap):
    """MAPQ of reads placed in proper pairs: their own (0 where the pair moved them), lifted by the
    pair's MAPQ up to 40 above it; not lifted where the seeder capped either mate at 0 (cap: the
    lower of the two; copies only sampled: a read of a repeat array also fits the array shifted by
    its period near its mate, and its partner is near one of a sample of copies)."""
    return np.maximum(own, np.where(cap > 0, np.minimum(pair_mapq, own + 40), 0))


#: a read's further candidates need only reach its first strong alignment's score less this many units
PRUNE_UNITS = 6

#: candidates of a read (by increasing filter estimate) extended before the rest is pruned: the
#: first; while no strong alignment is found, up to the fourth (reads of high-copy repeats, whose
#: filter estimates rank their candidates poorly); then all the others
PRUNE_ROUNDS = (1, 4)

#: a read's hits a mate is searched from, at most, in each round of a rescue (the last: bwa mem's
#: max_matesw)
RESCUE_ROUNDS = (2, 50)

#: window positions a rescue filters at once, about (memory: a candidate batch of them)
RESCUE_POSITIONS = 2_000_000

#: where the filter and extender run on a GPU, a rescue of at most this many window positions (E. coli
#: pairs: about 8,000 a batch of 100,000 pairs) filters and extends on the host, whose routines give the
#: same results: 2 M pairs on an H200 host in 3.72-3.74 s instead of 4.10-4.15 s (BENCHMARKS.md)
HOST_RESCUE_POSITIONS = 100_000

#: the share of a batch's reads up to which Pipeline.reselect selects only the changed ones, on the
#: host's one thread; more, and the whole batch is selected again (on the threads or the GPU)
RESELECT_SHARE = 0.125

#: what placing two mates apart (not as a proper pair) costs, in matches (bwa mem -U 17)
UNPAIRED_PENALTY = 17


@dataclass
class Hits:
    """The alignments of a batch's reads, sorted by (read, strand, start), and per read the
    selection (select_hits): best, n_best, sub, has_sub, mapq, primary (-1: unmapped), keep."""
    batch: object
    lengths: np.ndarray
    maxe: np.ndarray
    reason: np.ndarray
    aln: Alignments
    hit_aln: np.ndarray
    read: np.ndarray
    strand: np.ndarray
    start: np.ndarray
    score: np.ndarray
    best: np.ndarray = None
    n_best: np.ndarray = None
    sub: np.ndarray = None
    has_sub: np.ndarray = None
    mapq: np.ndarray = None
    primary: np.ndarray = None
    keep: np.ndarray = None
    shadow: np.ndarray = None       # per kept hit: best score of the same locus at another start
    mapq_cap: np.ndarray = None     # per read: the highest MAPQ its seeding supports (Candidates.mapq_cap)
    end: np.ndarray = None          # reference end (exclusive) of each hit
    ctg: np.ndarray = None          # contig of each hit
    qbeg: np.ndarray = None         # the part [qbeg, qend) of its read each hit aligns (query_spans)
    qend: np.ndarray = None
    reason0: np.ndarray = None      # reasons decided before alignment (Pipeline.read_limits)
    has_cand: np.ndarray = None
    aln_read: np.ndarray = None     # read and strand of every alignment (found or not)
    aln_strand: np.ndarray = None


def gpu_stages(seeder, filt, extender):
    """The names of the stages set to run on a GPU (device "gpu"; a filter chain: any of its stages).
    Selection runs where the extender does: its alignments are the selection's input."""
    def on_gpu(stage):
        return any(getattr(s, "device", None) == "gpu" for s in [stage, *getattr(stage, "stages", ())])
    names = tuple(name for name, stage in (("seed", seeder), ("filter", filt), ("extend", extender))
                  if on_gpu(stage))
    return names + ("select",) if "extend" in names else names


def interleave(r1, r2):
    """One ReadBatch of 2n reads: read 2i is r1's read i, 2i + 1 is r2's (first_index doubled)."""
    codes, offsets = interleave_ranges(r1.codes, r1.offsets, r2.codes, r2.offsets)
    names, name_offsets = interleave_ranges(r1.names, r1.name_offsets, r2.names, r2.name_offsets)
    quals = (interleave_ranges(r1.quals, r1.offsets, r2.quals, r2.offsets)[0] if r1.quals.size and r2.quals.size
             else np.empty(0, np.uint8))
    both = ReadBatch(codes, offsets, names, name_offsets, quals, 2 * r1.first_index)
    if r1.rc_codes is not None and r2.rc_codes is not None:
        both.rc_codes = interleave_ranges(r1.rc_codes, r1.offsets, r2.rc_codes, r2.offsets)[0]
    if r1.comments is not None and r2.comments is not None:
        both.comments, both.comment_offsets = interleave_ranges(r1.comments, r1.comment_offsets, r2.comments,
                                                                r2.comment_offsets)
    return both


def _ref_clips(aln, which, length):
    """(leading, trailing) soft-clipped bases of alignments `which` (reads of these lengths) in the
    reference's orientation."""
    lead, kept = query_spans(aln.cigar, aln.cigar_offsets, which, np.zeros(len(which), np.int8), length)
    return lead, length - kept


def gather_cigars(aln, which):
    """The CIGARs of alignments `which` (-1: none) back to back: (cigar, offsets[len(which) + 1])."""
    offs = aln.cigar_offsets
    has = which >= 0
    return gather_ranges(aln.cigar, np.where(has, offs[which], 0), np.where(has, offs[which + 1], 0))


def check_candidates(seeder, cands, n_reads, ref_len):
    """Raise PluginContractError when a seeder's Candidates break the contract (pymap.plugins.Seeder):
    equal-length arrays, reads in range, strands 0/1, sorted by (read, strand, pos) and unique."""
    who = f"seeder {getattr(seeder, 'name', '?')!r}"
    read, strand, pos = (np.asarray(x) for x in (cands.read, cands.strand, cands.pos))
    if not (read.shape == strand.shape == pos.shape and read.ndim == 1):
        raise PluginContractError(f"{who}: Candidates arrays differ in shape")
    code = contracts.candidates_error(*(np.ascontiguousarray(x, np.int64) for x in (read, strand, pos)),
                                      n_reads, ref_len)
    if code:
        raise PluginContractError(f"{who}: " + {
            contracts.READ_OUTSIDE: "a candidate names a read outside the batch",
            contracts.BAD_STRAND: "a candidate strand is not 0 or 1",
            contracts.FAR_POSITION: "a candidate position is far outside the reference",
            contracts.NOT_SORTED: "candidates are not sorted by (read, strand, pos) or not unique"}[code])


def check_alignments(extender, cands, aln, traceback):
    """Raise PluginContractError when an extender's answer breaks the contract (pymap.plugins.Extender)."""
    n = len(cands)
    who = f"extender {getattr(extender, 'name', '?')!r}"
    for name in ("found", "score", "edits", "start"):
        if np.shape(getattr(aln, name)) != (n,):
            raise PluginContractError(f"{who}: Alignments.{name} must hold {n} values")
    aln.found = np.ascontiguousarray(aln.found, np.bool_)
    aln.score = np.ascontiguousarray(aln.score, np.int32)
    aln.edits = np.ascontiguousarray(aln.edits, np.int32)
    aln.start = np.ascontiguousarray(aln.start, np.int64)
    walk = False
    if traceback:
        if aln.cigar is None or aln.cigar_offsets is None or np.shape(aln.cigar_offsets) != (n + 1,):
            raise PluginContractError(f"{who}: traceback=True needs cigar and cigar_offsets ({n + 1} offsets)")
        aln.cigar = np.ascontiguousarray(aln.cigar, np.uint32)
        aln.cigar_offsets = np.ascontiguousarray(aln.cigar_offsets, np.int64)
        offs = aln.cigar_offsets
        walk = bool(offs[0] == 0 and offs[-1] == aln.cigar.shape[0] and np.all(offs[1:] >= offs[:-1]))
    r = cands.reads
    edit_scoring = extender.scoring == "edits"
    err, nm = contracts.alignments_errors(
        aln.found, aln.score, aln.edits, aln.start, cands.max_edits, cands.lo, cands.hi, edit_scoring, walk,
        aln.cigar if walk else np.empty(0, np.uint32), aln.cigar_offsets if walk else np.zeros(n + 1, np.int64),
        r.codes, r.rc_codes, r.offsets, cands.read, cands.strand, cands.ref_codes)
    bad = np.flatnonzero(err)
    code = int(err[bad].min()) if bad.size else 0
    if code in (contracts.TOO_MANY_EDITS, contracts.START_OUTSIDE):
        raise PluginContractError(f"{who}: " + ("an alignment has more edits than its threshold"
                                                if code == contracts.TOO_MANY_EDITS else
                                                "an alignment starts outside its contig"))
    if traceback and not walk:
        raise PluginContractError(f"{who}: cigar_offsets are not monotone from 0 to len(cigar)")
    if not code:
        return
    i = int(bad[np.argmax(err[bad] == code)])
    if code == contracts.READ_SPAN:
        qlen = int(cigar_spans(aln.cigar, aln.cigar_offsets[i:i + 2])[0][0])
        raise PluginContractError(f"{who}: a CIGAR covers {qlen} read bases of {cands.lengths[i]}")
    raise PluginContractError(f"{who}: " + {
        contracts.BAD_OP: "a CIGAR holds an op other than M, I, D, S, or S inside",
        contracts.PAST_END: "an alignment runs past its contig's end",
        contracts.NM_DIFFERS: f"its traceback disagrees with its edit count (NM {aln.edits[i]}, the CIGAR "
                              f"gives {nm[i]})",
        contracts.SCORE_NOT_EDITS: "scoring 'edits' but a score is not -edits"}[code])
