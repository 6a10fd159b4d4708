"""Import numba.cuda through here: one place for the compatibility shims of the GPU stack.

numba-cuda 0.30 still calls `np.row_stack`, which NumPy 2.4 removed (it was an alias of
`np.vstack`); the lent GPU machines ship such a NumPy. Restoring the alias is harmless elsewhere.
"""
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


__all__ = ["cuda", "cuda_available"]
