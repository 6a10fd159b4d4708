"""GateKeeper-GPU on CUDA (Numba CUDA kernels and their host driver).

One filtration per thread, the masks in thread-local arrays, the kernels specialised per (L, E, mode)
(compile-time sizes and trip counts, built on demand and kept in `_KERNELS`; compiled once and then
loaded from Numba's disk cache, whose key covers the constants they close over: compiling them cost
every `--device gpu` process seconds). The algorithm is the one of kernels/gatekeeper_cpu.py (bit
planes, 64-bit words; see its docstring and docs/gatekeeper.md), written once more for the device,
one pair per thread, the masks made and ANDed one after another.

Input paths:
* `encode="host"`: the host encodes both sequences to the published 2-bit words (16 bases per uint32,
  kernels.gatekeeper_cpu.encode_pair_words) and copies the words; the kernel turns them into planes.
* `encode="device"`: the raw ASCII bytes are copied and encoded by the kernel (undefined characters
  detected there too).
* candidates (the mapper path): the reference (mapping codes, one byte per base) stays resident on the
  device; only the batch's read codes and the candidates are copied; the kernel cuts the segments.

Host side: batches sized from free device memory, two pinned staging buffers and two streams per GPU
so that encoding/copying the next batch overlaps the kernel of the current one, and the pairs split
evenly over every visible GPU (one host thread per GPU). Works under NUMBA_ENABLE_CUDASIM=1.
"""
import contextlib
import ctypes
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import config as numba_config
from numba import uint64

from pymap.kernels.cuda_support import (call_buffers, call_inputs, cuda, current_gpu, note_gpu, pinned_gpu,
                                        resident_reads, thread_stream)
from pymap.kernels.packed_ref import complete
from pymap.kernels.gatekeeper_cpu import (MODE_FULL, MODE_NONE, MODE_PUBLISHED, REJECT, UNDEFINED,
                                    encode_pair_words)

__all__ = ["kernels", "GateKeeperCUDA", "MODE_PUBLISHED", "MODE_NONE", "MODE_FULL"]

_U = np.uint64
_ALL = _U(0xFFFFFFFFFFFFFFFF)
_Z = _U(0)
_ONE = _U(1)
_FILL1 = ~_U((0x3 << 31) | (1 << 30) | (1 << 62))
_FILL2 = ~_U(0x7 << 30)
_BIT30S = _U((1 << 30) | (1 << 62))
_B31 = _U(1 << 31)
_B30 = _U(1 << 30)
_B29 = _U(1 << 29)
_B3 = _U(3)
_B3_62 = _U(3 << 62)
_NIB1 = _U(0x1111111111111111)
_C1 = _U(0x5555555555555555)
_C2 = _U(0x3333333333333333)
_C4 = _U(0x0F0F0F0F0F0F0F0F)
_C8 = _U(0x00FF00FF00FF00FF)
_C16 = _U(0x0000FFFF0000FFFF)
_M16 = _U(0xFFFF)
_I32_REJECT = np.int32(REJECT)
_I32_UNDEF = np.int32(UNDEFINED)

_ASCII_JIT = {} if numba_config.ENABLE_CUDASIM else {"max_registers": 64}
_KERNELS = {}
_KLOCK = threading.Lock()
_HOST_LOCK = threading.Lock()      # Numba's default threading layer runs one parallel region at a time

THREADS_PER_BLOCK = 128


def kernels(length, max_edits, mode, device=0):
    """The kernels specialised for (L, E, mode): an object with `words`, `ascii` and `candidates`.

    Each GPU gets kernels of its own: Numba loads one compiled library into every GPU of the same
    compute capability and, at exit, unloads it once per GPU, a double free that crashed the
    interpreter after two-GPU runs (numba-cuda 0.30)."""
    key = (int(length), int(max_edits), int(mode), int(device))
    with _KLOCK:
        k = _KERNELS.get(key)
        if k is None:
            k = _KERNELS[key] = _build(*key[:3])
    return k


class _Kernels:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _build(L, E, MODE):
    """Compile-time constants for one (L, E, mode) and the kernels closed over them."""
    NW = max(1, (L + 63) // 64)         # 64-bit plane words
    NWP = NW + 2                        # read planes carry a zero word on each side
    W2 = max(1, (L + 15) // 16)         # published 2-bit words (16 bases each)
    NMASK = (W2 + 1) // 2               # published 32-bit mask words
    TAIL = 16 * W2 - 64 * (NW - 1)
    LASTMASK = _ALL if TAIL >= 64 else _U(~((1 << (64 - TAIL)) - 1) & 0xFFFFFFFFFFFFFFFF)

    @cuda.jit(device=True)
    def fill(x):
        nx = ~x
        g1 = nx & (x << _ONE) & (x >> _ONE) & _FILL1
        g2 = nx & (nx >> _ONE) & (x << _ONE) & (x >> _U(2)) & _FILL2
        f = x | g1 | g2 | (g2 << _ONE)
        x = f | (nx & (x >> _ONE) & (x << _ONE) & (f << _U(2)) & _BIT30S)
        x |= ((x >> _U(3)) & x & _B31) * _U(6)
        x |= ((x >> _U(3)) & x & _B30) * _U(6)
        x |= ((x >> _U(3)) & x & _B29) * _U(6)
        return x

    @cuda.jit(device=True)
    def slot_bits(u, a, b):
        lo = a - 64 * u
        hi = b - 64 * u
        if lo < 0:
            lo = 0
        if hi > 64:
            hi = 64
        if lo >= hi:
            return _Z
        m = _ALL >> _U(lo)
        if hi < 64:
            m &= ~(_ALL >> _U(hi))
        return m

    @cuda.jit(device=True)
    def shifted(p, u, q, r, left):
        # p padded: word u at index u + 1, zero words at 0 and NW + 1
        v = _Z
        if left:
            i = u + q + 1
            if i <= NW:
                v = p[i] << _U(r)
                if r > 0:
                    v |= p[i + 1] >> _U(64 - r)
        else:
            i = u - q + 1
            if i >= 1:
                v = p[i] >> _U(r)
                if r > 0:
                    v |= p[i - 1] << _U(64 - r)
        return v

    @cuda.jit(device=True)
    def and_mask(rh, rl, fh, fl, acc, k, left, ea, eb):
        q = k // 64
        r = k % 64
        prev = _Z
        for u in range(NW):
            x = (shifted(rh, u, q, r, left) ^ fh[u]) | (shifted(rl, u, q, r, left) ^ fl[u])
            if u == NW - 1:
                x &= LASTMASK
            x = fill(x)
            if u > 0:
                c = (prev >> _U(2)) & (x >> _U(63))
                prev |= c * _B3
                c = (prev >> _ONE) & (x >> _U(62)) & _ONE
                x |= c << _U(63)
                prev |= c
                c = prev & (x >> _U(61)) & _ONE
                x |= c * _B3_62
                if eb > ea:
                    prev |= slot_bits(u - 1, ea, eb)
                acc[u - 1] &= prev
            prev = x
        if eb > ea:
            prev |= slot_bits(NW - 1, ea, eb)
        acc[NW - 1] &= prev

    @cuda.jit(device=True)
    def count_errors(x):
        a = x >> _U(3)
        b = x >> _U(2)
        c = x >> _ONE
        two = ((a & ~b & (c | x)) | (b & ~c & x) | (~a & b & c & ~x)) & _NIB1
        return cuda.popc((a | b | c | x) & _NIB1) + cuda.popc(two)

    @cuda.jit(device=True)
    def core(rh, rl, fh, fl, acc):
        count = 0
        for u in range(NW):
            count += cuda.popc((rh[u + 1] ^ fh[u]) | (rl[u + 1] ^ fl[u]))
        if count <= E:
            return count
        if E == 0:
            return REJECT
        for u in range(NW):
            acc[u] = _ALL
        and_mask(rh, rl, fh, fl, acc, 0, False, 0, 0)
        for k in range(1, E + 1):
            if MODE == MODE_PUBLISHED:
                da = k - 1
                db = k
                ia = 32 * NMASK - k
                ib = ia + 1
            elif MODE == MODE_FULL:
                da = 0
                db = k
                ia = L - k
                ib = L
            else:
                da = 0
                db = 0
                ia = 0
                ib = 0
            if ia < 0:
                ia = 0
            and_mask(rh, rl, fh, fl, acc, k, False, da, db)
            and_mask(rh, rl, fh, fl, acc, k, True, ia, ib)
        est = 0
        for u in range(NW):
            est += count_errors(acc[u])
        if est <= E:
            return est
        return REJECT

    @cuda.jit(device=True)
    def compress16(x):
        # the even bits of a 32-bit value -> 16 bits (bit 2 i -> bit i)
        x &= _C1
        x = (x | (x >> _ONE)) & _C2
        x = (x | (x >> _U(2))) & _C4
        x = (x | (x >> _U(4))) & _C8
        x = (x | (x >> _U(8))) & _C16
        return x & _M16

    @cuda.jit(cache=True)
    def k_words(words, defined, est, m):
        """Host-encoded pairs: words (uint32) holds the read words [t * m + i] then the reference
        words [(W2 + t) * m + i]; defined[i] = 0 marks an undefined pair."""
        i = cuda.grid(1)
        if i >= m:
            return
        if defined[i] == 0:
            est[i] = UNDEFINED
            return
        rh = cuda.local.array(NWP, uint64)
        rl = cuda.local.array(NWP, uint64)
        fh = cuda.local.array(NW, uint64)
        fl = cuda.local.array(NW, uint64)
        acc = cuda.local.array(NW, uint64)
        rh[0] = _Z
        rl[0] = _Z
        rh[NW + 1] = _Z
        rl[NW + 1] = _Z
        for u in range(NW):
            h1 = _Z
            l1 = _Z
            h2 = _Z
            l2 = _Z
            for t in range(4 * u, min(4 * u + 4, W2)):
                sh = _U(48 - 16 * (t - 4 * u))
                x = _U(words[t * m + i])
                y = _U(words[(W2 + t) * m + i])
                h1 |= compress16(x >> _ONE) << sh
                l1 |= compress16(x) << sh
                h2 |= compress16(y >> _ONE) << sh
                l2 |= compress16(y) << sh
            rh[u + 1] = h1
            rl[u + 1] = l1
            fh[u] = h2
            fl[u] = l2
        est[i] = core(rh, rl, fh, fl, acc)

    @cuda.jit(device=True)
    def encode_ascii(buf, p0, hi, lo, off):
        # bytes p0 .. p0 + L - 1 of buf (uint32 words, little-endian) -> planes; 1 if not all ACGT
        bad = 0
        w = _Z
        for u in range(NW):
            h = _Z
            l = _Z
            for j in range(64 * u, min(64 * u + 64, L)):
                p = p0 + j
                if j == 0 or (p & 3) == 0:
                    w = _U(buf[p >> 2])
                c = (w >> _U(8 * (p & 3))) & _U(0xFF)
                if c != 65 and c != 67 and c != 71 and c != 84:
                    bad = 1
                sh = _U(63 - (j - 64 * u))
                h |= ((c >> _U(2)) & _ONE) << sh
                l |= ((c >> _ONE) & _ONE) << sh
            hi[u + off] = h
            lo[u + off] = l
        return bad

    # uncapped, the compiler gives this kernel 105 registers per thread: 25 % occupancy (ncu, H100)
    @cuda.jit(cache=True, **_ASCII_JIT)
    def k_ascii(buf, est, m):
        """Device-encoded pairs: buf (uint32 view of bytes) holds the m read rows (L bytes each)
        from byte 0 and the m reference rows from byte m * L."""
        i = cuda.grid(1)
        if i >= m:
            return
        rh = cuda.local.array(NWP, uint64)
        rl = cuda.local.array(NWP, uint64)
        fh = cuda.local.array(NW, uint64)
        fl = cuda.local.array(NW, uint64)
        acc = cuda.local.array(NW, uint64)
        rh[0] = _Z
        rl[0] = _Z
        rh[NW + 1] = _Z
        rl[NW + 1] = _Z
        bad = encode_ascii(buf, i * L, rh, rl, 1)
        bad |= encode_ascii(buf, (m + i) * L, fh, fl, 0)
        if bad:
            est[i] = UNDEFINED
        else:
            est[i] = core(rh, rl, fh, fl, acc)

    @cuda.jit(cache=True)
    def k_candidates(read_codes, rc_codes, offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi,
                     idx, est, m):
        """Mapper candidates idx[0:m] (all of length L, threshold E; an empty idx means 0..m-1):
        segments cut from the resident reference (mapping codes; N outside [c_lo, c_hi));
        writes est[idx[j]]."""
        j = cuda.grid(1)
        if j >= m:
            return
        i = idx[j] if idx.shape[0] else j
        rh = cuda.local.array(NWP, uint64)
        rl = cuda.local.array(NWP, uint64)
        fh = cuda.local.array(NW, uint64)
        fl = cuda.local.array(NW, uint64)
        acc = cuda.local.array(NW, uint64)
        rh[0] = _Z
        rl[0] = _Z
        rh[NW + 1] = _Z
        rl[NW + 1] = _Z
        a = offsets[c_read[i]]
        pos = c_pos[i]
        lo_b = c_lo[i]
        hi_b = c_hi[i]
        strand = c_strand[i]
        bad = 0
        for u in range(NW):
            h1 = _Z
            l1 = _Z
            h2 = _Z
            l2 = _Z
            for t in range(64 * u, min(64 * u + 64, L)):
                if strand:
                    c = _U(rc_codes[a + t])
                else:
                    c = _U(read_codes[a + t])
                q = pos + t
                g = _U(4)
                if q >= lo_b and q < hi_b:
                    g = _U(ref_codes[q])
                if c > _U(3) or g > _U(3):
                    bad = 1
                sh = _U(63 - (t - 64 * u))
                h1 |= ((c >> _ONE) & _ONE) << sh
                l1 |= (c & _ONE) << sh
                h2 |= ((g >> _ONE) & _ONE) << sh
                l2 |= (g & _ONE) << sh
            rh[u + 1] = h1
            rl[u + 1] = l1
            fh[u] = h2
            fl[u] = l2
        if bad:
            est[i] = UNDEFINED
        else:
            est[i] = core(rh, rl, fh, fl, acc)

    return _Kernels(words=k_words, ascii=k_ascii, candidates=k_candidates, length=L, max_edits=E,
                    mode=MODE, words_per_seq=W2)


def _grid(m):
    return (m + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK, THREADS_PER_BLOCK


_PINNED = {}            # data pointer -> nbytes of the page-locked pair buffers made by pinned_pairs


def pinned_pairs(n, length):
    """Two page-locked uint8 (n, length) arrays for reads and reference segments. Pairs given to
    GateKeeperCUDA.filter_pairs(encode="device") in these are copied to the device by DMA straight
    from them, without the staging copy that pageable NumPy arrays need."""
    out = []
    for _ in range(2):
        flat = _pagelocked(max(int(n), 1) * int(length))
        a = flat.reshape(max(int(n), 1), int(length))[:n]
        ptr = flat.__array_interface__["data"][0]
        _PINNED[ptr] = flat.nbytes
        weakref.finalize(flat.base if flat.base is not None else flat, _PINNED.pop, ptr, None)
        out.append(a)
    return tuple(out)


def _pagelocked(nbytes):
    """uint8[nbytes] of page-locked host memory, portable (every GPU's copy engines read it
    directly), freed when the last view of it goes. At interpreter exit it is left to the driver:
    freed by Numba's own finalizers while several GPU contexts were being torn down, such memory
    was freed twice and a finished two-GPU run ended in a segmentation fault."""
    if numba_config.ENABLE_CUDASIM:
        return np.empty(nbytes, np.uint8)
    from numba.cuda.cudadrv.driver import binding, driver
    device = current_gpu()
    with cuda.gpus[device]:
        ptr = int(driver.cuMemHostAlloc(nbytes, binding.CU_MEMHOSTALLOC_PORTABLE))
    raw = (ctypes.c_uint8 * nbytes).from_address(ptr)
    weakref.finalize(raw, _free_pagelocked, device, ptr).atexit = False
    return np.frombuffer(raw, np.uint8)


def _free_pagelocked(device, ptr):
    from numba.cuda.cudadrv.driver import driver
    with cuda.gpus[device]:
        driver.cuMemFreeHost(ptr)


def _in_pinned(a):
    """True when the C-contiguous array a lies inside a buffer made by pinned_pairs."""
    if not a.flags.c_contiguous:
        return False
    p = a.__array_interface__["data"][0]
    return any(base <= p and p + a.nbytes <= base + size for base, size in _PINNED.items())


class _Slot:
    """One staging slot of a GPU: a stream, its pinned host buffers and device buffers, two events."""

    def __init__(self):
        self.stream = cuda.stream()
        self.ev0 = cuda.event()
        self.ev1 = cuda.event()
        self.cap = {}
        self.pin = {}
        self.dev = {}
        self.pending = None

    def buffers(self, name, size, dtype):
        """(pinned host, device) 1-D buffers of at least `size` elements, reused across batches."""
        if self.cap.get(name, (-1, None))[0] < size or self.cap[name][1] != np.dtype(dtype):
            size = max(int(size), 1)
            self.pin[name] = _pagelocked(size * np.dtype(dtype).itemsize).view(dtype)
            self.dev[name] = cuda.device_array(size, dtype=dtype)
            self.cap[name] = (size, np.dtype(dtype))
        return self.pin[name], self.dev[name]


class _Device:
    def __init__(self, index):
        self.index = index
        self.lock = threading.Lock()
        self.slots = None
        self.ref_host = None
        self.ref_dev = None
        self.kernel_ms = 0.0

    def ensure_slots(self):
        if self.slots is None:
            self.slots = [_Slot(), _Slot()]
        return self.slots


class GateKeeperCUDA:
    """Host driver of the CUDA GateKeeper kernels.

    mode: MODE_PUBLISHED (GateKeeper-GPU), MODE_NONE (GateKeeper, no step 6) or MODE_FULL;
    encode: "host" or "device"; max_batch caps the pairs per kernel launch (the batch is otherwise
    sized from free device memory); devices: GPU indices to use (default: every visible GPU).

    After each call `kernel_ms` holds the kernel time (CUDA events; the largest over the GPUs).
    """

    def __init__(self, mode=MODE_PUBLISHED, encode="host", max_batch=1 << 21, devices=None,
                 memory_fraction=0.5):
        if encode not in ("host", "device"):
            raise ValueError(f"encode must be 'host' or 'device', not {encode!r}")
        self.mode = int(mode)
        self.encode = encode
        self.max_batch = int(max_batch)
        self.memory_fraction = float(memory_fraction)
        idx = list(range(len(cuda.gpus))) if devices is None else list(devices)
        if not idx:
            raise ValueError("no CUDA device")
        self.devices = [_Device(d) for d in idx]
        for d in idx:
            note_gpu(d)
        self.kernel_ms = 0.0

    # ------------------------------------------------------------------ helpers
    def _batch_size(self, per_pair, share):
        free, _total = cuda.current_context().get_memory_info()
        by_memory = int(min(free, 1 << 62) * self.memory_fraction / (2 * per_pair))
        return max(1, min(self.max_batch, max(share, 1), max(by_memory, 1024)))

    def _on_devices(self, n, work, locked=True):
        """Split [0, n) evenly over the devices, run work(dev, lo, hi) on each (one thread each); under
        cuda_support.batch_on_gpu, all of it on that device. A device's buffers serve one call at a time:
        work runs under the device's lock (locked=False: work takes it where it needs it)."""
        pinned = [dev for dev in self.devices if dev.index == pinned_gpu()]
        devices = pinned or self.devices
        k = len(devices)
        bounds = [(n * j) // k for j in range(k + 1)]
        jobs = [(dev, bounds[j], bounds[j + 1]) for j, dev in enumerate(devices) if bounds[j + 1] > bounds[j]]

        def run(job):
            dev, lo, hi = job
            with cuda.gpus[dev.index], (dev.lock if locked else contextlib.nullcontext()):
                return work(dev, lo, hi)

        if len(jobs) == 1:
            return [run(jobs[0])]
        with ThreadPoolExecutor(len(jobs)) as ex:
            return list(ex.map(run, jobs))

    @staticmethod
    def _finish(slot, out, dev):
        if slot.pending is None:
            return
        lo, hi, pin_est = slot.pending
        slot.stream.synchronize()
        out[lo:hi] = pin_est[:hi - lo]
        t = slot.ev0.elapsed_time(slot.ev1)
        if t > 0:
            dev.kernel_ms += t
        slot.pending = None

    # ------------------------------------------------------------------ pairs
    def filter_pairs(self, reads, refs, max_edits):
        """Estimates (int32[n]: estimate, -1 rejected, -2 undefined) for ASCII pairs (n, L)."""
        n, length = reads.shape
        est = np.empty(n, np.int32)
        for dev in self.devices:
            dev.kernel_ms = 0.0
        if n:
            self._on_devices(n, lambda dev, lo, hi: self._pairs_on(
                dev, kernels(length, max_edits, self.mode, dev.index), reads, refs, est, lo, hi))
        self.kernel_ms = max(d.kernel_ms for d in self.devices)
        return est

    def _pairs_on(self, dev, k, reads, refs, est, lo, hi):
        length = reads.shape[1]
        w2 = k.words_per_seq
        if self.encode == "host":
            per_pair = 8 * w2 + 1 + 4
        else:
            per_pair = 2 * length + 4
        batch = self._batch_size(per_pair, hi - lo)
        slots = dev.ensure_slots()
        multi = len(self.devices) > 1
        direct = self.encode == "device" and _in_pinned(reads) and _in_pinned(refs)
        for j, a in enumerate(range(lo, hi, batch)):
            b = min(a + batch, hi)
            m = b - a
            slot = slots[j % 2]
            self._finish(slot, est, dev)        # the slot's previous batch is done: buffers free
            s = slot.stream
            pin_est, dev_est = slot.buffers("est", batch, np.int32)
            if self.encode == "host":
                pin_w, dev_w = slot.buffers("words", 2 * w2 * batch, np.uint32)
                pin_d, dev_d = slot.buffers("defined", batch, np.uint8)
                rw = pin_w[:w2 * m].reshape(w2, m)
                fw = pin_w[w2 * m:2 * w2 * m].reshape(w2, m)
                if multi:
                    with _HOST_LOCK:
                        encode_pair_words(reads[a:b], refs[a:b], rw, fw, pin_d[:m])
                else:
                    encode_pair_words(reads[a:b], refs[a:b], rw, fw, pin_d[:m])
                d_w = dev_w[:2 * w2 * m]
                d_w.copy_to_device(pin_w[:2 * w2 * m], stream=s)
                d_d = dev_d[:m]
                d_d.copy_to_device(pin_d[:m], stream=s)
                slot.ev0.record(s)
                k.words[_grid(m)[0], _grid(m)[1], s](d_w, d_d, dev_est, m)
                slot.ev1.record(s)
            else:
                nbytes = 2 * m * length
                nwords = (nbytes + 3) // 4
                pin_b, dev_b = slot.buffers("ascii", (2 * batch * length + 3) // 4, np.uint32)
                if direct:                       # DMA straight from the caller's page-locked rows
                    d8 = dev_b.view(np.uint8)
                    d8[:m * length].copy_to_device(reads[a:b].reshape(-1), stream=s)
                    d8[m * length:nbytes].copy_to_device(refs[a:b].reshape(-1), stream=s)
                else:
                    pin8 = pin_b.view(np.uint8)
                    pin8[:m * length] = reads[a:b].reshape(-1)
                    pin8[m * length:nbytes] = refs[a:b].reshape(-1)
                    dev_b[:nwords].copy_to_device(pin_b[:nwords], stream=s)
                d_b = dev_b[:nwords]
                slot.ev0.record(s)
                k.ascii[_grid(m)[0], _grid(m)[1], s](d_b, dev_est, m)
                slot.ev1.record(s)
            dev_est[:m].copy_to_host(pin_est[:m], stream=s)
            slot.pending = (a, b, pin_est)
        for slot in slots:
            self._finish(slot, est, dev)

    # ------------------------------------------------------------------ candidates
    def ensure_reference(self, ref_codes):
        """Copy the reference (mapping codes) to every device once; False when it does not fit."""
        ok = True

        def put(dev, lo, hi):
            if dev.ref_host is ref_codes:
                return True
            dev.ref_dev = None
            free, _ = cuda.current_context().get_memory_info()
            if ref_codes.nbytes > 0.6 * min(free, 1 << 62):
                dev.ref_host = None
                return False
            complete(ref_codes)          # a reference decoded on demand is copied whole
            dev.ref_dev = cuda.to_device(np.ascontiguousarray(ref_codes))
            dev.ref_host = ref_codes
            return True

        for r in self._on_devices(len(self.devices), put):
            ok = ok and r
        return ok

    def filter_candidates(self, read_codes, read_rc_codes, read_offsets, ref_codes,
                          c_read, c_strand, c_pos, c_lo, c_hi, c_maxe):
        """Estimates for mapper candidates, segments cut on the device from the resident reference.
        Returns None when the reference does not fit on the devices (the caller cuts on the host)."""
        n = c_read.shape[0]
        est = np.full(n, REJECT, np.int32)
        if n == 0:
            return est
        if not self.ensure_reference(ref_codes):
            return None
        lengths = (read_offsets[1:] - read_offsets[:-1])[c_read]
        keys = lengths.astype(np.int64) * 65536 + c_maxe

        def work(dev, lo, hi):
            # the batch's reads are on the device already when the seeder ran there (resident); the
            # candidates go on this thread's stream, and the device's lock is held only while
            # kernels run (Numba loads a kernel's module at its first launch on a GPU unguarded)
            stream = thread_stream()
            d_rc, d_rrc, d_off = resident_reads(read_codes, read_rc_codes, read_offsets)
            per_cand = 4 + 1 + 8 * 3 + 8 + 4
            batch = self._batch_size(per_cand, hi - lo)
            kernel_ms = 0.0
            for a in range(lo, hi, batch):
                b = min(a + batch, hi)
                d_read, d_strand, d_pos, d_lo, d_hi = call_inputs(
                    "gatekeeper", [x[a:b] for x in (c_read, c_strand, c_pos, c_lo, c_hi)], stream)
                (d_est,) = call_buffers("gatekeeper.out", [((b - a,), np.int32)])
                kk = keys[a:b]
                if kk.min() == kk.max():            # the usual batch: one read length, one E
                    groups = [(kk[0], np.zeros(0, np.int64), b - a)]
                else:
                    groups = []
                    for key in np.unique(kk):
                        idx = np.flatnonzero(kk == key).astype(np.int64)
                        groups.append((key, idx, idx.size))
                for key, idx, m in groups:
                    length, e = int(key // 65536), int(key % 65536)
                    if length == 0:
                        continue
                    kern = kernels(length, e, self.mode, dev.index)
                    (d_idx,) = call_inputs("gatekeeper.idx", [idx], stream)
                    g, t = _grid(m)
                    ev0, ev1 = cuda.event(), cuda.event()
                    with dev.lock:
                        ev0.record(stream)
                        kern.candidates[g, t, stream](d_rc, d_rrc, d_off, dev.ref_dev, d_read, d_strand,
                                                      d_pos, d_lo, d_hi, d_idx, d_est, m)
                        ev1.record(stream)
                    ev1.synchronize()
                    kernel_ms += max(ev0.elapsed_time(ev1), 0.0)
                part = d_est.copy_to_host(stream=stream)
                stream.synchronize()
                zero = (keys[a:b] // 65536) == 0
                part[zero] = 0
                est[a:b] = part
            return kernel_ms

        self.kernel_ms = max(self._on_devices(n, work, locked=False))
        return est

    def close(self):
        """Free the device and pinned buffers now, each in its own GPU's context (left to the
        interpreter's exit, multi-GPU teardown freed pinned memory twice: glibc abort)."""
        for dev in self.devices:
            with cuda.gpus[dev.index]:
                dev.slots = None
                dev.ref_dev = None
                dev.ref_host = None
                pending = getattr(cuda.current_context(), "deallocations", None)   # None: simulator
                if pending is not None:
                    pending.clear()


def available():
    """True when a CUDA GPU (or the simulator) can run the kernels."""
    try:
        return bool(cuda.is_available())
    except Exception:     # noqa: BLE001 - a broken driver counts as no GPU
        return False
