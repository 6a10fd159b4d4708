"""pymap: a seed-and-extend short-read mapper whose stages are plugins."""
__version__ = "0.1.0"
