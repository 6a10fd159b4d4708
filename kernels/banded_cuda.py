"""The edit-distance extender on CUDA: kernels.banded's per-candidate code, compiled for the GPU.

The kernel calls kernels.banded._candidate itself (Numba compiles it for the device), so the GPU writes
the same distances, starts and CIGARs as the CPU by construction. One thread per candidate,
grid-stride; each thread's scratch (the band's delta vectors S and match bits B) is a column of
device arrays laid out thread-minor (cuda_support.thread_scratch). Each candidate's CIGAR goes to
a slot of 2e + 1 ops (what the CPU kernel allows too: an alignment within e edits has at most that
many), cut from one array at the candidate's bound.
"""
import numpy as np
from numba import config as numba_config

from pymap.kernels import banded as cpu
from pymap.kernels.cuda_support import (call_buffers, call_inputs, call_outputs, cuda, kernel_callable, on_gpus,
                                        resident, resident_reads, run_on_scratch, thread_stream)
from pymap.kernels.threads import tally

THREADS_PER_BLOCK = 128
#: threads (and scratch columns) per launch
MAX_THREADS = 1 << 17
#: scratch bytes per launch at most (longer reads or larger e get fewer threads)
MAX_SCRATCH = 1 << 31

_candidate = kernel_callable(cpu._candidate)


@cuda.jit(cache=True)
def _k_extend(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_maxe,
              sS, sB, bound, res, cig, write):
    t = cuda.grid(1)
    nt = sS.shape[1]
    if t >= nt:
        return
    S = sS[:, t]
    B = sB[:, t]
    for i in range(t, c_read.shape[0], nt):
        d, s, k = _candidate(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi,
                             c_maxe, i, S, B, cig, bound[i], write)
        res[i, 0] = d
        res[i, 1] = s
        res[i, 2] = k


def _threads(n, maxl, nwm, nbm):
    """Threads of one launch: a multiple of the block size, within MAX_THREADS and MAX_SCRATCH."""
    if numba_config.ENABLE_CUDASIM:
        return 32                      # the simulator runs a thread per Python thread
    per_thread = 8 * (4 * (maxl + 1) * nwm + 5 * nbm)
    t = min(MAX_THREADS, max(1, MAX_SCRATCH // per_thread), n)
    return max(THREADS_PER_BLOCK, (t + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK * THREADS_PER_BLOCK)


def banded_cuda(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_maxe,
                traceback=True, timing=None):
    """kernels.banded.banded_align (traceback) or banded_distances (not) on the GPUs (the candidates
    split evenly over every visible one): same arguments, same results. timing: a dict whose
    "kernel_ms" gets the kernel's time (CUDA events) added."""
    args = cpu._inputs(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_maxe)
    n = args[4].shape[0]
    if n == 0:
        out = cpu._extend_batch(*args, traceback)
        return out if traceback else out[:2]
    lengths = np.diff(args[2])
    maxl = int(lengths.max()) if lengths.size else 0
    emax = max(int(args[9].max()), 0)
    nwm = (4 * emax + 64) >> 6                     # as kernels.banded._extend_batch
    nbm = ((maxl - 1) >> 6) + nwm + 2
    slots = 2 * np.maximum(args[9].astype(np.int64), 0) + 1 if traceback else np.zeros(n, np.int64)

    def part(lo, hi):                              # candidates lo..hi-1 on the current GPU
        m = hi - lo
        nt = _threads(m, maxl, nwm, nbm)
        bound = np.zeros(m + 1, np.int64)
        np.cumsum(slots[lo:hi], out=bound[1:])
        stream = thread_stream()
        d_reads = [*resident_reads(*args[:3]), resident(args[3])]
        *d, d_bound = call_inputs("banded", [a[lo:hi] for a in args[4:]] + [bound], stream)
        d_res, d_cig = call_buffers("banded.out", [((m, 3), np.int64), ((max(int(bound[-1]), 1),), np.uint32)])
        tpb = min(nt, THREADS_PER_BLOCK)
        specs = [((4 * (maxl + 1) * nwm,), np.uint64), ((5 * nbm,), np.uint64)]
        ms = run_on_scratch("banded", specs, nt, stream, lambda scratch: _k_extend[nt // tpb, tpb, stream](
            *d_reads, *d, *scratch, d_bound, d_res, d_cig, traceback))
        res, *cig = call_outputs("banded.out", [d_res, d_cig] if traceback else [d_res], stream)
        stream.synchronize()
        return res, (cig[0] if traceback else None), bound, ms

    parts = [r for _, _, r in on_gpus(n, part)]
    res = np.concatenate([p[0] for p in parts])
    if timing is not None:                         # the GPUs run side by side: the slowest one's time
        tally(timing, "kernel_ms", max(p[3] for p in parts))
    dist, start = res[:, 0].astype(np.int32), res[:, 1].copy()
    if not traceback:
        return dist, start
    nops = res[:, 2]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(nops, out=offsets[1:])
    # each candidate's ops sit at the start of its slot: keep the first nops of every slot
    cigs = np.concatenate([p[1][:p[2][-1]] for p in parts])
    slot_start = np.concatenate([p[2][:-1] + sum(q[2][-1] for q in parts[:j]) for j, p in enumerate(parts)])
    within = np.arange(offsets[-1]) - np.repeat(offsets[:-1], nops)
    cigar = cigs[np.repeat(slot_start, nops) + within]
    return dist, start, cigar, offsets
