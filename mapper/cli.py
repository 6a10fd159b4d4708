"""The `pymap` command: a thin layer over mapper.api."""
import argparse
import contextlib
import gc
import os
import shlex
import signal
import sys

# pymap calls no BLAS. Left to its default, NumPy's OpenBLAS starts a thread per core when NumPy is
# imported, and they spin before they sleep: 2.0 of the 2.3 CPU seconds of `import numpy` on a
# 16-core host, taken from this process's start and from its Dask or --processes workers, which
# inherit the setting (BENCHMARKS.md, "First run and warm run"). Set before NumPy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from pymap import __version__, jitcache, outfile  # noqa: E402
from pymap.errors import PluginError, PymapError, UsageError  # noqa: E402
from pymap.options import DEFAULT_MAX_EDITS, AlignOptions  # noqa: E402


#: where an index is kept by default (pymap.api.index_file)
INDEX_NAMES = ("REF.pymap.idx, REF.pymap.minimizer.idx or REF.pymap.minhash.idx by seeder, with the crc of "
               "its build parameters before .idx where --seeder-opt changes them")


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2)."""

    def error(self, message):
        raise UsageError(message)


def _refuse_bwa_h(argv):
    """UsageError for bwa mem's `-h INT[,INT]` (alternative hits in XA) in an align command: argparse
    would take it for -h, print help and exit 0, so a command ported from bwa would seem to succeed."""
    if "align" not in argv:
        return
    for flag, value in zip(argv, argv[1:]):
        if flag == "-h" and value.replace(",", "").isdigit():
            raise UsageError(f"-h {value}: bwa mem's -h (alternative hits in an XA tag) is not an option of "
                             "pymap; -N reports secondary alignments")


def _gap_penalty(text):
    """-O/-E: one penalty, or bwa mem's deletion,insertion pair when the two are equal (pymap's
    extenders score both kinds of gap alike)."""
    try:
        values = {int(v) for v in text.split(",")}
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer or a pair of them") from None
    if len(text.split(",")) > 2 or len(values) != 1:
        raise argparse.ArgumentTypeError(f"{text!r}: pymap scores deletions and insertions alike; give one "
                                         "penalty (or a pair of equal ones)")
    return values.pop()


def _edits(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"-e/--max-edits: {text!r} is not a number") from None
    return value


def _processes(text):
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--processes: {text!r} is neither a number nor 'auto'") from None


def _add_stage_args(p, mapping=True):
    """The options of the pipeline's stages; without mapping, only those of seeding (`candidates`)."""
    p.add_argument("--seeder", help="seeder plugin (default: neighborhood up to 100 Mbp, minimizer above)")
    p.add_argument("--seeder-opt", action="append", metavar="KEY=VALUE", default=[],
                   help="seeder option, repeatable (e.g. step=4, e_nb=1, seed_len=12)")
    if mapping:
        p.add_argument("--filter", default="gatekeeper-gpu",
                       help="filter plugin, or a chain a,b (default: %(default)s)")
        p.add_argument("--filter-opt", action="append", metavar="KEY=VALUE", default=[],
                       help="filter option, repeatable (e.g. device=gpu); NAME.KEY=VALUE for one stage of a chain")
        p.add_argument("--extender", help="extender plugin (default: affine; banded with --all)")
        p.add_argument("--extender-opt", action="append", metavar="KEY=VALUE", default=[],
                       help="extender option, repeatable (e.g. band=30)")
        g = p.add_argument_group("scoring (bwa-mem's letters and defaults; extenders that score)")
        for letter, key, text in (("A", "match", "score of a match [1]"), ("B", "mismatch", "mismatch penalty [4]")):
            g.add_argument(f"-{letter}", dest=key, type=int, metavar="INT", help=text)
        g.add_argument("-O", dest="gap_open", type=_gap_penalty, metavar="INT[,INT]",
                       help="gap open penalty [6]; bwa's deletion,insertion pair if the two are equal")
        g.add_argument("-E", dest="gap_ext", type=_gap_penalty, metavar="INT[,INT]",
                       help="gap extension penalty; a gap of k costs O + k*E [1]; a pair as for -O")
        g.add_argument("-L", dest="clip", metavar="INT[,INT]", help="clipping penalty of each read end [5,5]")
        g.add_argument("-T", dest="min_score", type=int, metavar="INT",
                       help="minimum score of an alignment [30]; mates placed in a proper pair are kept "
                            "down to the lower of this and 20 (bwa mem's pairing ignores -T)")
        p.add_argument("--filter-slack", type=int, metavar="K",
                       help="run the filter at e + K, allowing for the indels of a semi-global alignment "
                            "(default: measured per filter, read length and e, the least K that keeps a "
                            "worst-case set of reads within e; e with --all)")
    p.add_argument("--device", choices=["auto", "cpu", "gpu"],
                   help="where the stages that can use a GPU run (seeder, filter, extender); auto: the GPU "
                        "when one is usable [each stage's default: the filter auto, the others cpu]")
    p.add_argument("-e", "--max-edits", type=_edits, default=DEFAULT_MAX_EDITS,
                   help="edit distance threshold e: a count (>= 1) or a fraction of the read length "
                        "(< 1) (default: %(default)s)")
    p.add_argument("-t", "--threads", type=int, default=0, help="threads (default: all cores)")
    p.add_argument("--index", metavar="FILE", help=f"index file (default: {INDEX_NAMES} next to the reference; "
                                                   "built and saved there when missing)")
    p.add_argument("--batch-size", type=int,
                   help="reads per batch (default: 20000; 200000 with --device gpu); the output does not depend on it")


def build_parser():
    top = Parser(prog="pymap", description="Seed-and-extend short-read mapper with pluggable stages.")
    top.add_argument("--version", action="version", version=f"pymap {__version__}")
    top.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    p = sub.add_parser("index", help="build and save the index of a reference")
    p.add_argument("reference", help="FASTA, plain or gzip")
    p.add_argument("--seeder", help="seeder plugin (default: neighborhood up to 100 Mbp, minimizer above)")
    p.add_argument("--seeder-opt", action="append", metavar="KEY=VALUE", default=[])
    p.add_argument("-o", "--output", metavar="FILE", help=f"index file (default: {INDEX_NAMES})")
    p.add_argument("-t", "--threads", type=int, default=0)

    p = sub.add_parser("align", help="map reads and write SAM/BAM")
    p.add_argument("reference", help="FASTA, plain or gzip")
    p.add_argument("reads", help="FASTQ or FASTA, plain or gzip; - for stdin (read 1 of pairs)")
    p.add_argument("mates", nargs="?", help="read 2 of each pair (paired-end), in the order of READS")
    p.add_argument("-p", "--interleaved", action="store_true", help="READS holds pairs, mates in turn")
    p.add_argument("-I", dest="insert_size", metavar="MEAN[,STD[,MAX[,MIN]]]",
                   help="insert-size model of pairs (default: learned from the first 10,000 pairs)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="output by extension: .sam, .sam.gz (BGZF), .bam, .cram (default: SAM on stdout)")
    _add_stage_args(p)
    p.add_argument("-N", "--max-hits", type=int, default=1,
                   help="report up to N alignments per read: the primary and N-1 secondaries (default: 1)")
    p.add_argument("--all", action="store_true", help="report every location within e (secondaries)")
    p.add_argument("-M", dest="split_as_secondary", action="store_true",
                   help="flag the other part of a chimeric read secondary, not supplementary (bwa -M, Picard)")
    p.add_argument("-C", dest="append_comment", action="store_true",
                   help="append each read's header comment (SAM tags, e.g. BC:Z:ACGT) to its records (bwa -C)")
    p.add_argument("-Y", dest="soft_clip_supplementary", action="store_true",
                   help="soft-clip supplementary alignments (bwa -Y): what pymap always does; taken for bwa's "
                        "command lines")
    p.add_argument("-R", "--read-group", metavar="LINE", help=r"read group header line, e.g. '@RG\tID:s1\tSM:x'")
    p.add_argument("--seed", type=int, default=0, help="seed of deterministic tie-breaking (default: 0)")
    p.add_argument("--min-length", type=int, default=16, help="shorter reads are reported unmapped (too_short)")
    p.add_argument("--max-length", type=int, default=1000, help="longer reads are reported unmapped (too_long)")
    p.add_argument("--no-progress", action="store_true", help="no progress display on stderr")
    p.add_argument("--sort", action="store_true",
                   help="coordinate-sorted output, indexed beside it (.bai/.csi/.crai) when written to a file")
    p.add_argument("--level", type=int, metavar="0-9", help="compression level of BAM/CRAM/SAM.gz output")
    p.add_argument("--batches", type=int, metavar="N",
                   help="batches mapped side by side (default: threads / 5, with --device gpu 3/4 of the "
                        "threads; at least 2, 1 with -t 1); the output does not depend on it")
    p.add_argument("--dask", metavar="local:N|tcp://HOST:PORT",
                   help="map on a Dask cluster: N local worker processes, or a running scheduler")
    p.add_argument("--processes", type=_processes, metavar="N|auto", default="auto",
                   help="map in N worker processes of this machine sharing the threads (with --device gpu "
                        "spread over the GPUs), --batches in each; the output does not depend on it "
                        "(default: auto, worker processes for --device gpu on 1 GiB or more of plain FASTQ, "
                        "two a GPU with 16 threads a GPU, four for pairs against a reference of up to 1 GiB; "
                        "else 1, this process)")

    p = sub.add_parser("filter", help="run a pre-alignment filter on a pair file")
    p.add_argument("pairs", help="one pair per line: read TAB reference segment (same length); - for stdin")
    p.add_argument("--filter", default="gatekeeper-gpu", help="filter plugin or chain a,b")
    p.add_argument("--filter-opt", action="append", metavar="KEY=VALUE", default=[])
    p.add_argument("--device", choices=["auto", "cpu", "gpu"])
    p.add_argument("-e", "--max-edits", type=_edits, required=True, help="threshold E (count, or fraction of L)")
    p.add_argument("-t", "--threads", type=int, default=0)
    p.add_argument("-o", "--output", metavar="FILE")

    p = sub.add_parser("candidates", help="write the seeding stage's read/segment pairs")
    p.add_argument("reference", help="FASTA (.gz) of the reference")
    p.add_argument("reads", help="FASTQ or FASTA (.gz) of the reads")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="pair file: read and reference segment, tab-separated, a line per candidate (default: stdout)")
    _add_stage_args(p, mapping=False)

    sub.add_parser("plugins", help="list installed seeders, filters and extenders")
    _add_count_parser(sub)
    return top


def _add_count_parser(sub):
    """`pymap count`: canonical k-mer counts (mapper/count.py, docs/counting.md)."""
    p = sub.add_parser("count", help="count canonical k-mers (as jellyfish count -C)")
    p.add_argument("files", nargs="+", metavar="FILE", help="FASTA or FASTQ, plain or gzip; - for stdin")
    p.add_argument("-k", type=int, required=True, help="k-mer length, 1..31")
    p.add_argument("-t", "--threads", type=int, default=0, help="threads (default: all cores)")
    p.add_argument("-o", "--output", metavar="FILE", help="output file (default: stdout)")
    p.add_argument("--histo", action="store_true",
                   help="print the histogram of counts, as `jellyfish histo`, not KMER<TAB>COUNT lines")
    for flag, default, text in (("--low", 1, "histogram low count value"),
                                ("--high", 10000, "histogram high count value"),
                                ("--increment", 1, "histogram bucket width")):
        p.add_argument(flag, type=int, default=default, help=f"{text} (default: %(default)s)")
    p.add_argument("--full", action="store_true", help="histogram: print empty buckets too")
    p.add_argument("-m", type=int, help="minimizer length (default: k // 2, 3..11)")
    p.add_argument("--rule", choices=["rapidgkc", "kmc2", "none"],
                   help="signature rule of the minimizers (default: rapidgkc; none when m < 3)")
    p.add_argument("--partitions", type=int,
                   help="number of partitions, a power of two (default: from the input size)")


def _count(args):
    """`pymap count`. On a bacterial genome start-up takes longer than the count itself, so this path
    does not import the mapping pipeline (pymap.api)."""
    from pymap import count
    jitcache.announce_compiles()
    opt = count.CountOptions(k=args.k, m=args.m, rule=args.rule, partitions=args.partitions,
                             threads=args.threads).check()
    histo = dict(low=args.low, high=args.high, increment=args.increment, full=args.full)
    with _output(args.output) as fh:
        distinct, total = count.count_to_file(args.files, args.k, fh, histo=args.histo, histo_options=histo,
                                              options=opt)
    print(f"[pymap] {total:,} {args.k}-mers, {distinct:,} distinct", file=sys.stderr, flush=True)


def _filter_opts(args):
    from pymap.plugins import parse_options
    opts = parse_options(args.filter_opt)
    if getattr(args, "device", None):
        opts["device"] = args.device
    return opts


def _extender_opts(args):
    from pymap.plugins import parse_options
    opts = parse_options(getattr(args, "extender_opt", []))
    for key in ("match", "mismatch", "gap_open", "gap_ext", "clip", "min_score"):
        if getattr(args, key, None) is not None:
            opts[key] = getattr(args, key)
    return opts


def _options(args, **extra):
    from pymap.plugins import parse_options
    mapping = {} if not hasattr(args, "filter") else dict(   # `candidates` has the seeding options only
        filter=args.filter, filter_opts=parse_options(args.filter_opt), extender=args.extender,
        extender_opts=_extender_opts(args), filter_slack=args.filter_slack)
    return AlignOptions(max_edits=args.max_edits, threads=args.threads, seeder=args.seeder,
                        seeder_opts=parse_options(args.seeder_opt), device=getattr(args, "device", None),
                        batch_size=args.batch_size, **mapping, **extra)


@contextlib.contextmanager
def _output(path):
    """stdout, or a file that appears only when complete (pymap.outfile)."""
    if not path or path == "-":
        with outfile.Written(sys.stdout.buffer, path, owned=False) as out:
            yield out
        return
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory")
    if outfile.in_place(path):
        with outfile.Written(open(path, "wb"), path) as out:
            yield out
        return
    tmp = outfile.temporary(path)
    try:
        with outfile.Written(open(tmp, "wb"), path) as out:
            yield out
        outfile.publish(tmp, path)
    except BaseException:
        outfile.discard(tmp)
        raise


def _may_take_processes(args):
    """Whether an align command may map in worker processes: --processes N > 1, or "auto" where
    pymap.workers.may_take_workers holds (pymap.api.align decides)."""
    if args.processes != "auto":
        return args.processes > 1
    from pymap.workers import may_take_workers
    return may_take_workers(args.device, [args.reads, args.mates], args.dask)


def run(args, argv):
    if args.command == "align" and args.dask:
        from pymap import workers
        workers.start_dask_server(args.dask)    # it imports pymap while this process does
    elif args.command == "align" and _may_take_processes(args):
        from pymap import workers
        workers.start_server()              # likewise
        if args.device in ("gpu", "auto"):
            workers.count_gpus_soon()       # the driver starts while this process imports the mapper
    jitcache.prepare_numba()
    if args.command == "count":
        _count(args)
        return 0
    from pymap import api, insert, plugins
    if args.command in ("index", "align", "candidates", "filter"):
        jitcache.announce_compiles()
    if args.command == "index":
        api.set_threads(args.threads)
        api.build_index(args.reference, args.seeder, plugins.parse_options(args.seeder_opt), args.output)
    elif args.command == "align":
        opt = _options(args, max_hits=args.max_hits, report_all=args.all, read_group=args.read_group,
                       seed=args.seed, split_as_secondary=args.split_as_secondary,
                       append_comment=args.append_comment,
                       interleaved=args.interleaved,
                       insert_size=insert.parse(args.insert_size) if args.insert_size is not None else None,
                       min_length=args.min_length, max_length=args.max_length,
                       progress=not args.no_progress, sort=args.sort, level=args.level, dask=args.dask,
                       batches=args.batches, processes=args.processes)
        api.align(args.reference, args.reads, out=args.output, options=opt, index_path=args.index,
                  command_line="pymap " + " ".join(shlex.quote(a) for a in argv), mates_path=args.mates)
    elif args.command == "filter":
        if args.max_edits < 0:
            raise UsageError(f"-e/--max-edits must be >= 0, got {args.max_edits}")
        from pymap import pairfile
        acc, est, filt = pairfile.filter_pair_file(args.pairs, args.filter, args.max_edits, _filter_opts(args),
                                                   args.threads)
        import numpy as np
        lines = np.char.add(np.char.add(acc.astype(np.int8).astype(str), "\t"), est.astype(str))
        with _output(args.output) as fh:
            fh.write(("\n".join(lines.tolist()) + ("\n" if len(lines) else "")).encode())
        if hasattr(filt, "accepted"):
            api._log("filter accepts: " + ", ".join(f"{n} {a}" for n, a in zip(filt.names, filt.accepted)))
    elif args.command == "candidates":
        from pymap import pairfile
        with _output(args.output) as fh:
            n = pairfile.candidate_pairs(args.reference, args.reads, fh, _options(args), index_path=args.index)
        api._log(f"{n} candidate pairs")
    elif args.command == "plugins":
        for kind in ("seeder", "filter", "extender"):
            print(f"{kind}s:")
            for name, ep in plugins.available(kind).items():
                try:
                    doc = ((ep.load().__doc__ or "").strip().splitlines() or [""])[0]
                except Exception as exc:  # a broken third-party plugin must not hide the others
                    doc = f"(cannot load: {exc})"
                print(f"  {name:16s} {doc}")
    return 0


class Terminated(BaseException):
    """SIGTERM (kill, timeout, a batch scheduler ending the job), raised in the main thread so that the
    run stops as on Ctrl-C: partial output removed, workers stopped."""


def _terminate(signum, frame):
    raise Terminated()


def main(argv=None):
    """Run a pymap command; argv: its arguments (default: the process's own, when pymap is the program).
    Returns the exit status."""
    program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    if program:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        _refuse_bwa_h(argv)
        args = build_parser().parse_args(argv)
        if not args.command:
            build_parser().print_help()
            return 2
        if program and args.command == "align" and not args.dask:
            # Mapping makes no cyclic garbage (tests/test_align.py checks it), so the process maps with
            # the cycle collector off: its passes over Numba's many objects took 0.06 s of a 1.1 s run
            # of 29,000 pairs. A Dask client (distributed's objects) keeps it on.
            gc.disable()
        rc = run(args, argv)
        if program:
            # The process exits next, its output written and closed. Frozen objects are left to the OS
            # when the interpreter exits, not collected one by one: Numba's compiler and LLVM objects
            # took 0.14 s of a 1.05 s count on E. coli, and of a 1.0 s align of a few pairs.
            gc.freeze()
        return rc
    except PymapError as exc:
        if debug:
            raise
        print(f"pymap: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except PluginError as exc:
        if debug:
            raise
        print(f"pymap: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `pymap align ... | head`: stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 0
    except KeyboardInterrupt:
        print("pymap: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("pymap: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except MemoryError:
        print("pymap: error: out of memory (try a smaller --batch-size)", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug, not the user's doing: say so, whose, and how to see where
        if debug:
            raise
        from pymap.plugins import blamed_plugin
        plugin = blamed_plugin(exc)
        if plugin:
            print(f"pymap: error: the {plugin} failed: {type(exc).__name__}: {exc} (run `pymap --debug ...` "
                  f"for the traceback and report it to the plugin's authors)", file=sys.stderr)
        else:
            print(f"pymap: internal error: {type(exc).__name__}: {exc} (run `pymap --debug ...` for the "
                  f"traceback and please report it)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
