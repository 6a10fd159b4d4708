"""What a run with worker processes decides before it imports the mapper: how many workers
`--processes auto` takes (pymap.processes), the GPUs they are spread over, and the servers worker
processes and local Dask workers (`--dask local:N`, pymap.distributed) are forked from. The command
line starts the server, and asks NVIDIA's driver for its GPUs on a thread of its own, as soon as its
arguments are parsed: both then overlap this process's imports (BENCHMARKS.md, thirty-second
session). Nothing here imports NumPy, Numba or Dask.

The GPUs are counted by the driver library itself (libcuda through ctypes), not through Numba:
importing numba.cuda for the count took 0.4 s of a GPU run's start."""
import ctypes
import glob
import importlib.util
import multiprocessing
import os
import sys
import threading
from concurrent.futures import Future

from pymap.errors import UsageError


#: what the server of worker processes imports before it forks them (pymap.processes)
PRELOAD = ["numpy", "pymap.api", "pymap.chunks", "pymap.processes", "pymap.worker_preload"]


def context():
    """The multiprocessing context of the workers: forked from a server process that has imported
    the mapper (forkserver) where the platform has one, else spawned. Never forked from this
    process: CUDA does not survive a fork."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def start_server():
    """Start the server that forks the workers now, so that it imports the mapper while this process
    loads the reference (ProcessRun starts it otherwise)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        from multiprocessing import forkserver
        context()
        forkserver.ensure_running()


#: what the server of local Dask workers imports before it forks them (pymap.distributed)
DASK_PRELOAD = ["distributed", "numpy", "pymap.api", "pymap.distributed", "pymap.worker_preload"]


def is_local(spec):
    """Whether a --dask spec asks for a private local cluster ("local" or "local:N")."""
    return isinstance(spec, str) and (spec == "local" or spec.startswith("local:"))


def local_workers(spec):
    """N of "local:N" (all CPUs for "local"); UsageError when it is not a number >= 1."""
    n = spec.partition(":")[2] or str(os.cpu_count() or 1)
    if not n.isdigit() or int(n) < 1:
        raise UsageError(f"--dask local:N needs a number of workers >= 1, got {spec!r}")
    return int(n)


def start_dask_server(spec):
    """For `--dask local:N`: start the server that forks the local Dask workers now, before this
    process imports Dask (0.3-0.4 s) or the mapper. pymap.distributed has Dask fork its workers from
    it (its _fork_workers; it starts the server itself otherwise). Nothing without Dask installed:
    the run then says so."""
    if is_local(spec):
        local_workers(spec)                     # a bad spec fails here, before anything starts
        if "forkserver" in multiprocessing.get_all_start_methods() and importlib.util.find_spec("distributed"):
            from multiprocessing import forkserver
            multiprocessing.get_context("forkserver").set_forkserver_preload(DASK_PRELOAD)
            forkserver.ensure_running()


def visible_gpus(options):
    """The GPUs the workers are spread over, as CUDA_VISIBLE_DEVICES names them for a worker (this
    process's own list where it has one: "2,3" gives ["2", "3"]), with device "gpu" or "auto" where
    one is usable; else None (no GPU for the stages to choose)."""
    if options.device not in ("gpu", "auto"):
        return None
    n = gpu_count()
    if n == 0:
        return None
    listed = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    return listed[:n] if len(listed) >= n else [str(k) for k in range(n)]


#: inputs (plain FASTQ, all files together) from which a GPU run takes worker processes by default:
#: their start (the workers' imports, pipelines and first kernel calls, about 1.3-1.5 s before the first
#: chunk) pays off from a few million reads. One H100 of 16 cores, E. coli 150 bp reads, one process
#: against two (BENCHMARKS.md, thirtieth session): 1 and 2 M reads 3.6-4.4 s against 4.1-5.2 s, 4 M
#: 4.9 / 6.5 s against 5.3 / 6.4 s, 10 M 8.3 / 12.3 s against 7.2 / 9.0 s, 20 M 16.3 / 19.0 s against
#: 14.2 / 16.6 s. 1 GiB is about 3.3 M such reads.
AUTO_MIN_BYTES = 1 << 30
#: threads a worker process at least has where two share a GPU by default
AUTO_THREADS_PER_WORKER = 8
#: paired reads: up to four workers a GPU of at least 4 threads each. A pair batch keeps more of its
#: host work under its process's Python lock (pairing, mate rescue) than a batch of single reads, so
#: more processes help it: one H100 of 16 cores, 10 M E. coli pairs, five rounds alternated in two
#: calls, 13.5-14.8 s with four workers against 15.8-17.4 s with two (one slower outlier, 28.8 s);
#: single reads gained nothing consistent from four (BENCHMARKS.md, thirty-third session)
AUTO_PAIR_THREADS_PER_WORKER = 4
AUTO_PAIR_WORKERS_PER_GPU = 4
#: the largest reference file (bytes; a gzip one counts COMPRESSED_RATIO times) for which paired
#: runs take AUTO_PAIR_WORKERS_PER_GPU: each worker keeps its own copy of the index and the reference
#: on its GPU, and four copies of a large genome's would crowd it
AUTO_PAIR_MAX_REFERENCE = 1 << 30
COMPRESSED_RATIO = 4


def auto_count(device, threads, paths, dask=None, paired=False, reference=None):
    """Worker processes for options.processes "auto": with a GPU (device "gpu" or "auto"), one a GPU,
    and two a GPU where each then has AUTO_THREADS_PER_WORKER threads (threads, 0: all cores), for
    inputs of plain FASTQ files of AUTO_MIN_BYTES or more; paired reads (paired) against a reference
    file (reference, its path) of at most AUTO_PAIR_MAX_REFERENCE bytes take up to
    AUTO_PAIR_WORKERS_PER_GPU a GPU of AUTO_PAIR_THREADS_PER_WORKER threads. Else 1, this process (the
    CPU, where each process would hold its own decoded reference; small, compressed or piped inputs)."""
    if not may_take_workers(device, paths, dask):
        return 1
    from pymap.reads import is_plain_fastq
    if not all(is_plain_fastq(str(p)) for p in paths if p is not None):
        return 1
    n = gpu_count()
    if n == 0:
        return 1
    per_worker, most = AUTO_THREADS_PER_WORKER, 2
    if paired and _reference_bytes(reference) <= AUTO_PAIR_MAX_REFERENCE:
        per_worker, most = AUTO_PAIR_THREADS_PER_WORKER, AUTO_PAIR_WORKERS_PER_GPU
    per_gpu = min(most, max(1, (threads or os.cpu_count() or 1) // (per_worker * n)))
    return n * per_gpu


def _reference_bytes(path):
    """The reference file's size, a gzip one's times COMPRESSED_RATIO; unknown (no path, not a file)
    counts as larger than any limit."""
    try:
        with open(path, "rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
            size = os.fstat(fh.fileno()).st_size
    except (OSError, TypeError):
        return float("inf")
    return size * COMPRESSED_RATIO if gz else size


def may_take_workers(device, paths, dask=None):
    """What auto_count asks first, without reading the files or asking for a GPU (the command line
    starts the workers' server on it): device "gpu" or "auto", no Dask, and regular files of
    AUTO_MIN_BYTES or more together."""
    if dask is not None or device not in ("gpu", "auto"):
        return False
    paths = [str(p) for p in paths if p is not None]
    return bool(paths) and all(os.path.isfile(p) for p in paths) and \
        sum(os.path.getsize(p) for p in paths) >= AUTO_MIN_BYTES


_ANSWER = []
_LOCK = threading.Lock()


def gpu_count():
    """GPUs CUDA shows this process (CUDA_VISIBLE_DEVICES applies): 0 without a driver or where it
    does not start; 1 under Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM), 0 with NUMBA_DISABLE_CUDA,
    as Numba counts them. Asked once a process. (Where the driver works but Numba's CUDA does not,
    the workers this count gives find no usable GPU: `--device auto` maps on their CPUs, `--device
    gpu` fails there, as it would in one process.)"""
    return _future().result()


def count_gpus_soon():
    """Start asking on a thread of its own (gpu_count then waits for that answer)."""
    _future(threaded=True)


def _future(threaded=False):
    with _LOCK:
        if not _ANSWER:
            _ANSWER.append(Future())
            if threaded:
                threading.Thread(target=_answer, args=(_ANSWER[0],), name="pymap-gpu-count", daemon=True).start()
            else:
                _answer(_ANSWER[0])
        return _ANSWER[0]


def _answer(future):
    try:
        future.set_result(_ask_driver())
    except BaseException as exc:        # noqa: BLE001  (re-raised where count is called)
        future.set_exception(exc)


def _flag(name):
    return os.environ.get(name, "0") not in ("", "0")


def cuda_simulated():
    """Whether Numba's CUDA simulator is on (NUMBA_ENABLE_CUDASIM): it counts as one GPU."""
    return _flag("NUMBA_ENABLE_CUDASIM")


def no_gpu_files():
    """True where there can be no GPU, told without loading a library: Linux without NVIDIA's device
    files (nor WSL's /dev/dxg)."""
    return sys.platform.startswith("linux") and not glob.glob("/dev/nvidia[0-9]*") and not os.path.exists("/dev/dxg")


def _ask_driver():
    if cuda_simulated():
        return 1
    if _flag("NUMBA_DISABLE_CUDA") or no_gpu_files():
        return 0
    names = [os.environ["NUMBA_CUDA_DRIVER"]] if os.environ.get("NUMBA_CUDA_DRIVER") else \
        ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]
    for name in names:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        n = ctypes.c_int(0)
        if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(n)) != 0:
            return 0                     # a driver that does not start counts as none
        return n.value
    return 0
