"""The minimizer seeder's queries on CUDA: kernels.minimizer_index's per-read steps compiled for the GPU.

One thread per read, grid-stride. A thread runs the CPU's own scan_minimizers, lookup_seeds,
seed_hits and pick_clusters on fixed-size scratch columns (thread-minor in the first pass,
thread-major in the wider ones) against the device-resident table; a read with more hits than its
pass holds (a repeat) is flagged and queried again by a wider pass (HIT_CAPACITIES), past the widest
by the CPU kernel, so the candidates are the CPU's in every case (docs/gpu.md).
"""
import numpy as np
from numba import config as numba_config

from pymap.kernels import minimizer_index as cpu
from pymap.kernels.cuda_support import (call_buffers, call_inputs, cuda, current_gpu, fetch_rows,
                                        kernel_callable, on_gpus, resident, run_on_scratch, thread_stream)
from pymap.kernels.minimizers import ring_size
from pymap.kernels.threads import tally

#: hits one read may have in each pass on the device: a read with more is queried again by the next
#: pass, which runs fewer threads with wider scratch, and past the last one by the CPU kernel (reads of
#: repeat families: 40 % of a human-like genome's reads have over 256 hits, 4 % over 4096). One GPU
#: thread sorts a read's hits alone: past 16384 hits the CPU is faster (a pass of 65536 took 89 ms on
#: one H200 for what 16 CPU threads do in a few)
HIT_CAPACITIES = (256, 1024, 4096, 16384)
#: device scratch of a wider pass: this share of the GPU's free memory, at most WIDE_SCRATCH_MAX bytes
#: (its threads, each sorting thousands of hits alone, need to be many: on one H200, 200,000 reads of
#: a 1 Gbp human-like genome in passes of 256, 4096 and 65536 hits took 2.1 s with 4 GB, 0.5 s with 32 GB)
WIDE_SCRATCH_SHARE = 0.25
WIDE_SCRATCH_MAX = 32 << 30
THREADS_PER_BLOCK = 128
MAX_THREADS = 1 << 16

scan_minimizers, lookup_seeds, seed_hits, pick_clusters = map(
    kernel_callable, (cpu.scan_minimizers, cpu.lookup_seeds, cpu.seed_hits, cpu.pick_clusters))


@cuda.jit(cache=True)
def _k_query(codes, offsets, rows, max_edits, m, w, rule, order, low_bits, flag, max_occ, min_hits, min_frac, max_cands,
             bucket, keys, val, val_hi, multi, multi_hi, s_ring, s_oring, s_mk, s_mo, s_lk, s_h0, s_h1, s_stamp,
             s_cpos, s_csup, s_ctmp, s_apos, s_asup, s_aidx, s_cursor, out_strand, out_pos, out_cnt, n_seeds,
             n_masked, masked_max, overflow):
    t = cuda.grid(1)
    nt = s_ring.shape[1]
    if t >= nt:
        return
    ring = s_ring[:, t]
    oring = s_oring[:, t]
    mk = s_mk[:, t]
    mo = s_mo[:, t]
    lk = s_lk[:, :, t]
    h0 = s_h0[:, t]
    h1 = s_h1[:, t]
    stamp = s_stamp[:, t]
    cpos = s_cpos[:, t]
    csup = s_csup[:, t]
    ctmp = s_ctmp[:, t]
    apos = s_apos[:, t]
    asup = s_asup[:, t]
    aidx = s_aidx[:, t]
    cursor = s_cursor[:, t]
    for k in range(stamp.shape[0]):
        stamp[k] = 0
    st = 0
    for r in range(t, out_cnt.shape[0], nt):       # output r: read rows[r] of the batch
        q = rows[r]
        a = offsets[q]
        b = offsets[q + 1]
        L = b - a
        out_cnt[r] = 0
        n_seeds[r] = 0
        n_masked[r] = 0
        masked_max[r] = 0
        if L < w + m - 1:
            continue
        cursor[0] = 0
        scan_minimizers(codes, a, b, m, w, rule, order, ring, oring, mk, mo, cursor, 2 * m, True, -1)
        ns = cursor[0]
        n_seeds[r] = ns
        if ns == 0:
            continue
        total, nm, mmax = lookup_seeds(mk, ns, bucket, keys, val, val_hi, multi, multi_hi, low_bits, flag,
                                       max_occ, False, lk)
        n_masked[r] = nm
        masked_max[r] = mmax
        if total == 0:
            continue
        if total > h0.shape[0]:
            overflow[r] = 1
            continue
        n0, n1 = seed_hits(mk, mo, lk, ns, a, L, m, val, val_hi, multi, multi_hi, h0, h1)
        nc, st = pick_clusters(h0, n0, h1, n1, max_edits[q], min_hits, min_frac, max_cands, stamp, st, cpos, csup,
                               ctmp, apos, asup, aidx, out_strand, out_pos, r * max_cands)
        out_cnt[r] = nc


def _max_threads(tier, per_thread):
    """Threads of a pass on the current GPU: MAX_THREADS for the first, for a wider one as many as its
    share of the free memory holds (their scratch is laid out thread-major: each thread sorts alone)."""
    if tier == 0:
        return MAX_THREADS
    gpu = current_gpu()
    budget = _WIDE_BUDGET.get(gpu)
    if budget is None:                             # fixed at the first wide pass: the scratch is kept
        free, _ = cuda.current_context().get_memory_info()
        budget = _WIDE_BUDGET.setdefault(gpu, min(WIDE_SCRATCH_MAX, int(free * WIDE_SCRATCH_SHARE)))
    return min(MAX_THREADS, max(1, budget // per_thread // THREADS_PER_BLOCK) * THREADS_PER_BLOCK)


_WIDE_BUDGET = {}


def query_batch_cuda(codes, offsets, max_edits, m, w, rule, order, max_occ, min_hits, min_frac, max_cands, arrays,
                     timing=None):
    """kernels.minimizer_index.query_batch on the GPUs (each pass's reads split evenly over every visible
    one), the same arguments and results; the table is copied to each device once. The reads with more
    hits than HIT_CAPACITIES[k] are queried again by pass k + 1 (the batch's reads stay on the device;
    the passes name them by index), past the last by the CPU kernel. timing: a dict whose "kernel_ms"
    gets the kernels' time (CUDA events), "wide_reads" the reads queried again on the device and
    "cpu_reads" those left to the CPU."""
    n = offsets.shape[0] - 1
    out = cpu.query_buffers(n, 0)                  # per-read arrays; the candidate slots stay on the device
    if n == 0:
        return cpu.compact(*out, max_cands)
    if timing is not None:
        for key in ("wide_reads", "cpu_reads"):
            tally(timing, key, 0)
    rows = np.arange(n, dtype=np.int64)
    done = []                                      # (rows, their counts, strand, pos) of each pass
    for tier in range(len(HIT_CAPACITIES)):
        counts, strand, pos, over = _pass(tier, rows, codes, offsets, max_edits, m, w, rule, order, max_occ, min_hits,
                                          min_frac, max_cands, arrays, out, timing)
        done.append((rows, counts, strand, pos))
        rows = rows[over]
        if timing is not None:
            tally(timing, "wide_reads" if tier + 1 < len(HIT_CAPACITIES) else "cpu_reads", int(rows.size))
        if rows.size == 0:
            break
    if rows.size:                                  # more hits than the widest pass holds: the CPU kernel
        lengths = offsets[rows + 1] - offsets[rows]
        sub_off = np.zeros(rows.size + 1, np.int64)
        np.cumsum(lengths, out=sub_off[1:])
        take = np.repeat(offsets[rows] - sub_off[:-1], lengths) + np.arange(sub_off[-1], dtype=np.int64)
        sub = cpu.query_buffers(rows.size, max_cands)
        cpu.query_into(codes[take], sub_off, max_edits[rows], m, w, rule, order, max_occ, min_hits, min_frac,
                       max_cands, arrays, *sub)
        _, strand, pos, rep = cpu.compact(*sub, max_cands)
        done.append((rows, sub[2], strand, pos))
        for j in range(3):
            out[3 + j][rows] = rep[j]
    # each read's candidates come from the one pass that held its hits: placed in read order at once
    counts = out[2]
    for read, c, _, _ in done:
        counts[read] = c
    first = np.cumsum(counts) - counts
    strand, pos = np.empty(int(counts.sum()), np.int8), np.empty(int(counts.sum()), np.int64)
    for read, c, pass_strand, pass_pos in done:
        if pass_strand.size:
            within = np.arange(pass_strand.size, dtype=np.int64) - np.repeat(np.cumsum(c) - c, c)
            at = np.repeat(first[read], c) + within
            strand[at], pos[at] = pass_strand, pass_pos
    return np.repeat(np.arange(n, dtype=np.int64), counts), strand, pos, tuple(out[3:6])


def _pass(tier, rows, codes, offsets, max_edits, m, w, rule, order, max_occ, min_hits, min_frac, max_cands, a, out,
          timing):
    """One pass of query_batch_cuda over the batch's reads `rows`, HIT_CAPACITIES[tier] hits each:
    (counts, strand, pos) of their candidates (0 for the reads over capacity) and the mask of those
    over capacity; writes their seed counts into out[3:6]."""
    low_bits, flag = cpu.low_bits_of(a, m), cpu.flag_of(cpu.wide_values(a))
    hc = HIT_CAPACITIES[tier]
    i64 = np.int64
    maxl = int(np.max(offsets[rows + 1] - offsets[rows]))
    specs = [((ring_size(w),), i64), ((ring_size(w),), i64), ((maxl,), i64), ((maxl,), i64), ((maxl, 3), i64),
             ((hc,), i64), ((hc,), i64), ((maxl,), i64), ((hc + 2,), i64), ((hc + 2,), i64),
             ((8 * (hc + 2),), i64), ((2 * (hc + 2),), i64), ((2 * (hc + 2),), i64), ((2 * (hc + 2),), i64),
             ((1,), i64)]
    per_thread = 8 * sum(int(np.prod(shape)) for shape, _ in specs)
    n = rows.shape[0]
    counts = np.zeros(n, np.int64)
    stats = [np.zeros(n, np.int64) for _ in range(3)]
    over = np.zeros(n, np.uint8)

    def part(lo, hi):                              # rows[lo:hi] on the current GPU
        k = hi - lo
        nt = 32 if numba_config.ENABLE_CUDASIM else min(_max_threads(tier, per_thread),
                                                         -(-k // THREADS_PER_BLOCK) * THREADS_PER_BLOCK)
        tpb = min(nt, THREADS_PER_BLOCK)
        stream = thread_stream()
        d_table = [resident(a[name]) for name in ("bucket", "keys", "val", "val_hi", "multi", "multi_hi")]
        d_codes = resident(codes)
        ins = [np.asarray(x, np.int64) for x in (offsets, rows[lo:hi], max_edits)] + [np.zeros(k, np.uint8)]
        *d_in, d_over = call_inputs("minimizer", ins, stream)
        d_out = call_buffers("minimizer.out", [((k * max_cands,), np.int8), ((k * max_cands,), np.int64)]
                             + [((k,), np.int64)] * 4)
        ms = run_on_scratch("minimizer", specs, nt, stream, lambda scratch: _k_query[nt // tpb, tpb, stream](
            d_codes, *d_in, m, w, rule, order, low_bits, flag, max_occ, min_hits, float(min_frac), max_cands,
            *d_table, *scratch, *d_out, d_over), thread_major=tier > 0)
        for j, host in enumerate([counts] + stats):
            d_out[2 + j].copy_to_host(host[lo:hi], stream=stream)
        d_over.copy_to_host(over[lo:hi], stream=stream)
        stream.synchronize()
        found = [fetch_rows(d_out[j], counts[lo:hi], max_cands, stream) for j in (0, 1)]
        stream.synchronize()
        return ms, found

    parts = on_gpus(n, part)
    if timing is not None:                         # the GPUs run side by side: the slowest one's time
        tally(timing, "kernel_ms", max(t for _, _, (t, _) in parts))
    for j in range(3):
        out[3 + j][rows] = stats[j]
    strand, pos = (np.concatenate([found[j] for _, _, (_, found) in parts]) for j in (0, 1))
    return counts, strand, pos, over.astype(np.bool_)
