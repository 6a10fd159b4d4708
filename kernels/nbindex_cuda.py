"""The neighborhood seeder's queries on CUDA ('phf' layout): kernels.nbindex_query's per-read
routines compiled for the GPU.

One thread per read and strand, grid-stride. A thread runs the CPU's own pattern_rows (patterns
and degenerated neighborhoods), phf_stages (BDZ perfect-hash lookups in the device-resident index),
push_positions and diagonal_clusters.cluster_hits, on fixed-size scratch columns laid out
thread-minor. A read whose hits or pattern rows do not fit those columns (a repeat: up to max_occ
positions per pattern) is flagged and its candidates are found by the CPU kernel instead, so the
candidates are the CPU's in every case.
"""
import numpy as np
from numba import config as numba_config

from pymap.kernels import diagonal_clusters as dc
from pymap.kernels import nbindex_query as cpu
from pymap.kernels.cuda_support import (call_buffers, call_inputs, cuda, fetch_rows, kernel_callable, on_gpus,
                                        replace_rows, resident, resident_reads, run_on_scratch, thread_stream)
from pymap.kernels.threads import tally

#: hits one read strand may have on the device (more: the read is seeded on the CPU)
HIT_CAPACITY = 512
THREADS_PER_BLOCK = 128
MAX_THREADS = 1 << 17

pattern_rows, phf_stages, push_positions, cluster_hits = map(
    kernel_callable, (cpu.pattern_rows, cpu.phf_stages, cpu.push_positions, dc.cluster_hits))


@cuda.jit(cache=True)
def _k_query(codes, rc_codes, offsets, max_edits, steps, care, span, ln, e_nb, max_occ, max_cands, min_hits,
             blk, g, slots, pos, s_hits, s_work, s_var, s_combo, s_stamp, s_cpos, s_csup, s_tmp,
             out_pos, out_cnt, overflow):
    t = cuda.grid(1)
    nt = s_hits.shape[1]
    if t >= nt:
        return
    hits = s_hits[:, t]
    work = s_work[:, :, t]
    var = s_var[:, t]
    combo = s_combo[:, t]
    stamp = s_stamp[:, t]
    cpos = s_cpos[:, t]
    csup = s_csup[:, t]
    tmp = s_tmp[:, t]
    for k in range(stamp.shape[0]):
        stamp[k] = 0
    st = 0
    for rs in range(t, out_cnt.shape[0], nt):
        r = rs // 2
        a = offsets[r]
        b = offsets[r + 1]
        seq = codes[a:b] if rs % 2 == 0 else rc_codes[a:b]
        out_cnt[rs] = 0
        ni, npat = pattern_rows(seq, care, span, ln, steps[r], e_nb, work, var, combo)
        if ni < 0 or npat > stamp.shape[0]:
            overflow[r] = 1
            continue
        phf_stages(blk, g, slots, work, ni)
        nh = push_positions(work, ni, pos, max_occ, 0, hits)
        if nh < 0:
            overflow[r] = 1
            continue
        base = rs * max_cands
        nc, st = cluster_hits(hits, nh, max_edits[r], min_hits, max_cands, stamp, st, cpos, csup,
                              out_pos[base:base + max_cands], tmp)
        out_cnt[rs] = nc


def query_batch_cuda(codes, rc_codes, offsets, max_edits, care, span, ln, step, lossless, e_nb, max_occ, max_cands,
                     min_hits, blk, g, slots, pos, timing=None, reads=None):
    """kernels.nbindex_query.query_batch for the 'phf' layout on the GPUs (the reads split evenly
    over every visible one), same arguments but for a batch's reads (offsets, max_edits: of every
    read codes holds) of which reads=(r0, r1) are queried (None: all); returns (counts int64[2n],
    positions) of those n reads: the candidate count of each read/strand slot (2 r + s) and their
    positions, slot after slot (only these leave the device). The batch's reads and the index arrays
    are copied to the device once (cuda_support.resident_reads, resident), whatever part is queried.
    timing: a dict whose "kernel_ms" gets the kernel's time (CUDA events) added."""
    batch_offsets = offsets
    r0, r1 = (0, offsets.shape[0] - 1) if reads is None else reads
    offsets, max_edits = offsets[r0:r1 + 1], max_edits[r0:r1]
    n = offsets.shape[0] - 1
    counts = np.zeros(2 * n, np.int64)
    if n == 0:
        return counts, np.empty(0, np.int64)
    steps = cpu.read_steps(offsets, max_edits, span + ln, step, lossless)
    lengths = np.diff(offsets)
    width = span + ln
    npat_max = int(np.max(np.where(lengths >= width, (lengths - width + steps - 1) // steps + 1, 0)))
    nvar = cpu.n_variants(ln, e_nb)
    rows = max(1, npat_max * nvar)
    over = np.zeros(n, np.uint8)

    def part(lo, hi):                              # reads lo..hi-1 on the current GPU
        m = hi - lo
        nt = 32 if numba_config.ENABLE_CUDASIM else min(MAX_THREADS, -(-2 * m // THREADS_PER_BLOCK) * THREADS_PER_BLOCK)
        tpb = min(nt, THREADS_PER_BLOCK)
        stream = thread_stream()
        d_index = [resident(a) for a in (blk, g, slots, pos)]
        d_reads = resident_reads(codes, rc_codes, batch_offsets)[:2]
        *d_in, d_over = call_inputs("nbindex", [np.asarray(a, np.int64) for a in (
            offsets[lo:hi + 1], max_edits[lo:hi], steps[lo:hi], care)] + [np.zeros(m, np.uint8)], stream)
        d_pos, d_cnt = call_buffers("nbindex.out", [((2 * m * max_cands,), np.int64), ((2 * m,), np.int64)])
        specs = [((HIT_CAPACITY,), np.int64), ((rows, 7), np.int64), ((nvar,), np.int64), ((max(e_nb, 1),), np.int64),
                 ((max(npat_max, 1),), np.int64), ((HIT_CAPACITY,), np.int64), ((HIT_CAPACITY,), np.int64),
                 ((4 * HIT_CAPACITY,), np.int64)]
        ms = run_on_scratch("nbindex", specs, nt, stream, lambda scratch: _k_query[nt // tpb, tpb, stream](
            *d_reads, *d_in, span, ln, e_nb, max_occ, max_cands, min_hits, *d_index, *scratch, d_pos, d_cnt, d_over))
        d_cnt.copy_to_host(counts[2 * lo:2 * hi], stream=stream)
        d_over.copy_to_host(over[lo:hi], stream=stream)
        stream.synchronize()
        found = fetch_rows(d_pos, counts[2 * lo:2 * hi], max_cands, stream)
        stream.synchronize()
        return ms, found

    done = on_gpus(n, part)
    if timing is not None:                         # the GPUs run side by side: the slowest one's time
        tally(timing, "kernel_ms", max(t for _, _, (t, _) in done))
        tally(timing, "cpu_reads", int(over.sum()))
    positions = np.concatenate([found for _, _, (_, found) in done])
    redo = np.flatnonzero(over)
    if redo.size:
        return _on_cpu(redo, codes, rc_codes, offsets, max_edits, care, span, ln, step, lossless, e_nb, max_occ,
                       max_cands, min_hits, blk, g, slots, pos, counts, positions)
    return counts, positions


def _on_cpu(redo, codes, rc_codes, offsets, max_edits, care, span, ln, step, lossless, e_nb, max_occ, max_cands,
            min_hits, blk, g, slots, pos, counts, positions):
    """(counts, positions) with the slots of reads `redo` replaced by the CPU kernel's candidates."""
    lengths = offsets[redo + 1] - offsets[redo]
    sub_off = np.zeros(redo.size + 1, np.int64)
    np.cumsum(lengths, out=sub_off[1:])
    take = np.repeat(offsets[redo] - sub_off[:-1], lengths) + np.arange(sub_off[-1], dtype=np.int64)
    sub_pos = np.empty(2 * redo.size * max_cands, np.int64)
    sub_cnt = np.zeros(2 * redo.size, np.int64)
    cpu.query_batch(codes[take], rc_codes[take], sub_off, max_edits[redo], care, span, ln, step, lossless, e_nb,
                    max_occ, max_cands, min_hits, blk, g, slots, pos, None, None, None, sub_pos, sub_cnt)
    slots_of = (2 * redo[:, None] + np.arange(2)[None, :]).reshape(-1)
    _, _, sub_found = cpu.compact(sub_pos, sub_cnt, max_cands, 0)
    counts, (found,) = replace_rows(counts, (positions,), slots_of, sub_cnt, (sub_found,))
    return counts, found
