"""Import numba.cuda through here: one place for the compatibility shims of the GPU stack.

numba-cuda 0.30 still calls `np.row_stack`, which NumPy 2.4 removed (it was an alias of
`np.vstack`); the lent GPU machines ship such a NumPy. Restoring the alias is harmless elsewhere.
"""
import weakref

import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

from numba import cuda  # noqa: E402


def cuda_available():
    """True when a usable CUDA GPU (or the simulator) is present; a broken driver counts as none."""
    try:
        return bool(cuda.is_available())
    except Exception:     # noqa: BLE001
        return False


__all__ = ["cuda", "cuda_available", "resident"]


_RESIDENT = {}


def resident(host):
    """A device copy of the host array on the current GPU, made once and kept while the host array
    lives: the reference and the index are copied once a run, and one batch's reads once for all
    the stages that use them. The host array must not change afterwards."""
    key = (id(host), getattr(cuda.get_current_device(), "id", 0))   # the simulator's device has no id
    hit = _RESIDENT.get(key)
    if hit is not None and hit[0]() is host:
        return hit[1]
    dev = cuda.to_device(np.ascontiguousarray(host))
    _RESIDENT[key] = (weakref.ref(host), dev)
    weakref.finalize(host, _RESIDENT.pop, key, None)
    return dev
