"""The minimizer seeder's queries on CUDA: kernels.minimizer_index's per-read steps compiled for the GPU.

One thread per read, grid-stride. A thread runs the CPU's own scan_minimizers, lookup_seeds,
seed_hits and pick_clusters on fixed-size scratch columns (thread-minor) against the device-resident
table; a read with more hits than HIT_CAPACITY (a repeat) is flagged and queried by the CPU kernel
instead, so the candidates are the CPU's in every case (docs/gpu.md).
"""
import numpy as np
from numba import config as numba_config

from pymap.kernels import minimizer_index as cpu
from pymap.kernels.cuda_support import (call_buffers, call_inputs, cuda, fetch_rows, kernel_callable, on_gpus,
                                        replace_rows, resident, run_on_scratch, thread_stream)
from pymap.kernels.minimizers import ring_size
from pymap.kernels.threads import tally

#: hits one read may have on the device (more: the read is queried on the CPU)
HIT_CAPACITY = 256
THREADS_PER_BLOCK = 128
MAX_THREADS = 1 << 16

scan_minimizers, lookup_seeds, seed_hits, pick_clusters = map(
    kernel_callable, (cpu.scan_minimizers, cpu.lookup_seeds, cpu.seed_hits, cpu.pick_clusters))


@cuda.jit(cache=True)
def _k_query(codes, offsets, max_edits, m, w, rule, order, low_bits, flag, max_occ, min_hits, min_frac, max_cands,
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
    for r in range(t, out_cnt.shape[0], nt):
        a = offsets[r]
        b = offsets[r + 1]
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
                                       max_occ, lk)
        n_masked[r] = nm
        masked_max[r] = mmax
        if total == 0:
            continue
        if total > h0.shape[0]:
            overflow[r] = 1
            continue
        n0, n1 = seed_hits(mk, mo, lk, ns, a, L, m, val, val_hi, multi, multi_hi, h0, h1)
        nc, st = pick_clusters(h0, n0, h1, n1, max_edits[r], min_hits, min_frac, max_cands, stamp, st, cpos, csup,
                               ctmp, apos, asup, aidx, out_strand, out_pos, r * max_cands)
        out_cnt[r] = nc


def query_batch_cuda(codes, offsets, max_edits, m, w, rule, order, max_occ, min_hits, min_frac, max_cands, arrays,
                     timing=None):
    """kernels.minimizer_index.query_batch on the GPUs (the reads split evenly over every visible one),
    the same arguments and results; the table is copied to each device once. timing: a dict whose
    "kernel_ms" gets the kernels' time (CUDA events) and "cpu_reads" the reads left to the CPU."""
    n = offsets.shape[0] - 1
    out = cpu.query_buffers(n, 0)                  # per-read arrays; the candidate slots stay on the device
    if n == 0:
        return cpu.compact(*out, max_cands)
    a = arrays
    low_bits, flag = cpu.low_bits_of(a, m), cpu.flag_of(cpu.wide_values(a))
    maxl = int(np.max(np.diff(offsets)))
    hc = HIT_CAPACITY
    over = np.zeros(n, np.uint8)

    def part(lo, hi):                              # reads lo..hi-1 on the current GPU
        k = hi - lo
        nt = 32 if numba_config.ENABLE_CUDASIM else min(MAX_THREADS, -(-k // THREADS_PER_BLOCK) * THREADS_PER_BLOCK)
        tpb = min(nt, THREADS_PER_BLOCK)
        stream = thread_stream()
        d_table = [resident(a[name]) for name in ("bucket", "keys", "val", "val_hi", "multi", "multi_hi")]
        d_codes = resident(codes)
        ins = [np.asarray(x, np.int64) for x in (offsets[lo:hi + 1], max_edits[lo:hi])] + [np.zeros(k, np.uint8)]
        *d_in, d_over = call_inputs("minimizer", ins, stream)
        d_out = call_buffers("minimizer.out", [((k * max_cands,), np.int8), ((k * max_cands,), np.int64)]
                             + [((k,), np.int64)] * 4)
        i64 = np.int64
        specs = [((ring_size(w),), i64), ((ring_size(w),), i64), ((maxl,), i64), ((maxl,), i64), ((maxl, 3), i64),
                 ((hc,), i64), ((hc,), i64), ((maxl,), i64), ((hc + 2,), i64), ((hc + 2,), i64),
                 ((8 * (hc + 2),), i64), ((2 * (hc + 2),), i64), ((2 * (hc + 2),), i64), ((2 * (hc + 2),), i64),
                 ((1,), i64)]
        ms = run_on_scratch("minimizer", specs, nt, stream, lambda scratch: _k_query[nt // tpb, tpb, stream](
            d_codes, *d_in, m, w, rule, order, low_bits, flag, max_occ, min_hits, float(min_frac), max_cands,
            *d_table, *scratch, *d_out, d_over))
        for j in range(2, 6):
            d_out[j].copy_to_host(out[j][lo:hi], stream=stream)
        d_over.copy_to_host(over[lo:hi], stream=stream)
        stream.synchronize()
        found = [fetch_rows(d_out[j], out[2][lo:hi], max_cands, stream) for j in (0, 1)]
        stream.synchronize()
        return ms, found

    done = on_gpus(n, part)
    redo = np.flatnonzero(over)
    if timing is not None:                         # the GPUs run side by side: the slowest one's time
        tally(timing, "kernel_ms", max(t for _, _, (t, _) in done))
        tally(timing, "cpu_reads", int(redo.size))
    strand, pos = (np.concatenate([found[j] for _, _, (_, found) in done]) for j in (0, 1))
    counts = out[2]
    if redo.size:                                  # reads with too many hits: the CPU kernel
        lengths = offsets[redo + 1] - offsets[redo]
        sub_off = np.zeros(redo.size + 1, np.int64)
        np.cumsum(lengths, out=sub_off[1:])
        take = np.repeat(offsets[redo] - sub_off[:-1], lengths) + np.arange(sub_off[-1], dtype=np.int64)
        sub = cpu.query_buffers(redo.size, max_cands)
        cpu.query_into(codes[take], sub_off, max_edits[redo], m, w, rule, order, max_occ, min_hits, min_frac,
                       max_cands, a, *sub)
        _, sub_strand, sub_pos, _ = cpu.compact(*sub, max_cands)
        counts, (strand, pos) = replace_rows(out[2], (strand, pos), redo, sub[2], (sub_strand, sub_pos))
        for j in range(3, 6):
            out[j][redo] = sub[j]
    return np.repeat(np.arange(n, dtype=np.int64), counts), strand, pos, tuple(out[3:6])
