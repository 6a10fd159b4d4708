"""Output files that appear only when complete: written under a temporary name, then renamed."""
import os
import tempfile

from pymap.errors import UsageError


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def in_place(path):
    """True for an existing path that is neither a regular file nor a directory (a device such as
    /dev/null, a FIFO): written into directly, since renaming a file over it would replace it."""
    return os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path)


def scratch_base(path):
    """Where the temporaries of an output go: beside it, or in the temporary directory for stdout
    (None or '-') and in-place outputs."""
    if path is None or path == "-" or in_place(path):
        return os.path.join(tempfile.gettempdir(), "pymap")
    return path


def temporary(path, suffix=".part"):
    """Create an empty temporary file beside `path`; returns its name."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=suffix,
                                   dir=os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        raise UsageError(f"{path}: cannot write ({exc.strerror})") from None
    os.close(fd)
    return tmp


def temporary_dir(path, suffix=".parts"):
    """Create an empty temporary directory beside `path`; returns its name."""
    try:
        return tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=suffix,
                                dir=os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        raise UsageError(f"{path}: cannot write ({exc.strerror})") from None


def publish(tmp, path):
    """Give the finished temporary file the usual permissions and its final name."""
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)


def discard(*names):
    for name in names:
        if name and os.path.exists(name):
            os.unlink(name)
