"""The client's timeline of a `pymap align` run with worker processes (pymap.processes): its start-up
steps, each chunk sent, mapped and placed, and its end; then a summary of it.

    T0=$(date +%s.%N) python3 scripts/gpu/timeline.py record OUT.json align REF READS ... -o OUT.sam
    python3 scripts/gpu/timeline.py report OUT.json [READS_A_CHUNK]

T0 is the shell's clock just before the process starts, so that "python up" counts the interpreter's
own start. The hooks import nothing the command line would not have imported by then: those on the
worker-process run are set when auto_count is called (in api.align, just before the run is made), so
the command's `--processes` must be auto (its default). Used for BENCHMARKS.md's thirty-second session.
"""
import json
import os
import sys
import time

EVENTS = []


def mark(what, **kw):
    EVENTS.append((round(time.time() - float(os.environ["T0"]), 4), what, kw))


def hook_run():
    import pymap.processes as pp
    init, receive, close = pp.ProcessRun.__init__, pp.ProcessRun._receive, pp.ProcessRun.close

    def timed_init(self, *a, **k):
        mark("ProcessRun made: start")
        init(self, *a, **k)
        mark("ProcessRun made: end")
        queue = self.tasks

        class Sent:
            def put(self_, task):
                if task is not None:
                    mark("sent", k=task[0])
                queue.put(task)
        self.tasks = Sent()

    def timed_receive(self, done):
        before, placed, ready = set(done), self.placed, len(self.ready)
        receive(self, done)
        for k in set(done) - before:
            mark("done", k=k)
        if self.placed > placed:
            mark("placed")
        if len(self.ready) > ready:
            mark("workers ready")

    def timed_close(self):
        mark("close: start")
        close(self)
        mark("close: end")
    pp.ProcessRun.__init__, pp.ProcessRun._receive, pp.ProcessRun.close = timed_init, timed_receive, timed_close


def record(out_json, argv):
    mark("python up")
    import pymap.cli as cli
    mark("cli imported")
    try:
        import pymap.workers as holder
    except ImportError:                  # code before pymap.workers: auto_count in pymap.processes
        import pymap.processes as holder
    auto_count = holder.auto_count

    def timed_auto_count(*a, **k):
        mark("auto_count: start")
        n = auto_count(*a, **k)
        mark("auto_count: end", n=n)
        hook_run()
        return n
    holder.auto_count = timed_auto_count
    sys.argv = ["pymap"] + argv
    try:
        return cli.main()
    finally:
        mark("main returned")
        with open(out_json, "w") as fh:
            json.dump(EVENTS, fh)


def report(path, chunk_reads=200000):
    events = json.load(open(path))
    for t, what, _ in events:
        if what not in ("sent", "done", "placed", "workers ready"):
            print(f"{t:7.3f} {what}")
    ready = [t for t, w, _ in events if w == "workers ready"]
    sent = {kw["k"]: t for t, w, kw in events if w == "sent"}
    done = {kw["k"]: t for t, w, kw in events if w == "done"}
    placed = [t for t, w, _ in events if w == "placed"]
    ends = sorted(done.values())
    n = len(ends)
    latency = sorted(done[k] - sent[k] for k in done)
    print(f"workers ready {min(ready):.3f}..{max(ready):.3f}; first sent {min(sent.values()):.3f}, first done "
          f"{ends[0]:.3f}, last done {ends[-1]:.3f}, last placed {max(placed) if placed else float('nan'):.3f}")
    print(f"{n} chunks; latency min {latency[0]:.2f} median {latency[n // 2]:.2f} max {latency[-1]:.2f} s")
    if n >= 30:
        rate = (n - 20) / (ends[n - 11] - ends[9])
        print(f"steady (10th to {n - 10}th done): {rate:.2f} chunks/s = {rate * chunk_reads / 1e6:.2f} M reads/s; "
              f"first sent to last done {ends[-1] - min(sent.values()):.2f} s against {n / rate:.2f} s at that rate")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "record":
        sys.exit(record(sys.argv[2], sys.argv[3:]))
    if len(sys.argv) in (3, 4) and sys.argv[1] == "report":
        report(sys.argv[2], *(int(x) for x in sys.argv[3:]))
    else:
        sys.exit(__doc__)
