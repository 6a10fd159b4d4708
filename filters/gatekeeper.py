"""The `gatekeeper-gpu` and `gatekeeper` filters (GateKeeper-GPU, Bingol et al.; GateKeeper, Alser et al.).

Both run the same kernels: a Numba CPU twin (kernels/gatekeeper_cpu.py, bit-parallel, prange over
pairs) or Numba CUDA (kernels/gatekeeper_cuda.py). `gatekeeper` is the original FPGA GateKeeper: the
same algorithm without GateKeeper-GPU's leading/trailing amendment (step 6). See docs/gatekeeper.md.

>>> import numpy as np
>>> from pymap.plugins import create
>>> f = create("filter", "gatekeeper-gpu", device="cpu")
>>> reads = np.frombuffer(b"ACGTACGTACGTACGTACGT", np.uint8).reshape(1, -1)
>>> refs = np.frombuffer(b"ACGTACGTACCTACGTACGT", np.uint8).reshape(1, -1)
>>> f.filter_pairs(reads, refs, 2)
(array([ True]), array([1], dtype=int32))
"""
import numba
import numpy as np

from pymap.kernels.gatekeeper_cpu import (MODE_FULL, MODE_NONE, MODE_PUBLISHED, REJECT, filter_ascii_pairs,
                                    filter_code_candidates)
from pymap.plugins import Filter, check_pairs, group_by_length_and_edits

_DEVICES = ("auto", "cpu", "gpu")
_ENCODES = ("host", "device")
_ENDS = ("published", "full")


def _choice(option, value, accepted):
    if value not in accepted:
        names = ", ".join(repr(a) for a in accepted)
        raise ValueError(f"option {option!r} must be one of {names}, not {value!r}")
    return value


def _cuda_available():
    from pymap.plugins import gpu_usable
    return gpu_usable()


class GateKeeperGPUFilter(Filter):
    """GateKeeper-GPU: shifted Hamming masks, amended, ANDed; CPU twin or CUDA (device=auto|cpu|gpu)."""
    name = "gatekeeper-gpu"
    concurrent = True

    def __init__(self, device="auto", encode="host", ends="published", threads=None):
        _choice("device", device, _DEVICES)
        _choice("encode", encode, _ENCODES)
        _choice("ends", ends, _ENDS)
        self.mode = MODE_PUBLISHED if ends == "published" else MODE_FULL
        self._setup(device, encode, threads)
        self.ends = ends

    def _setup(self, device, encode, threads):
        if threads is not None:
            limit = numba.config.NUMBA_NUM_THREADS
            if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) \
                    or not 1 <= threads <= limit:
                raise ValueError(f"option 'threads' must be an integer from 1 to {limit}, not {threads!r}")
            threads = int(threads)
        if device == "auto":
            device = "gpu" if _cuda_available() else "cpu"
        elif device == "gpu" and not _cuda_available():
            raise ValueError("option 'device' is 'gpu' but no CUDA GPU is available "
                             "(accepted: 'auto', 'cpu', 'gpu')")
        self.device = device
        self.encode = encode
        self.threads = threads
        self._gpu = None
        if device == "gpu":
            from pymap.kernels.gatekeeper_cuda import GateKeeperCUDA
            self._gpu = GateKeeperCUDA(mode=self.mode, encode=encode)

    # -------------------------------------------------------------------------------------------
    def _cpu_call(self, fn, *args):
        if self.threads is None:
            return fn(*args)
        old = numba.get_num_threads()
        numba.set_num_threads(self.threads)
        try:
            return fn(*args)
        finally:
            numba.set_num_threads(old)

    def filter_pairs(self, reads, refs, max_edits):
        reads, refs = check_pairs(reads, refs)
        e = int(max_edits)
        if e < 0:
            raise ValueError(f"max_edits must be >= 0, not {max_edits!r}")
        n, length = reads.shape
        if n == 0 or length == 0:
            return np.ones(n, dtype=np.bool_), np.zeros(n, dtype=np.int32)
        if self._gpu is not None:
            est = self._gpu.filter_pairs(reads, refs, e)
        else:
            est = np.empty(n, np.int32)
            self._cpu_call(filter_ascii_pairs, reads, refs, e, self.mode, est)
        return est != REJECT, est

    def filter_candidates(self, cands):
        """As Filter.filter_candidates, without the ASCII round trip: on the GPU the segments are cut
        from the device-resident reference, on the CPU straight from the mapping codes."""
        n = len(cands)
        if self._gpu is not None:
            est = self._gpu.filter_candidates(*cands.arrays())
            if est is None:        # the reference does not fit on the GPU: cut on the host
                return super().filter_candidates(cands)
            return est != REJECT, est
        est = np.full(n, REJECT, dtype=np.int32)
        arrays = cands.arrays()[:-1]
        for idx, length, e in group_by_length_and_edits(cands):
            if length == 0:
                est[idx] = 0
                continue
            self._cpu_call(filter_code_candidates, *arrays, idx, length, e, self.mode, est)
        return est != REJECT, est

    def host_pairs(self, n, length):
        """Empty (reads, refs) uint8 (n, length) arrays to fill with pairs. On the GPU they are
        page-locked, and with encode=device they travel to the device by DMA without a staging copy."""
        if self._gpu is not None:
            from pymap.kernels.gatekeeper_cuda import pinned_pairs
            return pinned_pairs(n, length)
        return np.empty((n, length), np.uint8), np.empty((n, length), np.uint8)

    @property
    def last_kernel_ms(self):
        """GPU kernel time of the last call (CUDA events), or None on the CPU."""
        return None if self._gpu is None else self._gpu.kernel_ms

    def close(self):
        if self._gpu is not None:
            self._gpu.close()


class GateKeeperFilter(GateKeeperGPUFilter):
    """GateKeeper (the original FPGA design): GateKeeper-GPU without the leading/trailing amendment."""
    name = "gatekeeper"

    def __init__(self, device="auto", encode="host", threads=None):
        _choice("device", device, _DEVICES)
        _choice("encode", encode, _ENCODES)
        self.mode = MODE_NONE
        self._setup(device, encode, threads)
        self.ends = None


__all__ = ["GateKeeperGPUFilter", "GateKeeperFilter", "MODE_PUBLISHED", "MODE_NONE", "MODE_FULL"]
