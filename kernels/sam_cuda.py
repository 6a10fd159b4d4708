"""SAM text on the GPU: kernels.sam's record writer compiled for CUDA (Numba compiles the @njit writer
for the device), so that a batch extended on a GPU is formatted there and only its text comes back
over the bus: the same bytes as the CPU by construction (one writer, not a twin).

One thread per record, two kernels: each record's size (the writer run against an empty buffer
writes nothing and returns where the record would end and the furthest byte it would touch: MD is
built past room for the NM and MD tags, then moved back); then each record written into a slot of
the block's shared memory (or, past STAGE bytes, of a device array) and the block's records copied
out one after another by all its threads, so that the text's stores are coalesced. The batch's
reads and the reference are the resident copies the filter and the extender use; the records'
fields, names, qualities, hits and CIGARs are copied in.
"""
import numpy as np
from numba import config as numba_config
from numba import uint8

from pymap.kernels import sam as cpu
from pymap.kernels.cuda_support import (call_buffers, call_inputs, cuda, gpu_lock, kernel_callable, on_gpus, resident,
                                        thread_stream)
from pymap.kernels.threads import tally

THREADS_PER_BLOCK = 128

_record = kernel_callable(cpu._record)

# positions in kernels.sam.record_arrays of the arrays kept on the device for the run or the batch
# (codes, rc_codes, offsets, ref_codes, the contigs' names and offsets); the others are copied per call
_RESIDENT = (11, 12, 13, 15, 16, 17, 18)


@cuda.jit(cache=True)
def _k_sizes(r0, text, rec_read, rec_flag, rec_hit, rec_mapq, rec_reason, rec_xs, rec_sa, rec_mate, rec_tlen,
             names, name_offsets, codes, rc_codes, offsets, quals, ref_codes, ctg_names, ctg_name_offsets,
             ctg_offsets, h_strand, h_start, h_score, cigar, cigar_offsets, rg, size, high):
    for t in range(cuda.grid(1), size.shape[0], cuda.gridsize(1)):
        e, h = _record(text[:0], np.int64(0), text, r0 + t, rec_read, rec_flag, rec_hit, rec_mapq, rec_reason,
                       rec_xs, rec_sa, rec_mate, rec_tlen, names, name_offsets, codes, rc_codes, offsets, quals,
                       ref_codes, ctg_names, ctg_name_offsets, ctg_offsets, h_strand, h_start, h_score, cigar,
                       cigar_offsets, rg)
        size[t] = e
        high[t] = h


#: records written by one block at a time, each in STAGE bytes of its shared memory (32 KiB a block)
BLOCK = 32
STAGE = 1024
_STAGE_BYTES = BLOCK * STAGE


@cuda.jit(cache=True)
def _k_write(r0, first, slot_first, slots, out, text, rec_read, rec_flag, rec_hit, rec_mapq, rec_reason, rec_xs,
             rec_sa, rec_mate, rec_tlen, names, name_offsets, codes, rc_codes, offsets, quals, ref_codes, ctg_names,
             ctg_name_offsets, ctg_offsets, h_strand, h_start, h_score, cigar, cigar_offsets, rg):
    stage = cuda.shared.array(_STAGE_BYTES, uint8)
    tid = cuda.threadIdx.x
    m = first.shape[0] - 1
    for base in range(cuda.blockIdx.x * BLOCK, m, cuda.gridDim.x * BLOCK):
        t = base + tid
        if t < m:
            a = slot_first[t]
            b = slot_first[t + 1]
            buf = slots[a:b] if b > a else stage[tid * STAGE:(tid + 1) * STAGE]
            _record(buf, np.int64(0), text, r0 + t, rec_read, rec_flag, rec_hit, rec_mapq, rec_reason, rec_xs,
                    rec_sa, rec_mate, rec_tlen, names, name_offsets, codes, rc_codes, offsets, quals, ref_codes,
                    ctg_names, ctg_name_offsets, ctg_offsets, h_strand, h_start, h_score, cigar, cigar_offsets, rg)
        cuda.syncthreads()
        for j in range(min(BLOCK, m - base)):       # the block's records, each by all its threads
            u = base + j
            a = slot_first[u]
            o = first[u]
            for k in range(tid, first[u + 1] - o, BLOCK):
                out[o + k] = slots[a + k] if slot_first[u + 1] > a else stage[j * STAGE + k]
        cuda.syncthreads()


def _grid(n, tpb):
    tpb = 32 if numba_config.ENABLE_CUDASIM else tpb
    return max(1, min(4096, -(-n // tpb))), tpb


def _bounds(counts):
    first = np.zeros(counts.shape[0] + 1, np.int64)
    np.cumsum(counts, out=first[1:])
    return first


def format_sam_cuda(*fields, timing=None):
    """kernels.sam.format_sam on the GPU(s): same arguments, same text (uint8). The records are split
    evenly over the visible GPUs (one under cuda_support.batch_on_gpu). timing: a dict whose
    "kernel_ms" gets the kernels' time (CUDA events) added."""
    arrays = cpu.record_arrays(*fields)
    n = arrays[0].shape[0]
    if n == 0:
        return np.empty(0, np.uint8)

    def part(lo, hi):                          # records lo..hi-1 on the current GPU
        m = hi - lo
        stream = thread_stream()
        text = resident(cpu.TEXT)
        kept = {i: resident(arrays[i]) for i in _RESIDENT}
        rest = [i for i in range(len(arrays)) if i not in kept]
        copied = dict(zip(rest, call_inputs("sam", [arrays[i] for i in rest], stream)))
        d = [kept[i] if i in kept else copied[i] for i in range(len(arrays))]
        d_size, d_high = call_buffers("sam.sizes", [((m,), np.int64), ((m,), np.int64)])
        blocks, tpb = _grid(m, THREADS_PER_BLOCK)
        ev = [cuda.event() for _ in range(4)]
        ev[0].record(stream)
        with gpu_lock("sam"):        # Numba loads a kernel's module at its first launch on a GPU unguarded
            _k_sizes[blocks, tpb, stream](lo, text, *d, d_size, d_high)
        ev[1].record(stream)
        size = d_size.copy_to_host(stream=stream)
        high = d_high.copy_to_host(stream=stream)
        stream.synchronize()
        first = _bounds(size)
        slot_first = _bounds(np.where(high > STAGE, high, 0))    # device slots for the records past STAGE
        d_first, d_slot_first = call_inputs("sam.bounds", [first, slot_first], stream)
        d_slots, d_out = call_buffers("sam.out", [((max(1, int(slot_first[-1])),), np.uint8),
                                                  ((int(first[-1]),), np.uint8)])
        ev[2].record(stream)
        with gpu_lock("sam"):
            _k_write[_grid(m, BLOCK)[0], BLOCK, stream](lo, d_first, d_slot_first, d_slots, d_out, text, *d)
        ev[3].record(stream)
        out = np.empty(int(first[-1]), np.uint8)
        d_out.copy_to_host(out, stream=stream)
        stream.synchronize()
        return out, ev[0].elapsed_time(ev[1]) + ev[2].elapsed_time(ev[3])

    parts = [r for _, _, r in on_gpus(n, part)]
    if timing is not None:                     # the GPUs run side by side: the slowest one's time
        tally(timing, "kernel_ms", max(p[1] for p in parts))
    return parts[0][0] if len(parts) == 1 else np.concatenate([p[0] for p in parts])
