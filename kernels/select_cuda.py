"""Selection on CUDA: kernels.select's per-read routine (select_read) compiled for the GPU, a thread a
read. One routine, not a twin: the GPU merges the same loci, picks the same primary and writes the
same MAPQ as the CPU by construction (length_cap's logarithms come from one integer table).

The hits come from the host (they are sorted and measured there); the read codes, their offsets and
the logarithm table are the resident copies the other stages use (cuda_support.resident).
"""
from pymap.kernels import select as cpu
from pymap.kernels.cuda_support import call_buffers, call_inputs, cuda, gpu_lock, kernel_callable, on_gpus, resident, \
    thread_stream

THREADS_PER_BLOCK = 128
#: blocks of one launch at most (grid-stride beyond)
MAX_BLOCKS = 4096

_select_read = kernel_callable(cpu.select_read)


@cuda.jit(cache=True)
def _k_select(lo, hi, first, h_strand, h_start, h_score, h_qbeg, h_qend, codes, offsets, read_maxe, match, unit,
              global_first, seed, ln_q, best, n_best, sub, has_sub, mapq, primary, keep, shadow):
    for r in range(lo + cuda.grid(1), hi, cuda.gridsize(1)):
        _select_read(r, first, h_strand, h_start, h_score, h_qbeg, h_qend, codes, offsets, read_maxe, match, unit,
                     global_first, seed, ln_q, best, n_best, sub, has_sub, mapq, primary, keep, shadow)


def select_hits_cuda(first, h_strand, h_start, h_score, h_qbeg, h_qend, codes, offsets, read_maxe, match, unit,
                     global_first, seed, ln_q):
    """kernels.select.select_hits' arrays (as it prepares them) on the GPUs, the reads split evenly
    over every visible one: the same outputs."""
    n_reads = first.shape[0] - 1
    out = cpu.select_outputs(n_reads, int(first[-1]))
    if n_reads == 0:
        return out

    def part(lo, hi):                              # reads lo..hi-1 on the current GPU, all hits there
        stream = thread_stream()
        d_in = call_inputs("select", [first, h_strand, h_start, h_score, h_qbeg, h_qend, read_maxe], stream)
        d_codes, d_offsets, d_ln = resident(codes), resident(offsets), resident(ln_q)
        d_out = call_buffers("select.out", [(a.shape, a.dtype) for a in out])
        blocks = max(1, min(MAX_BLOCKS, -(-(hi - lo) // THREADS_PER_BLOCK)))
        with gpu_lock("select"):       # Numba loads a kernel's module at its first launch on a GPU unguarded
            _k_select[blocks, THREADS_PER_BLOCK, stream](lo, hi, *d_in[:6], d_codes, d_offsets, d_in[6], match,
                                                         unit, global_first, seed, d_ln, *d_out)
        lo_hit, hi_hit = int(first[lo]), int(first[hi])
        for host, dev, (a, b) in zip(out, d_out, [(lo, hi)] * 6 + [(lo_hit, hi_hit)] * 2):
            if b > a:
                dev[a:b].copy_to_host(host[a:b], stream=stream)
        stream.synchronize()

    on_gpus(n_reads, part)
    return out
