"""Example pymap plugins (docs/plugins.md): filter `qgram`, seeder `kmer`, extender `nw-edlib`."""
__version__ = "0.1.0"
