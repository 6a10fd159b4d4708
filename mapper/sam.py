"""SAM/BAM output: the header through pysam, records as text from the Numba formatter."""
import os
import sys
import tempfile

import pysam

from pymap import __version__
from pymap.errors import InputError


def make_header(reference, command_line, read_group=None):
    """A pysam.AlignmentHeader with @HD, every @SQ, @RG (when given) and @PG."""
    header = {
        "HD": {"VN": "1.6", "SO": "unsorted"},
        "SQ": [{"SN": n, "LN": int(l)} for n, l in zip(reference.names, reference.lengths)],
        "PG": [{"ID": "pymap", "PN": "pymap", "VN": __version__, "CL": command_line}],
    }
    if read_group:
        fields = dict(part.split(":", 1) for part in read_group.split("\t")[1:] if ":" in part)
        header["RG"] = [fields]
    return pysam.AlignmentHeader.from_dict(header)


class SamWriter:
    """Writes SAM text to stdout or a file; a path ending in .bam is converted by pysam's samtools."""

    def __init__(self, path, header):
        self.path = path
        self.bam = bool(path) and path.endswith(".bam")
        if not path or path == "-":
            self.fh = sys.stdout.buffer
            self.tmp = None
        else:
            target_dir = os.path.dirname(os.path.abspath(path))
            try:
                if self.bam:
                    fd, self.tmp = tempfile.mkstemp(suffix=".sam", dir=target_dir)
                    self.fh = os.fdopen(fd, "wb")
                else:
                    self.tmp = None
                    self.fh = open(path, "wb")
            except OSError as exc:
                raise InputError(f"{path}: cannot write ({exc.strerror})") from None
        self.fh.write(str(header).encode())

    def write(self, text):
        self.fh.write(text)

    def close(self):
        if self.fh is sys.stdout.buffer:
            self.fh.flush()
            return
        self.fh.close()
        if self.bam:
            try:
                pysam.samtools.view("-b", "-o", self.path, self.tmp, catch_stdout=False)
            finally:
                os.unlink(self.tmp)

    def abort(self):
        if self.fh is not sys.stdout.buffer:
            self.fh.close()
            if self.tmp:
                os.unlink(self.tmp)
