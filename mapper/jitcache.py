"""Where Numba keeps pymap's compiled kernels, and a notice when a run has to compile them.

Unless NUMBA_CACHE_DIR is set, the cache lives in the user's cache directory
($XDG_CACHE_HOME/pymap/numba, or ~/.cache/pymap/numba): writable by a plain user whatever owns the
installed package, and not removed by `pip uninstall`. Numba keys each entry by its source file's
path and time stamp, so a reinstall compiles once more. In a working tree, a kernel whose helper in
another file changed keeps its cached code: clear the cache after such an edit (thirty-seventh
session: a faster `encoding.reverse_into` did not reach the cached FASTQ gather)."""
import importlib
import os
import struct
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
    (numba_without_scipy), cached kernels loaded without a registry refresh (load_without_refresh)
    and without parsing their linking bitcode (load_without_bitcode), Numba's runtime functions
    loaded too (runtime_from_cache)."""
    numba_without_scipy()
    load_without_refresh()
    load_without_bitcode()
    runtime_from_cache()


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


def load_without_bitcode():
    """Load CPU kernels from Numba's cache without parsing the LLVM bitcode kept beside their machine code.

    Numba keeps that bitcode for later compiles that call the kernel (they link it in), and a load
    parses it and then lists the symbols it defines, one llvmlite call per symbol (of 0.21-0.28 s
    loading a chrM run's 27 kernels, about 0.12 s parsing and 0.07 s listing). A mapping run calls
    only loaded kernels. Here the symbols come from the machine code's own ELF symbol table (the
    same names) and the bitcode is parsed when a compile first links the kernel. Machine code that
    is not 64-bit little-endian ELF loads as Numba loads it."""
    from numba.core import codegen

    library = codegen.CPUCodeLibrary
    numba_unserialize = library.__dict__.get("_unserialize")
    numba_linking = library.__dict__.get("_get_module_for_linking")
    if not isinstance(numba_unserialize, classmethod) or numba_linking is None or not all(
            hasattr(library, name) for name in ("enable_object_caching", "_set_compiled_object",
                                                "_finalize_final_module")):
        return
    numba_unserialize = numba_unserialize.__func__
    if getattr(numba_unserialize, "pymap_quick", False):      # done already (a classmethod keeps no attributes)
        return

    def _unserialize(cls, codegen_, state):
        name, kind, data = state
        defined = _elf_symbols(data[0]) if kind == "object" else None
        engine = getattr(codegen_, "_engine", None)
        if defined is None or not hasattr(engine, "_defined_symbols"):
            return numba_unserialize(cls, codegen_, state)
        self = codegen_.create_library(name)
        self.enable_object_caching()
        self._set_compiled_object(data[0])
        self._pymap_bitcode = data[1]
        self._finalize_final_module()
        engine._defined_symbols |= defined
        return self

    def _get_module_for_linking(self):
        bitcode = self.__dict__.pop("_pymap_bitcode", None)
        if bitcode is not None:
            self._shared_module = codegen.ll.parse_bitcode(bitcode)
        return numba_linking(self)

    _unserialize.pymap_quick = True
    library._unserialize = classmethod(_unserialize)
    library._get_module_for_linking = _get_module_for_linking


def runtime_from_cache():
    """Load the LLVM functions of Numba's runtime (NRT: reference counts, atomics) from pymap's
    cache instead of compiling them in every process (30-50 ms of each run's start, before its
    first kernel loads). The cached machine code is keyed by the Numba and llvmlite versions and
    the host CPU (the key Numba's own cache uses); a missing or unreadable entry compiles as
    Numba does and is written for the next run."""
    from numba.core.runtime import nrtdynmod

    numba_compile = nrtdynmod.compile_nrt_functions
    if getattr(numba_compile, "pymap_quick", False) or not hasattr(nrtdynmod, "create_nrt_module"):
        return

    def compile_nrt_functions(ctx):
        import pickle
        import zlib

        import llvmlite
        import numba

        codegen = ctx.codegen()
        if not hasattr(codegen, "magic_tuple"):
            return numba_compile(ctx)
        key = zlib.crc32(repr((numba.__version__, llvmlite.__version__, codegen.magic_tuple())).encode())
        path = os.path.join(os.environ.get("NUMBA_CACHE_DIR") or cache_dir(), f"nrt-{key:08x}.pkl")
        try:
            with open(path, "rb") as f:
                return codegen.unserialize_library(pickle.load(f))
        except Exception:              # absent, or left by another version: compile it
            pass
        ir_module, library = nrtdynmod.create_nrt_module(ctx)
        library.enable_object_caching()
        library.add_ir_module(ir_module)
        library.finalize()
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            part = f"{path}.{os.getpid()}.part"
            with open(part, "wb") as f:
                pickle.dump(library.serialize_using_object_code(), f)
            os.replace(part, path)
        except OSError:
            pass
        return library

    compile_nrt_functions.pymap_quick = True
    nrtdynmod.compile_nrt_functions = compile_nrt_functions


def _elf_symbols(obj):
    """The names of the symbols a 64-bit little-endian ELF object defines (functions, data and
    untyped ones, local or not; not sections or files), or None for any other object format."""
    if obj[:4] != b"\x7fELF" or obj[4:6] != b"\x02\x01":
        return None
    import numpy as np
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sym = np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"), ("value", "<u8"),
                    ("size", "<u8")])
    names = set()
    for k in range(shnum):
        head = shoff + k * shentsize
        if struct.unpack_from("<I", obj, head + 4)[0] != 2:          # SHT_SYMTAB
            continue
        offset, size, link = struct.unpack_from("<QQI", obj, head + 24)
        strings_at, strings_size = struct.unpack_from("<QQ", obj, shoff + link * shentsize + 24)
        strings = obj[strings_at:strings_at + strings_size]
        table = np.frombuffer(obj, sym, size // sym.itemsize, offset)
        defined = (table["shndx"] != 0) & (table["info"] & 15 < 3) & (table["name"] != 0)
        names.update(strings[at:strings.index(b"\0", at)].decode() for at in table["name"][defined].tolist())
    return names


def warm_numba():
    """Numba ready to load pymap's kernels (prepare_numba) and the FASTQ parse's kernels, which every
    worker uses, loaded. Processes forked after this one (local Dask workers) start with both."""
    prepare_numba()
    import numpy as np

    from pymap.kernels.fastq import parse_records
    from pymap.reads import MAX_NAME
    # a writable buffer, as the workers read: a read-only one (np.frombuffer of bytes) is another
    # signature, which the first run with worker processes compiled here (1.2-2.4 s before they started)
    parse_records(np.frombuffer(bytearray(b"@r\nA\n+\nI\n"), np.uint8), MAX_NAME)


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
