"""The affine extender on CUDA: kernels.affine's per-candidate code, compiled for the GPU.

The kernels call kernels.affine's routines themselves (Numba compiles an @njit function called from
a CUDA kernel for the device), so the GPU writes the same scores, reference ends, clips, NM and
CIGARs as the CPU by construction: there is one alignment routine, not a twin to keep in step.

Two kernels, as the CPU settles candidates before its DP: the first answers the candidates the
ungapped shortcut can (most true candidates of good reads, at O(L)) and lists the others on the
device; the second runs the DP on the listed ones only. In one kernel the threads of a warp that took
the shortcut waited for those running the DP, and nearly every warp held some. One thread per
candidate, grid-stride. Each DP thread's scratch (DP rows, traceback bits, CIGAR) is a column of
device arrays laid out thread-minor (scratch[cell, thread]): the threads of a warp touching the same
cell index touch adjacent bytes. CIGARs are written to a slot of SLOT ops per
candidate; the rare longer ones are finished on the CPU by the same code, as kernels.affine does.
The reference stays on the device (cuda_support.resident), shared with the filter and the seeder.
"""
import numpy as np
from numba import config as numba_config
from numba import njit

from pymap.kernels import affine as cpu
from pymap.kernels.cuda_support import (call_buffers, call_inputs, call_outputs, cuda, kernel_callable, on_gpus,
                                        resident, resident_reads, run_on_scratch, thread_stream)
from pymap.kernels.threads import tally

#: CIGAR ops kept per candidate on the device
SLOT = 16
THREADS_PER_BLOCK = 128
#: threads (and scratch columns) per launch: enough to fill an H100 several times over
MAX_THREADS = 1 << 17
#: scratch bytes per launch at most (longer reads or wider bands get fewer threads)
MAX_SCRATCH = 1 << 31

_shortcut = kernel_callable(cpu._shortcut)
_align_one = kernel_callable(cpu._align_one)
NO_SCORE = cpu.NO_SCORE


@cuda.jit(cache=True)
def _k_zero(n):
    n[0] = 0


@cuda.jit(device=True)
def _span(read_offsets, r):
    """(first base, length) of read r."""
    ra = np.int64(read_offsets[r])
    return ra, np.int64(read_offsets[r + 1]) - ra


@cuda.jit(device=True)
def _put(res, i, s, a, b, x, y, z, k):
    """Candidate i's 7 values (score, reference start and end, clips, NM, CIGAR ops) into res[i]."""
    res[i, 0] = s
    res[i, 1] = a
    res[i, 2] = b
    res[i, 3] = x
    res[i, 4] = y
    res[i, 5] = z
    res[i, 6] = k


@cuda.jit(cache=True)
def _k_settle(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band, c_min, P,
              res, cig, todo, n_todo):
    """The candidates the ungapped shortcut answers (their CIGAR into their slot); the others appended
    to todo (n_todo[0] of them, in no fixed order) for _k_align."""
    for i in range(cuda.grid(1), c_read.shape[0], cuda.gridsize(1)):
        ra, L = _span(read_offsets, c_read[i])
        read = rc_codes if c_strand[i] != 0 else read_codes
        s, a, b, x, y, z, k = _shortcut(read, ra, L, ref_codes, np.int64(c_pos[i]), np.int64(c_lo[i]),
                                        np.int64(c_hi[i]), np.int64(c_band[i]), P, c_min[i], cig[i])
        if s == NO_SCORE:
            todo[cuda.atomic.add(n_todo, 0, 1)] = i
        else:
            _put(res, i, s, a, b, x, y, z, k)


@cuda.jit(cache=True)
def _k_align(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band, c_min, P,
             sH, sF, sG, sX, sGC, sY, sdirs, srev, sout, res, cig, want_cigar, todo, n_todo):
    """The DP of the candidates _k_settle listed; each result lands at its candidate's index, so the
    list's order does not matter."""
    t = cuda.grid(1)
    nt = sH.shape[1]
    if t >= nt:
        return
    H = sH[:, t]
    F = sF[:, t]
    G = sG[:, t]
    X = sX[:, t]
    GC = sGC[:, t]
    Y = sY[:, t]
    dirs = sdirs[:, t]
    rev = srev[:, t]
    out = sout[:, t]
    for q in range(t, n_todo[0], nt):
        i = todo[q]
        ra, L = _span(read_offsets, c_read[i])
        read = rc_codes if c_strand[i] != 0 else read_codes
        s, a, b, x, y, z, k = _align_one(read, ra, L, ref_codes, np.int64(c_pos[i]), np.int64(c_lo[i]),
                                         np.int64(c_hi[i]), np.int64(c_band[i]), P, c_min[i], H, F, G, X, GC, Y,
                                         dirs, rev, out)
        _put(res, i, s, a, b, x, y, z, k)
        if want_cigar and k <= SLOT:
            for j in range(k):
                cig[i, j] = out[j]


def _threads(n, maxl, maxb):
    """Threads of one launch: a multiple of the block size, within MAX_THREADS and MAX_SCRATCH."""
    if numba_config.ENABLE_CUDASIM:
        return 32                      # the simulator runs a thread per Python thread
    per_thread = (maxl + 1) * maxb + 4 * (6 * maxb + 2) + 8 * (2 * maxl + 2)
    t = min(MAX_THREADS, max(1, MAX_SCRATCH // per_thread), n)
    return max(THREADS_PER_BLOCK, (t + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK * THREADS_PER_BLOCK)


def affine_align_cuda(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band,
                      params=None, min_score=None, traceback=True, timing=None):
    """kernels.affine.affine_align (traceback) or affine_scores (not) on the GPUs (the candidates
    split evenly over every visible one): same arguments, same results. timing: a dict whose "kernel_ms"
    gets the kernel's time (CUDA events) added."""
    P = cpu.make_params() if params is None else np.ascontiguousarray(params, np.int64)
    args = cpu._prep(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band)
    n = args[4].shape[0]
    c_min = cpu._min_scores(P, n, min_score)
    if n == 0:
        return cpu._affine_batch(*args, c_min, P, traceback)[:8 if traceback else 6]
    maxl, maxb = cpu._scratch_dims(*[args[i] for i in (2, 4, 6, 7, 8, 9)])

    def part(lo, hi):                              # candidates lo..hi-1 on the current GPU
        m = hi - lo
        nt = _threads(m, maxl, maxb)
        stream = thread_stream()
        d_reads = [*resident_reads(*args[:3]), resident(args[3])]   # a batch's reads serve all its calls
        *d, d_p = call_inputs("affine", [a[lo:hi] for a in args[4:] + (c_min,)] + [P], stream)
        d_res, d_cig, d_todo, d_count = call_buffers(
            "affine.out", [((m, 7), np.int64), ((m, SLOT), np.uint32), ((m,), np.int64), ((1,), np.int64)])
        tpb = min(nt, THREADS_PER_BLOCK)
        specs = [((maxb + 1,), np.int32)] * 2 + [((maxb,), np.int32)] * 4 + [
            (((maxl + 1) * maxb,), np.uint8), ((2 * maxl + 1,), np.uint32), ((2 * maxl + 3,), np.uint32)]

        def launch(scratch):
            _k_zero[1, 1, stream](d_count)
            _k_settle[(m + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK, THREADS_PER_BLOCK, stream](
                *d_reads, *d, d_p, d_res, d_cig, d_todo, d_count)
            _k_align[nt // tpb, tpb, stream](*d_reads, *d, d_p, *scratch, d_res, d_cig, traceback, d_todo, d_count)

        ms = run_on_scratch("affine", specs, nt, stream, launch)
        res, *slots = call_outputs("affine.out", [d_res, d_cig] if traceback else [d_res], stream)
        stream.synchronize()
        return res, (slots[0] if traceback else None), ms

    parts = [r for _, _, r in on_gpus(n, part)]

    def joined(k):                                 # one GPU's arrays as they came back
        return parts[0][k] if len(parts) == 1 else np.concatenate([p[k] for p in parts])
    if timing is not None:                         # the GPUs run side by side: the slowest one's time
        tally(timing, "kernel_ms", max(p[2] for p in parts))
    res = joined(0)
    slots = joined(1) if traceback else np.empty((0, SLOT), np.uint32)
    *values, cigar, offsets, long_ = _unpack(res, slots, traceback)
    if not traceback:
        return tuple(values)
    if long_:
        nops = np.diff(offsets)
        short = nops <= SLOT
        idx = np.flatnonzero(~short)
        sub = cpu._affine_batch(*args[:4], *[a[idx] for a in args[4:]], c_min[idx], P, True)
        cigar[~np.repeat(short, nops)] = sub[6]
    return (*values, cigar, offsets)


@njit(cache=True, nogil=True)
def _unpack(res, slots, want_cigar):
    """The kernel's rows (_put) as affine_align returns them, in one pass: score, reference start
    and end, the clips and NM, and with want_cigar the CIGARs from their slots (cigar, offsets; one
    longer than a slot is left to the caller, which the count of such says)."""
    n = res.shape[0]
    score, start, end = np.empty(n, np.int32), np.empty(n, np.int64), np.empty(n, np.int64)
    x, y, z = np.empty(n, np.int32), np.empty(n, np.int32), np.empty(n, np.int32)
    offsets = np.zeros(n + 1 if want_cigar else 0, np.int64)
    for i in range(n):
        score[i], start[i], end[i] = res[i, 0], res[i, 1], res[i, 2]
        x[i], y[i], z[i] = res[i, 3], res[i, 4], res[i, 5]
        if want_cigar:
            offsets[i + 1] = offsets[i] + res[i, 6]
    cigar = np.empty(offsets[n] if want_cigar else 0, np.uint32)
    long_ = 0
    if want_cigar:
        for i in range(n):
            k = res[i, 6]
            if k > slots.shape[1]:
                long_ += 1
                continue
            for q in range(k):
                cigar[offsets[i] + q] = slots[i, q]
    return score, start, end, x, y, z, cigar, offsets, long_
