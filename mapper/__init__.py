"""pymap: a seed-and-extend short-read mapper whose stages are plugins."""
__version__ = "0.1.0"

from pymap import jitcache as _jitcache  # noqa: E402  (before any kernel compiles)

_jitcache.configure()
