"""SAM/BAM/CRAM output: the header through pysam, records as SAM text from the Numba formatter,
compressed, converted and sorted by htslib as they stream out.

Plain SAM is written directly. Every other output goes through htslib: samtools runs in a child
process that reads the SAM stream on a pipe (`view` to convert and compress, `sort` for --sort),
with its own compression threads, while the mapper goes on with the next batch. Nothing holds the
whole run: no temporary SAM (a sort spills its own sorted runs, as samtools sort does). The
samtools is the one on PATH when it is recent enough (system_samtools), else pysam's.
"""
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pysam

from pymap import __version__, outfile
from pymap.errors import InputError, UsageError

FORMATS = {".sam": "sam", ".sam.gz": "sam.gz", ".sam.bgz": "sam.gz", ".bam": "bam", ".cram": "cram"}
#: the compression levels by default: an unsorted stream is most often an intermediate (sorted or
#: marked for duplicates next), so it is compressed fast (level 1: 2.4 x less CPU than level 6 for
#: 6 % more bytes, scripts/bench_output.py); a sorted file is kept, so it gets htslib's level 6
STREAM_LEVEL = 1
SORTED_LEVEL = 6


def hts_format(fmt, level):
    """samtools -O value: SAM with a level is BGZF-compressed SAM; CRAM keeps its own codecs."""
    name = {"sam": "SAM", "sam.gz": "SAM", "bam": "BAM", "cram": "CRAM"}[fmt]
    return name if fmt == "sam" or level is None else f"{name},level={level}"


#: BAI holds positions below 2**29; longer contigs need CSI (samtools index -c)
BAI_MAX_LEN = (1 << 29) - 1
#: the child process: one pysam.samtools command, its error as the last line on stderr
_CHILD = ("import sys, pysam\n"
          "try:\n"
          "    getattr(pysam.samtools, sys.argv[1])(*sys.argv[2:], catch_stdout=False)\n"
          "except pysam.SamtoolsError as exc:\n"
          "    msg = str(exc).split('stderr=', 1)[-1].strip().strip(\"'\").replace('\\\\n', '\\n')\n"
          "    sys.stderr.write(msg.rstrip() + '\\n'); sys.exit(1)\n")


def make_header(reference, command_line, read_group=None, sort=False, ref_uri=None):
    """A pysam.AlignmentHeader with @HD, every @SQ (with UR when ref_uri is given: CRAM), @RG (when
    given) and @PG."""
    uri = {"UR": ref_uri} if ref_uri else {}
    # a header field holds no tab or newline: escaped as typed (-R '@RG\tID:x' given with real tabs)
    command_line = command_line.replace("\t", "\\t").replace("\n", "\\n")
    header = {
        "HD": {"VN": "1.6", "SO": "coordinate" if sort else "unsorted"},
        "SQ": [{"SN": n, "LN": int(l), **uri} for n, l in zip(reference.names, reference.lengths)],
        "PG": [{"ID": "pymap", "PN": "pymap", "VN": __version__, "CL": command_line}],
    }
    if read_group:
        fields = dict(part.split(":", 1) for part in read_group.split("\t")[1:] if ":" in part)
        header["RG"] = [fields]
    return pysam.AlignmentHeader.from_dict(header)


def output_format(path):
    """'sam', 'sam.gz', 'bam' or 'cram' from a file name; stdout ('-' or None), a device or a FIFO
    without one of those extensions (/dev/null) is SAM."""
    if not path or path == "-":
        return "sam"
    low = path.lower()
    for ext in sorted(FORMATS, key=len, reverse=True):
        if low.endswith(ext):
            return FORMATS[ext]
    if outfile.in_place(path):
        return "sam"
    raise UsageError(f"{path}: unknown output format (use .sam, .sam.gz, .bam or .cram, or - for stdout)")


def index_suffix(fmt, max_contig_len):
    """The index samtools writes for a sorted file of this format (None: plain SAM has none)."""
    if fmt == "cram":
        return ".crai"
    if fmt == "bam":
        return ".bai" if max_contig_len <= BAI_MAX_LEN else ".csi"
    return ".csi" if fmt == "sam.gz" else None


def cram_reference(ref_path):
    """(a FASTA htslib can read with its .fai, a temporary directory to remove afterwards or None): the
    reference itself when htslib can index it, else a plain copy (a gzip FASTA that is not BGZF, or
    a read-only directory without a .fai)."""
    try:
        pysam.FastaFile(ref_path).close()
        return ref_path, None
    except (OSError, ValueError):
        pass
    from pymap.reference import open_maybe_gzip
    tmpdir = tempfile.mkdtemp(prefix="pymap-cram-ref-")
    copy = os.path.join(tmpdir, "reference.fa")
    try:
        with open(copy, "wb") as dst:
            dst.write(open_maybe_gzip(ref_path))
        pysam.FastaFile(copy).close()
    except (OSError, ValueError) as exc:
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise InputError(f"{ref_path}: htslib cannot read the reference for CRAM output ({exc})") from None
    if ref_path not in _NOTED_COPIES:
        # htslib names the file it encodes against in the @SQ lines' UR: here a copy removed at the end
        _NOTED_COPIES.add(ref_path)
        print(f"[pymap] note: {ref_path} is gzip, not BGZF: the CRAM's @SQ UR names a temporary copy; decoding "
              f"it needs the reference as plain or BGZF FASTA (samtools view -T) or by its M5 tags (REF_PATH)",
              file=sys.stderr, flush=True)
    return copy, tmpdir


_NOTED_COPIES = set()


#: the oldest samtools on PATH that is used (--write-index and FILE##idx##INDEX came in 1.10)
SYSTEM_SAMTOOLS_MIN = (1, 10)


@functools.lru_cache(maxsize=None)
def system_samtools():
    """The samtools on PATH when it is at least SYSTEM_SAMTOOLS_MIN, else None (pysam's is used).
    Distributions and conda build it with libdeflate, which compresses BGZF about twice as fast as
    the zlib that pysam's htslib is built with; the records are the same either way."""
    path = shutil.which("samtools")
    if path is None:
        return None
    try:
        version = subprocess.run([path, "--version"], capture_output=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(rb"samtools (\d+)\.(\d+)", version)
    return path if m and (int(m[1]), int(m[2])) >= SYSTEM_SAMTOOLS_MIN else None


def samtools(command, *args, stdin=None, stdout=None):
    """Start `samtools COMMAND ARGS` (system_samtools, else pysam's) in a child process; its stderr
    goes to a temporary file (read back by `finish`) so that a full pipe never blocks it."""
    err = tempfile.TemporaryFile()
    exe = system_samtools()
    program = [exe] if exe else [sys.executable, "-c", _CHILD]
    proc = subprocess.Popen([*program, command, *map(str, args)], stdin=stdin, stdout=stdout, stderr=err)
    proc.err = err
    return proc


def finish(proc, what):
    """Wait for a child started by `samtools`; InputError with its last error line when it failed."""
    rc = proc.wait()
    proc.err.seek(0)
    lines = [ln for ln in proc.err.read().decode(errors="replace").splitlines() if ln.strip()]
    proc.err.close()
    if rc != 0:
        reason = lines[-1] if lines else f"exit status {rc}"
        raise InputError(f"{what}: htslib failed: {reason}")


class SamWriter:
    """Writes the header and then SAM text batches, to stdout or to a file in the format of its
    extension: .sam, .sam.gz (BGZF), .bam, .cram (with the reference). sort=True: coordinate-sorted,
    with its index beside it (.bai, or .csi for contigs over 512 Mbp; .crai). A file is written
    under a temporary name in the same directory and renamed when complete; a failed run leaves
    nothing. threads: htslib's compression and sorting threads. level: compression level (None:
    STREAM_LEVEL, or SORTED_LEVEL under sort; CRAM: htslib's own)."""

    @staticmethod
    def check_path(path, sort=False):
        """Raise UsageError before any work when `path` cannot be written."""
        output_format(path)
        if path and path != "-":
            target_dir = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(target_dir) or not os.access(target_dir, os.W_OK):
                raise UsageError(f"{path}: cannot write (no writable directory {target_dir})")

    def __init__(self, path, header, ref_path=None, threads=1, sort=False, level=None, max_contig_len=0):
        self.path = None if path == "-" else path
        self.format = output_format(path)
        self.sort = sort
        self.tmp = self.proc = self.ref_copy = self.index_tmp = self.fh = self.sort_prefix = None
        self.in_place = self.path is not None and outfile.in_place(self.path)
        self.index_suffix = (index_suffix(self.format, max_contig_len) if sort and self.path and not self.in_place
                             else None)
        try:
            self._start(header, ref_path, threads, sort, level)
        except BaseException:       # Ctrl-C or SIGTERM while starting: its temporaries go too
            self.abort()
            raise

    def _start(self, header, ref_path, threads, sort, level):
        to_stdout = self.path is None
        if not to_stdout:
            self.tmp = self.path if self.in_place else outfile.temporary(self.path)
        if self.format == "sam" and not sort:
            self.fh = sys.stdout.buffer if to_stdout else open(self.tmp, "wb")
        else:
            if level is None and self.format not in ("sam", "cram"):
                level = SORTED_LEVEL if sort else STREAM_LEVEL
            args = ["--no-PG", "-@", max(1, threads), "-O", hts_format(self.format, level)]
            if self.format == "cram":
                ref_path, self.ref_copy = cram_reference(ref_path)
                args += ["--reference", ref_path]
            target = "-" if to_stdout else self.tmp
            if sort:
                self.sort_prefix = outfile.temporary(outfile.scratch_base(self.path), ".sort.part")
                if not to_stdout:
                    target, self.index_tmp = indexed_target(self.tmp, self.path, self.index_suffix)
                args = ["sort", *args, "-T", self.sort_prefix] + (["--write-index"] if self.index_tmp else [])
            else:
                args = ["view", "-h", *args]
            args += ["-o", target, "-"]
            sys.stdout.flush()
            self.proc = samtools(*args, stdin=subprocess.PIPE, stdout=sys.stdout.buffer if to_stdout else None)
            self.fh = self.proc.stdin
        self.write([str(header).encode()])

    def write(self, text):
        """Append SAM text (pieces, see kernels.sam.format_sam), or an outfile.PartFile (or HeldPart,
        into plain_file) of SAM text."""
        try:
            if isinstance(text, (outfile.PartFile, outfile.HeldPart)):
                text.copy_to(self.fh)
            else:
                self.fh.writelines(text)
        except BrokenPipeError:
            if self.proc is None:
                raise
            self.fh = None
            finish(self.proc, self.path or "stdout")
            raise InputError(f"{self.path or 'stdout'}: htslib stopped reading the output") from None
        except OSError as exc:
            raise outfile.cannot_write(self.path, exc) from None

    @property
    def plain_file(self):
        """The temporary file this writer writes plain SAM into, where others may write records at
        the offsets it steps over (outfile.HeldPart); None for stdout, a device, compressed or
        sorted output."""
        return self.tmp if self.proc is None and self.path is not None and not self.in_place else None

    def close(self):
        if self.fh is sys.stdout.buffer:
            outfile.guarded(self.path, self.fh.flush)
            return
        outfile.guarded(self.path, self.fh.close)
        self.fh = None
        if self.proc is not None:
            try:
                finish(self.proc, self.path or "stdout")
            finally:
                self.proc = None
                self._discard_temporaries()
        if self.path is not None and not self.in_place:
            publish_indexed(self.tmp, self.path, self.index_tmp, self.index_suffix)
        self.tmp = self.index_tmp = None

    def abort(self):
        if self.fh is not None and self.fh is not sys.stdout.buffer:
            try:
                self.fh.close()
            except Exception:  # the run failed already; the partial file is removed below
                pass
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc.err.close()
        self._discard_temporaries()
        if not self.in_place:
            outfile.discard(self.tmp, self.index_tmp)

    def _discard_temporaries(self):
        if self.sort_prefix:
            outfile.discard(self.sort_prefix, *glob.glob(glob.escape(self.sort_prefix) + ".*.bam"))
        if self.ref_copy:
            shutil.rmtree(self.ref_copy, ignore_errors=True)


def indexed_target(tmp, path, suffix):
    """(htslib's output name, the index's temporary name or None) for a file written to tmp, to be
    published as path with an index of this suffix: htslib writes the index along with the file
    (--write-index, "FILE##idx##INDEX"), not in a second pass over it."""
    if not suffix:
        return tmp, None
    index_tmp = outfile.temporary(path, ".part" + suffix)    # htslib picks the index format by the name's end
    return f"{tmp}##idx##{index_tmp}", index_tmp


def publish_indexed(tmp, path, index_tmp, suffix):
    """Give the finished file tmp, and its index index_tmp (None: none), their final names."""
    try:
        outfile.publish(tmp, path)
        if index_tmp:
            outfile.publish(index_tmp, path + suffix)
    except BaseException:
        outfile.discard(index_tmp)
        raise


def sort_chunk(sam):
    """Coordinate-sorted BAM (fast compression) of SAM text with its header: one Dask chunk."""
    with tempfile.TemporaryDirectory(prefix="pymap-sort-") as tmpdir:
        proc = samtools("sort", "--no-PG", "-l", 1, "-T", os.path.join(tmpdir, "run"), "-O", "BAM", "-o", "-", "-",
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        out, _ = proc.communicate(sam)
        finish(proc, "sorting a chunk")
    return out


class SortedPartsWriter:
    """--sort under Dask: chunks come sorted from the workers (BAM); they are kept as parts beside the
    output and merged by htslib in chunk order at the end (samtools merge breaks ties by part order,
    as samtools sort does by input order: the same records as one sorted stream). Every MAX_PARTS
    parts are merged into one, so open files stay bounded."""
    MAX_PARTS = 256

    def __init__(self, path, header, ref_path=None, threads=1, level=None, max_contig_len=0):
        self.path = None if path == "-" else path
        self.format = output_format(path)
        self.header = str(header).encode()
        self.ref_path = ref_path
        self.threads = max(1, threads)
        self.level = level
        self.index_suffix = index_suffix(self.format, max_contig_len) if self.path else None
        self.parts = []
        self.where = outfile.scratch_base(self.path)
        self.tmp = self.index_tmp = None

    def write(self, sorted_bam):
        """Keep a sorted BAM chunk (pieces, or an outfile.PartFile moved here by name) as a part."""
        part = outfile.temporary(self.where, ".bam.part")
        self.parts.append(part)
        try:
            if isinstance(sorted_bam, outfile.PartFile):
                os.replace(sorted_bam.path, part)
            else:
                with open(part, "wb") as fh:
                    fh.writelines(sorted_bam)
        except OSError as exc:
            raise outfile.cannot_write(self.path, exc) from None
        if len(self.parts) >= self.MAX_PARTS:
            merged = outfile.temporary(self.where, ".bam.part")
            self._merge(self.parts, merged, hts_format("bam", 1))
            outfile.discard(*self.parts)
            self.parts = [merged]

    def _merge(self, parts, out, fmt, stdout=None, index=False):
        args = ["--no-PG", "-c", "-p", "-f", "-@", self.threads, "-O", fmt] + (["--write-index"] if index else [])
        ref_copy = None
        if fmt.startswith("CRAM"):
            ref_path, ref_copy = cram_reference(self.ref_path)
            args += ["--reference", ref_path]
        try:
            finish(samtools("merge", *args, "-o", out, *parts, stdout=stdout), self.path or "stdout")
        finally:
            if ref_copy:
                shutil.rmtree(ref_copy, ignore_errors=True)

    def close(self):
        if not self.parts:
            self.write(sort_chunk(self.header))
        level = self.level if self.level is not None or self.format in ("sam", "cram") else SORTED_LEVEL
        fmt = hts_format(self.format, level)
        if self.path is None:
            sys.stdout.flush()
            self._merge(self.parts, "-", fmt, stdout=sys.stdout.buffer)
        elif outfile.in_place(self.path):
            self._merge(self.parts, self.path, fmt)
        else:
            self.tmp = outfile.temporary(self.path)
            target, self.index_tmp = indexed_target(self.tmp, self.path, self.index_suffix)
            self._merge(self.parts, target, fmt, index=self.index_tmp is not None)
            publish_indexed(self.tmp, self.path, self.index_tmp, self.index_suffix)
        outfile.discard(*self.parts)
        self.parts, self.tmp, self.index_tmp = [], None, None

    def abort(self):
        outfile.discard(*self.parts, self.tmp, self.index_tmp)
