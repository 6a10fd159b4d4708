"""Where Numba keeps pymap's compiled kernels, and a notice when a run has to compile them.

Unless NUMBA_CACHE_DIR is set, the cache lives in the user's cache directory
($XDG_CACHE_HOME/pymap/numba, or ~/.cache/pymap/numba): writable by a plain user whatever owns the
installed package, and not removed by `pip uninstall`. Numba keys each entry by its source file's
path and time stamp, so a reinstall compiles once more."""
import importlib
import os
import sys


def cache_dir(what="numba"):
    """pymap's directory for `what` in the user's cache ($XDG_CACHE_HOME or ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pymap", what)


def configure():
    """Point Numba's cache at cache_dir() unless the user chose one (call before compiling)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    path = cache_dir()
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return                       # Numba falls back to its own locations
    os.environ["NUMBA_CACHE_DIR"] = path
    if "numba" in sys.modules:       # imported before pymap: its config has read the environment
        sys.modules["numba"].config.CACHE_DIR = path


def numba_without_scipy():
    """Load Numba's array support (numba.np.arraymath) with SciPy's BLAS module hidden. Numba imports
    scipy.linalg there only to learn whether np.correlate/np.convolve may call BLAS (0.2-0.25 s, most
    of it SciPy importing numpy.f2py); pymap's kernels use neither. None in sys.modules makes that one
    import fail at once (Numba then uses its own loop there); np.dot and np.linalg still import SciPy
    when a kernel needs them."""
    blas, module = "scipy.linalg.cython_blas", "numba.np.arraymath"
    if blas in sys.modules or module in sys.modules:
        return
    sys.modules[blas] = None
    try:
        importlib.import_module(module)
    finally:
        del sys.modules[blas]


def prepare_numba():
    """Numba ready to load pymap's kernels quickly: its array support without SciPy
    (numba_without_scipy) and cached kernels loaded without a registry refresh (load_without_refresh)."""
    numba_without_scipy()
    load_without_refresh()


def load_without_refresh():
    """Load CPU kernels from Numba's cache without refreshing its target context first.

    Numba's Cache.load_overload refreshes the context before every load; the first refresh imports
    and installs some 250 typing and lowering registries, about 0.15 s of a run that loads all its
    kernels from the cache (a whole run of 29,000 pairs takes 1.1-1.3 s). Loading machine code needs
    none of them, only Numba's runtime (NRT) linked in, which this does; compiling needs them, and
    Numba's compiler refreshes both contexts itself before it starts. Other targets load as Numba
    does (CUDA: pymap.kernels.cuda_support)."""
    from numba.core import caching, cpu
    from numba.core.runtime import nrt

    def cpu_only(target_context):
        if not isinstance(target_context, cpu.CPUContext):
            return False
        nrt.rtsys.initialize(target_context)
        return True

    skip_refresh(caching.Cache, cpu_only)


def skip_refresh(cache_cls, ready=None):
    """Replace cache_cls.load_overload (Numba's, or numba-cuda's) by the same load without its
    refresh of the target context, for the contexts that ready(target_context) makes ready and
    accepts (all when None); the others load as before. A class without the methods this relies on
    is left alone."""
    numba_load = cache_cls.load_overload
    if getattr(numba_load, "pymap_quick", False) or not all(
            hasattr(cache_cls, name) for name in ("_load_overload", "_guard_against_spurious_io_errors")):
        return

    def load_overload(self, sig, target_context):
        if ready is not None and not ready(target_context):
            return numba_load(self, sig, target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    load_overload.pymap_quick = True
    cache_cls.load_overload = load_overload


def warm_numba():
    """Numba ready to load pymap's kernels (prepare_numba) and the FASTQ scanner every worker's parse
    uses loaded. Processes forked after this one (local Dask workers) start with both."""
    prepare_numba()
    import numpy as np

    from pymap.kernels.fastq import scan_records
    scan_records(np.frombuffer(b"@r\nA\n+\nI\n", np.uint8), 1)     # a kernel every worker's parse loads


_announcing = False


def announce_compiles(stream=None):
    """Print one line when the first kernel of this process has to be compiled (not loaded)."""
    global _announcing
    if _announcing:
        return
    _announcing = True
    from numba.core import event

    class _Notice(event.Listener):
        said = False

        def on_start(self, ev):
            if not self.said:
                self.said = True
                where = os.environ.get("NUMBA_CACHE_DIR") or "next to the package"
                print(f"[pymap] compiling kernels, once: this run takes longer (cache: {where})",
                      file=stream or sys.stderr, flush=True)

        def on_end(self, ev):
            pass

    event.register("numba:compile", _Notice())
