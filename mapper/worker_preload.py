"""Imported by the server processes that fork worker processes and local Dask workers (pymap.workers):
Numba is prepared there once (jitcache.warm_numba: quick cache loads, the FASTQ scanner loaded), and
every worker forked from it starts with both."""
from pymap import jitcache

jitcache.warm_numba()
