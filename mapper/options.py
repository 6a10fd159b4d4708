"""The options of a mapping run, validated once at the edge (CLI or API)."""
import numbers
import os
from dataclasses import dataclass, field, fields

from pymap.errors import UsageError

DEFAULT_MAX_EDITS = 0.10


#: reads per batch; on a GPU more, as every batch pays fixed costs there (kernel launches, copies)
BATCH_SIZE = 20000
GPU_BATCH_SIZE = 200000
#: batches mapped side by side: one batch's serial steps (NumPy bookkeeping, selection) overlap the
#: others' parallel kernels, and on a GPU one batch's host work overlaps another's device work. By
#: default at least 2, and one more for every THREADS_PER_BATCH threads (measured best: 3 on 16 cores,
#: 6 rather than 3 on 32; BENCHMARKS.md, "Batches side by side"); with device "gpu" GPU_BATCHES_PER_THREAD
#: of the threads (16 cores, one H200: 12 side by side 2,000,000 reads in 1.18-1.70 s, 8 in 1.43-1.76 s,
#: 5 in 1.56 s; host memory 3.3 GB at 12, GPU memory 8.0 GB: BENCHMARKS.md, "Host work around the GPU batches")
THREADS_PER_BATCH = 5
GPU_BATCHES_PER_THREAD = 0.75


def default_batches(threads, device=None):
    """Batches mapped side by side by default: 1 on one thread, else max(2, threads // THREADS_PER_BATCH),
    or with device "gpu" max(2, GPU_BATCHES_PER_THREAD * threads)."""
    if threads == 1:
        return 1
    if device == "gpu":
        return max(2, int(threads * GPU_BATCHES_PER_THREAD))
    return max(2, threads // THREADS_PER_BATCH)


#: the @RG fields of the SAM specification (lower-case tags are the user's own)
RG_FIELDS = ("ID", "BC", "CN", "DS", "DT", "FO", "KS", "LB", "PG", "PI", "PL", "PM", "PU", "SM")


def check_read_group(line):
    """-R's read group line with '\\t' as tabs, or UsageError: one @RG line holding ID, each field
    once, its tags the specification's or lower-case (a user's)."""
    rg = line.replace("\\t", "\t")
    if not rg.startswith("@RG\t") or "\tID:" not in rg or any(c in rg for c in "\n\r") or "\\n" in rg:
        raise UsageError(r"-R must be one read group header line like '@RG\tID:sample1\tSM:x'")
    tags = [part.split(":", 1)[0] for part in rg.split("\t")[1:]]
    for tag in tags:
        if len(tag) != 2 or not (tag in RG_FIELDS or (tag[0].isalpha() and tag.isalnum() and not tag.isupper())):
            raise UsageError(f"-R: {tag!r} is not a read group field (the SAM specification's: {' '.join(RG_FIELDS)}; "
                             "or a user's, with a lower-case letter)")
        if tags.count(tag) > 1:
            raise UsageError(f"-R: field {tag} given more than once")
    return rg


@dataclass
class AlignOptions:
    """Every knob of `pymap align`.

    max_edits: e per read; a value >= 1 is an absolute count, a value in [0, 1) a fraction of the
    read length (rounded to nearest). Default 0.10 (10 edits for 100 bp, 15 for 150 bp).
    filter_slack: the filter compares a read with the equal-length reference segment on the
    candidate's diagonal, which can cost up to one edit more per indel base than the semi-global
    alignment the extender finds (at most 2e in all); the filter therefore runs at e + slack.
    None (default): measured per filter and (read length, e) on worst cases (pymap.slack), and e
    under report_all, where no location within e may be lost.
    max_hits: alignments reported per read (primary plus up to max_hits-1 secondaries).
    report_all: report every location within e as secondary alignments (RazerS/mrFAST style).
    split_as_secondary: the other part of a chimeric read is flagged secondary (256) rather than
    supplementary (2048), as bwa mem -M does for Picard.
    append_comment: each read's FASTQ/FASTA header comment (SAM tags such as BC:Z:ACGT, checked) is
    appended to its records, as bwa mem -C does.
    seed: tie-breaking among equally good hits is a hash of (seed, read number): deterministic.
    batches: how many batches are mapped side by side (threads of their own; the stages must allow it,
    see pymap.plugins), in each process with `processes`; the output is the same for any value.
    sort: coordinate-sorted output with its index. level: the output's compression level (None:
    htslib's default). dask: None (one process), "local:N" (a local cluster of N worker
    processes), "tcp://HOST:PORT" (a running scheduler) or a distributed.Client.
    processes: worker processes on this machine that map the input's chunks, sharing the threads and
    batches side by side (pymap.processes; with device "gpu" spread over the GPUs); 1 (default) maps
    here; "auto" (the command line's default): worker processes for a GPU run of a large plain FASTQ
    input, else 1 (api.align decides: pymap.workers.auto_count). Worker processes import the
    calling script's main module, as multiprocessing's do: a script that asks for them keeps its
    work under `if __name__ == "__main__":`.
    device: "cpu", "gpu" or "auto" (the GPU when one is usable) for every stage that has a device
    option (seeder, filter, extender); None leaves each stage at its own default.
    extender: None picks the scoring extender "affine" (bwa-mem scores, clipping), or the
    edit-distance extender "banded" under report_all (every location within e).
    """
    max_edits: float = DEFAULT_MAX_EDITS
    threads: int = 0
    seeder: str = None          # None: by genome size, see pymap.api.default_seeder
    seeder_opts: dict = field(default_factory=dict)
    filter: str = "gatekeeper-gpu"
    filter_opts: dict = field(default_factory=dict)
    filter_slack: int = None
    extender: str = None        # None: "affine", or "banded" (edit distance) under report_all
    extender_opts: dict = field(default_factory=dict)
    max_hits: int = 1
    report_all: bool = False
    split_as_secondary: bool = False
    append_comment: bool = False
    interleaved: bool = False
    insert_size: object = None   # pymap.insert.InsertModel (-I), or None: learned from the data
    read_group: str = None
    seed: int = 0
    batch_size: int = None      # None: BATCH_SIZE, or GPU_BATCH_SIZE with device "gpu"
    batches: int = None         # batches mapped side by side; None: by thread count (default_batches)
    min_length: int = 16
    max_length: int = 1000
    progress: bool = True
    sort: bool = False
    level: int = None
    dask: object = None
    device: str = None
    processes: object = 1        # an int, or "auto": see pymap.workers.auto_count

    def validate(self):
        self._check_types()
        if self.extender is None:
            self.extender = "banded" if self.report_all else "affine"
        if not (self.max_edits >= 0):
            raise UsageError(f"-e/--max-edits must be >= 0 (a count, or a fraction of the read length "
                             f"below 1), got {self.max_edits}")
        if self.max_edits >= 1 and self.max_edits != int(self.max_edits):
            raise UsageError(f"-e/--max-edits above 1 must be a whole number of edits, got {self.max_edits}")
        if self.max_edits > 64:
            raise UsageError(f"-e/--max-edits must be at most 64, got {self.max_edits}")
        if self.filter_slack is not None and (isinstance(self.filter_slack, bool)
                                              or not isinstance(self.filter_slack, int) or self.filter_slack < 0):
            raise UsageError(f"--filter-slack must be a whole number >= 0, got {self.filter_slack}")
        if self.threads < 0:
            raise UsageError(f"-t/--threads must be >= 1 (0 = all cores), got {self.threads}")
        if self.max_hits < 1:
            raise UsageError(f"-N/--max-hits must be >= 1, got {self.max_hits}")
        if self.batch_size is None:
            self.batch_size = GPU_BATCH_SIZE if self.device == "gpu" else BATCH_SIZE
        if not (1 <= self.batch_size <= 10_000_000):
            raise UsageError(f"--batch-size must be in 1..10000000, got {self.batch_size}")
        if self.processes == "auto":
            self.processes = 1          # what is left unresolved by pymap.api.align maps in one process
        if isinstance(self.processes, bool) or not isinstance(self.processes, int) or not 1 <= self.processes <= 64:
            raise UsageError(f"--processes must be in 1..64 or 'auto', got {self.processes!r}")
        if self.processes > 1 and self.dask is not None:
            raise UsageError("--processes and --dask exclude each other (Dask workers are processes)")
        if self.batches is None:
            self.batches = default_batches(self.process_threads, self.device)
        if not (1 <= self.batches <= 64):
            raise UsageError(f"--batches must be in 1..64, got {self.batches}")
        if self.min_length < 1 or self.max_length < self.min_length:
            raise UsageError("--min-length must be >= 1 and <= --max-length")
        if self.read_group is not None:
            self.read_group = check_read_group(self.read_group)
        if self.level is not None and not (0 <= self.level <= 9):
            raise UsageError(f"--level must be in 0..9, got {self.level}")
        if self.device not in (None, "auto", "cpu", "gpu"):
            raise UsageError(f"--device must be auto, cpu or gpu, got {self.device!r}")
        if self.seed < 0:
            raise UsageError(f"--seed must be >= 0, got {self.seed}")
        return self

    def _check_types(self):
        """Each option of the type its annotation says (None where that is its default; an int where
        a float is asked): an API caller's mistake is one UsageError naming it, not a failure deep in
        the run."""
        import numpy as np

        from pymap.insert import InsertModel
        kinds = {int: (numbers.Integral, "a whole number"), float: (numbers.Real, "a number"),
                 bool: ((bool, np.bool_), "True or False"), str: (str, "a string"), dict: (dict, "a dict")}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.default is None:
                continue
            if f.name == "insert_size":
                if not isinstance(value, InsertModel):
                    raise UsageError(f"insert_size must be a pymap.insert.InsertModel (pymap.insert.parse('mean,std') "
                                     f"makes one) or None, got {value!r}")
                continue
            if f.type not in kinds:
                continue
            cls, what = kinds[f.type]
            if not isinstance(value, cls) or (f.type is not bool and isinstance(value, (bool, np.bool_))):
                raise UsageError(f"{f.name} must be {what}, got {value!r}")

    @property
    def pairs_per_batch(self):
        """Pairs in a batch of paired reads: batch_size counts reads, both mates of a pair."""
        return max(1, self.batch_size // 2)

    @property
    def process_threads(self):
        """Threads of each mapping process: all of them, or their share in each of `processes`."""
        return max(1, self.thread_count // self.processes)

    @property
    def thread_count(self):
        return self.threads or os.cpu_count() or 1

    @property
    def read_group_id(self):
        if not self.read_group:
            return None
        for part in self.read_group.split("\t"):
            if part.startswith("ID:"):
                return part[3:]
        return None
