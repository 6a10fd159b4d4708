"""Import numba.cuda through here: one place for the compatibility shims of the GPU stack.

numba-cuda 0.30 still calls `np.row_stack`, which NumPy 2.4 removed (it was an alias of
`np.vstack`); the lent GPU machines ship such a NumPy. Restoring the alias is harmless elsewhere.
"""
import atexit
import contextlib
import gc
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

from numba import cuda  # noqa: E402

from pymap.kernels.packed_ref import complete  # noqa: E402


_DRIVER_LOCK = threading.Lock()


def cuda_available():
    """True when a usable CUDA GPU (or the simulator) is present; a broken driver counts as none.
    Threads ask one at a time: Numba's driver marks itself initialized before cuInit returns, so a
    thread asking during another's first call went on to CUDA calls that failed with
    CUDA_ERROR_NOT_INITIALIZED (a Dask worker's threads building their pipelines at once). Every GPU
    stage asks this before its first CUDA call (plugins.gpu_usable). Numba's list of the GPUs
    (cuda.gpus) is made here too: it is made at its first use, and two threads making it at once
    failed with "key already in dictionary" (the context start's thread and a filter's set-up)."""
    with _DRIVER_LOCK:
        try:
            return bool(cuda.is_available()) and (_simulator() or len(cuda.gpus) > 0)
        except Exception:     # noqa: BLE001
            return False


def start_contexts():
    """Make each GPU's context on a thread of its own (started once; warm_up waits for it). The driver's
    start (cuInit and the primary contexts, 0.35 s measured) waits on the driver, not on Python's lock,
    so it overlaps the reference's and index's loading and the stages' set-up. Nothing under the
    simulator."""
    with _DRIVER_LOCK:
        if _CONTEXTS or _simulator():
            return
        _CONTEXTS.append(_POOL.submit(_make_contexts))


def _make_contexts():
    if not cuda_available():
        return
    for gpu in cuda.gpus:
        with gpu:
            cuda.current_context()


_CONTEXTS = []
_POOL = ThreadPoolExecutor(1, thread_name_prefix="pymap-cuda-start")


def warm_up():
    """The start of a GPU run that needs no reads, done before the first batch: each GPU's context
    (start_contexts, waited for here). Numba's CUDA registries are not installed: kernels load from
    the cache without them (_load_without_refresh)."""
    start_contexts()
    if _CONTEXTS:
        _CONTEXTS[0].result()


def _load_without_refresh():
    """CUDA kernels loaded from Numba's cache without refreshing the CUDA target context first
    (pymap.jitcache.skip_refresh, as for the CPU). Numba-cuda refreshes it before every load; the
    first refresh imports some forty modules and installs the CUDA typing and lowering registries
    (0.2-0.3 s of a GPU run's start, BENCHMARKS.md). Loading a kernel's PTX or cubin and launching it
    needs none of them; compiling refreshes the context itself."""
    try:
        from numba.cuda.core import caching
    except ImportError:        # a numba-cuda laid out otherwise loads as it does
        return
    from pymap.jitcache import skip_refresh
    skip_refresh(caching.Cache)


_load_without_refresh()


def current_gpu():
    """The number of this thread's current GPU (0 under the simulator, whose device has none): what
    the buffers, streams and locks kept per GPU are keyed on."""
    return getattr(cuda.get_current_device(), "id", 0)


_RESIDENT = {}
_RESIDENT_LOCK = threading.Lock()
#: device buffers of batch-sized resident copies whose host arrays are gone, by (size class, GPU), for
#: the next batch's: cuMemFree waits for the whole GPU, and a batch's reads came and went every batch
_SPARE = {}
#: the most bytes of spare buffers kept a GPU
SPARE_BYTES = 2 << 30


def _size_class(nbytes):
    """The bytes a batch-sized buffer of nbytes is allocated with: a sixteenth of a power of two
    past nbytes at most, so that batches of slightly different sizes share buffers."""
    step = max(1 << max(nbytes.bit_length() - 5, 0), STAGING_ALIGN)
    return -(-nbytes // step) * step


def _keep_spare(buf, gpu):
    """The last view of a batch-sized buffer is gone: keep the buffer as a spare where the GPU's
    spares have room (and the process is not releasing its GPUs), else let it be freed."""
    with _RESIDENT_LOCK:
        held = sum(b.shape[0] for key, kept in _SPARE.items() if key[1] == gpu for b in kept)
        if not _RELEASED.is_set() and held + buf.shape[0] <= SPARE_BYTES:
            _SPARE.setdefault((buf.shape[0], gpu), []).append(buf)


def _batch_array(shape, dtype):
    """(device array, the buffer under it) for a batch-sized array: a spare buffer of its size class
    where one is kept, kept as a spare again once the array is gone (not when its host array is: a
    caller may still be using the copy); a buffer of its own past STAGING_MAX (buffer None)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if nbytes == 0 or nbytes > STAGING_MAX:
        return cuda.device_array(shape, dtype), None
    size, gpu = _size_class(nbytes), current_gpu()
    with _RESIDENT_LOCK:
        spares = _SPARE.get((size, gpu))
        buf = spares.pop() if spares else None
    if buf is None:
        buf = cuda.device_array(size, np.uint8)
    dev = _view_bytes(buf, 0, shape, dtype)
    weakref.finalize(dev, _keep_spare, buf, gpu).atexit = False
    return dev, buf


def _device_copy(host, stream):
    """A device copy of host on `stream`; a batch-sized array goes through this thread's page-locked
    staging into a _batch_array."""
    host = np.ascontiguousarray(host)
    if host.nbytes == 0 or host.nbytes > STAGING_MAX:
        return cuda.to_device(host, stream=stream)
    dev, buf = _batch_array(host.shape, host.dtype)
    _thread_staging("resident").fill([host], [0], host.nbytes, stream, buf)
    return dev


#: _k_reverse_complement's launch: threads a block, and at most this many blocks (each thread then
#: takes reads a grid apart)
RC_THREADS = 128
RC_BLOCKS_MAX = 4096


@cuda.jit(cache=True)
def _k_reverse_complement(codes, offsets, out):
    """out: each read of codes (mapping codes, ranges by offsets) reversed and complemented, N kept;
    a thread a read (encoding.reverse_into's output)."""
    for r in range(cuda.grid(1), offsets.shape[0] - 1, cuda.gridsize(1)):
        a, b = offsets[r], offsets[r + 1]
        for j in range(b - a):
            c = codes[b - 1 - j]
            out[a + j] = c if c > 3 else 3 - c


def resident_reads(codes, rc_codes, offsets):
    """The resident copies of a batch's read codes, their reverse complements (rc_codes, which must
    hold them) and offsets, those of every read codes holds. The reverse complements are made on the
    device from the codes, not copied: half of a batch's reads' copy and of its page-locked staging."""
    d_codes, d_offsets = resident(codes), resident(offsets)

    def make(stream):
        dev = _batch_array(d_codes.shape, np.uint8)[0]
        n = offsets.shape[0] - 1
        if n > 0 and d_codes.shape[0]:
            blocks = max(1, min(RC_BLOCKS_MAX, -(-n // RC_THREADS)))
            with gpu_lock("reverse_complement"):    # a kernel's module loads at its first launch unguarded
                _k_reverse_complement[blocks, RC_THREADS, stream](d_codes, d_offsets, dev)
        return dev
    return d_codes, resident(rc_codes, make), d_offsets


def resident(host, make=None):
    """A device copy of the host array on the current GPU, made once and kept while the host array
    lives: the reference and the index are copied once a run, and one batch's reads once for all
    the stages that use them. The host array must not change afterwards. make(stream): makes the
    device array (on the thread's stream) that host holds, in place of a copy."""
    key = (id(host), current_gpu())
    with _RESIDENT_LOCK:                  # stages of batches mapped side by side ask at once: one copy
        hit = _RESIDENT.get(key)
        if hit is not None and hit[0]() is host:
            copied = hit[2]
        else:
            copied = threading.Event()
            _RESIDENT[key] = (weakref.ref(host), None, copied)
            weakref.finalize(host, _RESIDENT.pop, key, None)
            hit = None
    if hit is not None:
        copied.wait()                     # another thread may still be copying it
        entry = _RESIDENT.get(key)
        return entry[1] if entry is not None and entry[1] is not None else resident(host, make)
    # copied outside the lock: one batch's reads do not hold up the other batches' stages
    try:
        complete(host)          # a reference decoded on demand is copied whole
        # on this thread's stream: a copy on the default stream would wait for every kernel of the
        # other batches in flight, and hold back the ones launched after it
        stream = thread_stream()
        dev = _device_copy(host, stream) if make is None else make(stream)
        stream.synchronize()
    except BaseException:
        with _RESIDENT_LOCK:
            _RESIDENT.pop(key, None)
        copied.set()
        raise
    _release_at_exit()
    with _RESIDENT_LOCK:
        _RESIDENT[key] = (_RESIDENT[key][0], dev, copied)
    copied.set()
    return dev


_STREAMS = threading.local()


def thread_stream():
    """This thread's CUDA stream on the current GPU (made once): a stage's copies and kernels go on it,
    never on the default stream, which would serialise them with every other batch's work."""
    streams = getattr(_STREAMS, "by_gpu", None)
    if streams is None:
        streams = _STREAMS.by_gpu = {}
    gpu = current_gpu()
    if gpu not in streams:
        streams[gpu] = cuda.stream()
    return streams[gpu]


_SCRATCH = {}


class _Buffers:
    """Device buffers of one stage (per GPU, or per GPU and thread), grown as needed, and the views of
    them handed out last: a stage asks for the same shapes call after call, and slicing and reshaping
    a device array is Python work under the GIL that batches side by side wait for."""
    MAX_VIEWS = 64

    def __init__(self):
        self.arrays, self.views = [], {}

    def cut(self, specs, thread_major=False):
        """Arrays of the given (shape, dtype) specs, the k-th at the start of buffer k, replacing a
        buffer that is too small or of another dtype; C-contiguous, or with thread_major the last
        axis (the threads) outermost in memory (view_strides)."""
        self.arrays.extend([None] * (len(specs) - len(self.arrays)))
        out = []
        for k, (shape, dtype) in enumerate(specs):
            shape, dtype = tuple(int(x) for x in shape), np.dtype(dtype)
            view = self.views.get((k, shape, dtype, thread_major))
            if view is None:
                size = int(np.prod(shape))
                buf = self.arrays[k]
                if buf is None or buf.shape[0] < size or buf.dtype != dtype:
                    have = buf.shape[0] if buf is not None and buf.dtype == dtype else None
                    buf = self.arrays[k] = cuda.device_array(max(_grown(have, size), 1), dtype)
                    self.views = {key: v for key, v in self.views.items() if key[0] != k}
                if len(self.views) >= self.MAX_VIEWS:    # call buffers' shapes vary with each batch
                    self.views.clear()
                view = self.views[(k, shape, dtype, thread_major)] = _view(buf, shape, size, thread_major)
            out.append(view)
        return out


def view_strides(shape, itemsize, thread_major=False):
    """Byte strides of an array of `shape` laid out C-contiguous, or with thread_major its last axis
    outermost (each index of it a contiguous block of the others, C-ordered)."""
    if thread_major:
        inner = view_strides(shape[:-1], itemsize)
        return inner + (itemsize * int(np.prod(shape[:-1])),)
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _view(buf, shape, size, thread_major=False):
    """An array of the given shape (layout: view_strides) over the first `size` elements of device
    array buf, made in one step (slicing and then reshaping builds two). Under the simulator always
    C-contiguous: the layout changes only the speed."""
    if _simulator():
        return buf[:size].reshape(shape)
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    return DeviceNDArray(shape, view_strides(shape, buf.dtype.itemsize, thread_major), buf.dtype,
                         gpu_data=buf.gpu_data)


def thread_scratch(tag, specs, nt, thread_major=False):
    """Per-thread scratch for a kernel of nt threads: for each (shape, dtype) of specs an array of
    shape + (nt,), thread-minor (the threads of a warp touching one element touch adjacent ones),
    cut from device buffers kept per (tag, GPU) and grown as needed: allocating them per launch
    (up to a GB) cost more than the kernels. Callers hold a lock per tag while they use them.
    thread_major: the same shapes, each thread's elements adjacent instead (threads that walk long
    buffers on their own, as in sorting, then reuse cache lines; not under the simulator)."""
    gpu = current_gpu()
    _release_at_exit()
    bufs = _SCRATCH.setdefault((tag, gpu), _Buffers())
    return bufs.cut([(tuple(shape) + (nt,), dtype) for shape, dtype in specs], thread_major)


#: call_buffers' buffers by (tag, GPU, thread)
_CALL = {}
_CALL_LOCK = threading.Lock()
_THREAD = threading.local()


class _ThreadEnd:
    """Held in a thread's locals: when the thread ends, its call buffers are dropped."""


def call_buffers(tag, specs):
    """Device arrays of the given (shape, dtype) specs for one call of a stage (tag) on this thread
    and the current GPU, cut from buffers the thread keeps and grows: valid until the thread's next
    call with that tag. cuMemAlloc and cuMemFree synchronise the whole GPU, so arrays allocated and
    freed per call made batches side by side wait for each other's kernels."""
    key = _thread_key(tag)
    with _CALL_LOCK:
        bufs = _CALL.setdefault(key, _Buffers())
    return bufs.cut(specs)


def _thread_key(tag):
    """(tag, GPU, thread) of this thread's buffers, which are dropped when the thread ends."""
    ident = threading.get_ident()
    if getattr(_THREAD, "end", None) is None:
        _THREAD.end = _ThreadEnd()
        weakref.finalize(_THREAD.end, _drop_thread_buffers, ident)
    _release_at_exit()
    return tag, current_gpu(), ident


def _drop_thread_buffers(ident):
    with _CALL_LOCK:
        for kept in (_CALL, _STAGING, _LANDING):
            for key in [k for k in kept if k[2] == ident]:
                del kept[key]


#: call_inputs' staging buffers by (tag, GPU, thread)
_STAGING = {}
#: where call_inputs places each array in its buffers: at a multiple of this many bytes
STAGING_ALIGN = 256
#: the largest resident copy that goes through staging and spare buffers (a batch's reads: 30 MB
#: for 200,000 reads of 150 bases); larger ones (a large reference, its index) are copied directly
STAGING_MAX = 64 << 20


def _packed(arrays):
    """(byte offset of each array, bytes in all) of arrays laid back to back at STAGING_ALIGN."""
    offsets, total = [], 0
    for a in arrays:
        offsets.append(total)
        total += -(-a.nbytes // STAGING_ALIGN) * STAGING_ALIGN
    return offsets, total


def _grown(have, need):
    """The size a kept buffer of `have` elements (None: none yet) is replaced with to hold `need`:
    a quarter larger at least, as sizes vary a little from call to call and each replacement costs an
    allocation (and a free that waits for the whole GPU, on the device)."""
    return max(need, have + have // 4 if have is not None else 0)


class _Staging:
    """A page-locked host buffer and a device buffer of as many bytes, grown as needed, and the
    event of the last transfer from one to the other: the host buffer is refilled only once that
    transfer is done."""

    def __init__(self):
        self.host = self.dev = self.sent = None

    def fill(self, arrays, offsets, total, stream, target=None):
        """Pack the arrays into the host buffer at offsets and copy its first `total` bytes to the
        device buffer (or the uint8 device array target) on `stream`: asynchronous, from page-locked
        memory, which the driver need not stage through its own buffers while the thread waits."""
        if self.host is None or self.host.shape[0] < total:
            size = _grown(None if self.host is None else self.host.shape[0], total)
            self.host, self.dev, self.sent = None, None, None      # freed before the larger ones
            self.host = _pinned_or_pageable(size)
            self.dev = cuda.device_array(size, np.uint8)
            self.sent = cuda.event()
        else:
            self.sent.synchronize()
        for a, o in zip(arrays, offsets):
            self.host[o:o + a.nbytes] = a.reshape(-1).view(np.uint8)
        target = self.dev if target is None else target
        if _simulator():
            target[:total].copy_to_device(self.host[:total], stream=stream)
        else:
            from numba.cuda.cudadrv import driver
            driver.host_to_device(target, self.host, total, stream=stream)
        self.sent.record(stream)


def _thread_staging(tag):
    """This thread's staging buffers for `tag` on the current GPU."""
    key = _thread_key(tag)
    with _CALL_LOCK:
        return _STAGING.setdefault(key, _Staging())


def _pinned_or_pageable(size):
    """size bytes of page-locked host memory, or of pageable memory where the driver refuses to lock
    more (the copies from it are then the driver's staged ones, as before staging)."""
    from numba.cuda.cudadrv.driver import CudaAPIError
    try:
        return cuda.pinned_array(size, np.uint8)
    except CudaAPIError:
        return np.empty(size, np.uint8)


def _view_bytes(buf, offset, shape, dtype):
    """The array of shape and dtype at byte `offset` of the uint8 device array buf."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if _simulator():
        return buf[offset:offset + nbytes].view(dtype).reshape(shape)
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    return DeviceNDArray(shape, view_strides(shape, dtype.itemsize), dtype,
                         gpu_data=buf.gpu_data.view(offset, offset + nbytes) if nbytes else None)


def call_inputs(tag, arrays, stream):
    """Device copies of host arrays (made contiguous) for one call of a stage, in one transfer on
    `stream`: packed into this thread's page-locked staging buffer for that tag and copied into its
    device buffer, whose views they are (valid until the thread's next call with that tag). One
    asynchronous copy from page-locked memory instead of a copy an array from pageable memory,
    which the driver stages through its own buffers while the thread waits."""
    arrays = [np.ascontiguousarray(a) for a in arrays]
    offsets, total = _packed(arrays)
    staging = _thread_staging(tag)
    staging.fill(arrays, offsets, max(total, 1), stream)
    return [_view_bytes(staging.dev, o, a.shape, a.dtype) for a, o in zip(arrays, offsets)]


#: call_outputs' page-locked landing buffers by (tag, GPU, thread)
_LANDING = {}


def call_outputs(tag, d_arrays, stream):
    """Host copies of device arrays for one call of a stage: views of this thread's page-locked
    landing buffer for that tag (valid until the thread's next call with that tag), copied on
    `stream` asynchronously: synchronize it before reading them. A copy into pageable memory goes
    through the driver's own buffers while the thread waits."""
    offsets, total = _packed(d_arrays)
    key = _thread_key(tag)
    with _CALL_LOCK:
        buf = _LANDING.get(key)
        if buf is not None and buf.shape[0] < total:
            del _LANDING[key]                       # freed (once no earlier call's views hold it) first
    if buf is None or buf.shape[0] < total:
        size = _grown(None if buf is None else buf.shape[0], total)
        buf = None
        buf = _pinned_or_pageable(size)
        with _CALL_LOCK:
            _LANDING[key] = buf
    out = []
    for d, o in zip(d_arrays, offsets):
        host = buf[o:o + d.nbytes].view(d.dtype).reshape(d.shape)
        if d.size:
            d.copy_to_host(host, stream=stream)
        out.append(host)
    return out


def run_on_scratch(tag, specs, nt, stream, launch, thread_major=False):
    """launch(scratch) enqueues a kernel on `stream` that uses the (tag, GPU) scratch
    (thread_scratch(tag, specs, nt)); waits for that kernel and returns its time in ms (CUDA events).
    The stage's lock (gpu_lock) is held only from the launch to the kernel's end: the caller copies
    its inputs and allocates its outputs before, on the same stream, and copies the results back
    after, while other batches' kernels take the scratch (the stage's time on the GPU, not its
    copies, is what batches side by side wait for)."""
    with gpu_lock(tag):
        scratch = thread_scratch(tag, specs, nt, thread_major)
        ev0, ev1 = cuda.event(), cuda.event()
        ev0.record(stream)
        launch(scratch)
        ev1.record(stream)
        ev1.synchronize()
    return ev0.elapsed_time(ev1)


#: the buffers the process keeps: resident copies, spares, scratch, call buffers, staging and landing
_KEPT = (_RESIDENT, _SPARE, _SCRATCH, _CALL, _STAGING, _LANDING)
_AT_EXIT = []
_RELEASED = threading.Event()
#: the pending-deallocation lists disabled at exit (release)
_DISABLED = []
#: GPUs this process has run kernels on (release visits each at exit)
_USED = set()


def _release_at_exit():
    if not _AT_EXIT:
        _AT_EXIT.append(True)
        atexit.register(release)


def note_gpu(index):
    """Record that kernels run on GPU `index` (drivers that do not go through resident or
    thread_scratch call it), so that release visits that GPU at exit."""
    _USED.add(int(index))
    _release_at_exit()


def release():
    """At exit: drop the resident copies and scratch buffers, each GPU's in that GPU's context, and
    leave the rest to the contexts' teardown. Left to the interpreter's exit, the device arrays of
    two GPUs were freed in the wrong context: a finished two-GPU run ended in a segmentation fault
    (the GateKeeper driver releases its buffers the same way)."""
    _RELEASED.set()                 # buffers whose last view goes now are not kept as spares
    gpus = {key[1] for kept in _KEPT for key in list(kept)} | _USED
    for gpu in sorted(gpus):
        if _simulator():
            _drop_gpu(gpu)
            continue
        with cuda.gpus[gpu]:
            _drop_gpu(gpu)
            gc.collect()           # what is unreachable now is freed here, in its own GPU's context
            pending = getattr(cuda.current_context(), "deallocations", None)
            if pending is not None:
                pending.clear()
                # what Numba would free after this (the kernels' modules, unloaded by weakref's exit
                # hook outside their GPU's context: a segmentation fault with two GPUs) is left to
                # the driver's teardown of the ending process. The context manager is kept: dropped,
                # its generator would close and end the disabling at once
                held = pending.disable()
                held.__enter__()
                _DISABLED.append(held)


def _drop_gpu(gpu):
    """Drop what the process keeps on GPU `gpu` (keys hold the GPU second)."""
    for kept in _KEPT:
        for k in [k for k in list(kept) if k[1] == gpu]:
            kept.pop(k, None)


def kernel_callable(f):
    """An @njit function as CUDA kernels call it: f itself on a GPU (Numba compiles it for the
    device); under the simulator, which runs kernels in Python, a wrapper that hands f plain NumPy
    arrays instead of the simulator's device arrays."""
    if not _simulator():
        return f
    return lambda *args: f(*[getattr(a, "_ary", a) for a in args])


def gpu_count():
    """Visible GPUs (the simulator counts as one)."""
    return max(1, len(cuda.gpus)) if not _simulator() else 1


def _simulator():
    from numba import config
    return bool(config.ENABLE_CUDASIM)


_LOCKS = {}
_LOCKS_GUARD = threading.Lock()


def gpu_lock(tag):
    """The lock of (tag, current GPU): one kernel launch of a stage at a time per GPU, as its
    scratch (thread_scratch) is shared."""
    key = (tag, current_gpu())
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


_PINNED = threading.local()


@contextlib.contextmanager
def batch_on_gpu(k):
    """With several GPUs visible, this thread's GPU work (on_gpus, the GateKeeper driver) runs on GPU
    k mod their number alone: batches mapped side by side are spread over the GPUs, one GPU each,
    instead of every stage splitting every batch over all of them. Inside, the GPU's context stays
    attached to the thread (_attached_context), one GPU or several."""
    n = gpu_count()
    if n <= 1:
        with _attached_context():
            yield
        return
    _PINNED.gpu = k % n
    try:
        with cuda.gpus[_PINNED.gpu], _attached_context():
            yield
    finally:
        _PINNED.gpu = None


def _attached_context():
    """Numba's context of the current GPU attached to this thread while inside: Numba's CUDA calls then
    find it in a thread-local. Outside one, each call asks the driver under Numba's one process-wide
    lock (12 batch threads side by side spent 2.5 % of their samples there). No other GPU may be made
    current inside (Numba refuses the switch)."""
    if _simulator():
        return contextlib.nullcontext()
    from numba.cuda.cudadrv.devices import _runtime
    return _runtime.ensure_context()


def pinned_gpu():
    """The GPU this thread's work is kept on (batch_on_gpu), or None."""
    return getattr(_PINNED, "gpu", None)


def on_gpus(n, work):
    """Split [0, n) evenly over the visible GPUs and run work(lo, hi) for each part with that GPU
    current, one host thread per GPU; returns [(lo, hi, result)] in order. Under batch_on_gpu, all of
    [0, n) on that GPU, in this thread."""
    if pinned_gpu() is not None:
        return [(0, n, work(0, n))]
    k = min(gpu_count(), max(n, 1))
    bounds = [n * j // k for j in range(k + 1)]

    def run(j):
        if k == 1:
            return bounds[0], bounds[1], work(bounds[0], bounds[1])
        with cuda.gpus[j]:
            return bounds[j], bounds[j + 1], work(bounds[j], bounds[j + 1])

    if k == 1:
        return [run(0)]
    with ThreadPoolExecutor(k) as pool:
        return list(pool.map(run, range(k)))


@cuda.jit(cache=True)
def _k_gather_rows(src, width, first, count, dst):
    for r in range(cuda.grid(1), count.shape[0], cuda.gridsize(1)):
        base = r * width
        f = first[r]
        for k in range(count[r]):
            dst[f + k] = src[base + k]


def fetch_rows(d_src, counts, width, stream):
    """The first counts[r] entries of each row r of a device array laid out in rows of `width`
    (row r at r * width), concatenated, on the host: only they cross the bus, not the padded rows
    (a seeder's per-read candidate slots are mostly empty)."""
    counts = np.ascontiguousarray(counts, np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, d_src.dtype)
    first = np.cumsum(counts) - counts
    tag = f"fetch_rows.{np.dtype(d_src.dtype).name}"
    d_first, d_count = call_inputs(tag, [first, counts], stream)
    (d_dst,) = call_buffers(tag + ".out", [((total,), d_src.dtype)])
    tpb = 32 if _simulator() else 256
    blocks = max(1, min(1024, -(-counts.shape[0] // tpb)))
    with gpu_lock("fetch_rows"):   # Numba loads a kernel's module at its first launch on a GPU unguarded
        _k_gather_rows[blocks, tpb, stream](d_src, width, d_first, d_count, d_dst)
    return d_dst.copy_to_host(stream=stream)


def replace_rows(counts, values, rows, sub_counts, sub_values):
    """Rows stored one after another (row r: counts[r] entries in each array of values) with the rows
    `rows` (ascending) replaced by sub_counts / sub_values, laid out the same way in that order: a
    GPU's results with the rows that the CPU had to redo. Returns (counts, values)."""
    keep = np.ones(counts.shape[0], np.bool_)
    keep[rows] = False
    row = np.concatenate([np.repeat(np.flatnonzero(keep), counts[keep]), np.repeat(rows, sub_counts)])
    order = np.argsort(row, kind="stable")
    kept = np.repeat(keep, counts)
    new_counts = counts.copy()
    new_counts[rows] = sub_counts
    return new_counts, tuple(np.concatenate([v[kept], s])[order] for v, s in zip(values, sub_values))


__all__ = ["batch_on_gpu", "cuda", "cuda_available", "fetch_rows", "gpu_count", "gpu_lock", "kernel_callable",
           "note_gpu", "on_gpus", "pinned_gpu", "replace_rows", "resident", "run_on_scratch", "thread_scratch",
           "thread_stream", "call_buffers", "call_inputs", "call_outputs", "current_gpu"]
