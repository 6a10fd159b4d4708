"""Numba kernels on plain NumPy arrays (CPU @njit and CUDA @cuda.jit). No I/O, no pysam."""
