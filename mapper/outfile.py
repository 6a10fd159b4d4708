"""Output files that appear only when complete: written under a temporary name, then renamed."""
import ctypes
import errno
import functools
import os
import shutil
import tempfile

from pymap.errors import OutputError, UsageError


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
    """Give the finished temporary file the usual permissions and its final name. A file already of
    that name is renamed aside first and removed after: renamed over, it made ext4 write the new file
    out at once (its guard for files replaced by rename, auto_da_alloc: 0.16-0.21 s per 330 MB of SAM),
    where moving it aside leaves two directory updates and its removal (0.08 s). A process killed
    between the two renames leaves no file of that name, the older output as `tmp`.old and the new,
    complete one as `tmp`: never a partial file under the final name."""
    os.chmod(tmp, 0o666 & ~_umask())
    old = None
    if os.path.lexists(path) and not os.path.isdir(path):
        old = tmp + ".old"
        os.rename(path, old)
    os.replace(tmp, path)
    if old is not None:
        os.unlink(old)


def discard(*names):
    for name in names:
        if name and os.path.exists(name):
            os.unlink(name)


def cannot_write(path, exc):
    """OutputError for an OSError while writing the output `path` (None or '-': stdout)."""
    return OutputError(f"{path if path and path != '-' else 'stdout'}: cannot write ({exc.strerror or exc})")


def guarded(path, call, *args):
    """call(*args), a write, flush or close of the output `path`: an OSError (a full disk) as
    cannot_write's OutputError, a closed pipe staying BrokenPipeError."""
    try:
        return call(*args)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise cannot_write(path, exc) from None


class Written:
    """The open file fh, as a context manager whose writes are guarded (a full disk: one
    OutputError). At the block's end fh is flushed and, when owned, closed, guarded too; after an
    error in the block it is closed without a second one."""

    def __init__(self, fh, path, owned=True):
        self.fh, self.path, self.owned = fh, path, owned

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is None:
            guarded(self.path, self.fh.flush)
            if self.owned:
                guarded(self.path, self.fh.close)
        elif self.owned:
            try:
                self.fh.close()             # its buffer's flush may fail as the block's write did
            except OSError:
                pass

    def write(self, data):
        return guarded(self.path, self.fh.write, data)


class PartFile:
    """Records left in a file of their own (a Dask worker's part): writers move or copy it into
    their output by name, without reading it into the process, and remove it."""

    def __init__(self, path):
        self.path = path

    def copy_to(self, fh):
        """Append the part to the open file `fh` (a file, a pipe, stdout) and remove it: the kernel
        copies the bytes (sendfile) where fh has a descriptor that takes it."""
        with open(self.path, "rb") as src:
            if not _sendfile(src, fh):
                shutil.copyfileobj(src, fh)
        os.unlink(self.path)


class HeldPart:
    """Records a worker process holds (pymap.processes): the worker writes them into the output file
    itself, at the offset the writer reaches, while the writer steps over them. No copy passes
    through this process."""

    def __init__(self, size, place):
        self.size, self.place = size, place     # place(offset): have the worker write them there

    def copy_to(self, fh):
        """Have the part written at fh's position (fh: the open file SamWriter.plain_file names) and
        step fh past it. Its stretch of the file is allocated first where the file system can
        (allocate): the worker then writes through a mapping, which can neither grow a file nor
        report a full disk (a page it cannot have kills the process); place(offset, allocated)."""
        fh.flush()
        at = fh.tell()
        self.place(at, self.size > 0 and allocate(fh.fileno(), at, self.size))
        fh.seek(at + self.size)


def allocate(fd, offset, size):
    """Allocate the stretch offset..offset + size of the open file fd, growing the file, where its
    file system does so itself (fallocate); False where it cannot (some file systems say so with
    EINVAL). Not posix_fallocate: where the file system cannot, glibc writes a byte into every block
    instead, a write each 4 KiB over a network file system. A full disk raises OSError."""
    call = _fallocate()
    while call is not None:
        if call(fd, 0, offset, size) == 0:
            return True
        err = ctypes.get_errno()
        if err in (errno.EOPNOTSUPP, errno.ENOSYS, errno.ENODEV, errno.EINVAL):
            break
        if err != errno.EINTR:
            raise OSError(err, os.strerror(err))
    return False


@functools.lru_cache(maxsize=None)
def _fallocate():
    """The C library's fallocate(fd, mode, offset, length), or None where it has none."""
    try:
        call = ctypes.CDLL(None, use_errno=True).fallocate
    except (AttributeError, OSError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    call.restype = ctypes.c_int
    return call


def _sendfile(src, fh):
    """Copy all of the file src to fh by sendfile; False, with nothing copied, where fh has no
    descriptor or one that sendfile does not take."""
    try:
        out = fh.fileno()
    except (OSError, ValueError):
        return False
    fh.flush()
    size, done = os.fstat(src.fileno()).st_size, 0
    while done < size:
        try:
            sent = os.sendfile(out, src.fileno(), done, size - done)
        except OSError as exc:
            if done == 0 and exc.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                return False
            raise
        if sent == 0:
            raise OSError(errno.EIO, f"{src.name}: shorter than its size")
        done += sent
    return True
