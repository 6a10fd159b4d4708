"""SAM/BAM output: the header through pysam, records as text from the Numba formatter."""
import os
import sys

import pysam

from pymap import __version__, outfile
from pymap.errors import InputError, UsageError


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


FORMATS = {".sam": "sam", ".sam.gz": "sam.gz", ".sam.bgz": "sam.gz", ".bam": "bam", ".cram": "cram"}


class SamWriter:
    """Writes SAM text to stdout, or to a file by its extension: .sam, .sam.gz (BGZF, which
    samtools and htslib read), .bam, .cram (with the reference). A file is written under a
    temporary name in the same directory and renamed when complete; a failed run leaves none."""

    @staticmethod
    def output_format(path):
        if not path or path == "-":
            return "sam"
        low = path.lower()
        for ext in sorted(FORMATS, key=len, reverse=True):
            if low.endswith(ext):
                return FORMATS[ext]
        raise UsageError(f"{path}: unknown output format (use .sam, .sam.gz, .bam or .cram, or - for stdout)")

    @classmethod
    def check_path(cls, path):
        """Raise UsageError before any work when `path` cannot be written."""
        cls.output_format(path)
        if path and path != "-":
            target_dir = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(target_dir) or not os.access(target_dir, os.W_OK):
                raise UsageError(f"{path}: cannot write (no writable directory {target_dir})")

    def __init__(self, path, header, ref_path=None, threads=1):
        self.path = path
        self.format = self.output_format(path)
        self.ref_path = ref_path
        self.threads = max(1, threads)
        self.tmp = self.sam_tmp = None
        if not path or path == "-":
            self.fh = sys.stdout.buffer
        else:
            self.tmp = outfile.temporary(path)
            try:
                if self.format in ("bam", "cram"):
                    self.sam_tmp = outfile.temporary(path, ".sam.part")
                    self.fh = open(self.sam_tmp, "wb")
                elif self.format == "sam.gz":
                    self.fh = pysam.BGZFile(self.tmp, "wb")
                else:
                    self.fh = open(self.tmp, "wb")
            except OSError as exc:
                outfile.discard(self.tmp, self.sam_tmp)
                raise InputError(f"{path}: cannot write ({exc.strerror})") from None
        self.fh.write(str(header).encode())

    def write(self, text):
        self.fh.write(text)

    def close(self):
        if self.fh is sys.stdout.buffer:
            self.fh.flush()
            return
        self.fh.close()
        if self.format == "bam":
            pysam.samtools.view("-@", str(self.threads), "-b", "-o", self.tmp, self.sam_tmp, catch_stdout=False)
        elif self.format == "cram":
            pysam.samtools.view("-@", str(self.threads), "-C", "-T", self.ref_path, "-o", self.tmp, self.sam_tmp,
                                catch_stdout=False)
        outfile.discard(self.sam_tmp)
        outfile.publish(self.tmp, self.path)
        self.tmp = self.sam_tmp = None

    def abort(self):
        if self.fh is not sys.stdout.buffer:
            try:
                self.fh.close()
            except Exception:  # the run failed already; the partial file is removed below
                pass
        outfile.discard(self.tmp, self.sam_tmp)
