"""Output files that appear only when complete: written under a temporary name, then renamed."""
import os
import tempfile

from pymap.errors import UsageError


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def temporary(path, suffix=".part"):
    """Create an empty temporary file beside `path`; returns its name."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=suffix,
                                   dir=os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        raise UsageError(f"{path}: cannot write ({exc.strerror})") from None
    os.close(fd)
    return tmp


def publish(tmp, path):
    """Give the finished temporary file the usual permissions and its final name."""
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)


def discard(*names):
    for name in names:
        if name and os.path.exists(name):
            os.unlink(name)
