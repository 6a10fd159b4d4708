"""Imported by the server process that forks local Dask workers (pymap.distributed._fork_workers):
Numba's typing registries are installed there once (jitcache.warm_numba), and every worker forked
from it starts with them instead of installing them at its first kernel load."""
from pymap import jitcache

jitcache.warm_numba()
