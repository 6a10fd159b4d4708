"""Run a command and report how many of the machine's CPUs were busy while it ran.

    python3 scripts/gpu/cpu_busy.py [--bin 0.5] -- pymap align ...

Samples /proc/stat every 50 ms (the whole machine: run nothing else beside it) and prints, after the
command, its wall time, the mean number of busy CPUs and a row per bin. The command's own output is left
as it is; the exit status is the command's.
"""
import argparse
import os
import subprocess
import sys
import threading
import time


def busy_jiffies():
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:]]
    idle = values[3] + values[4]                   # idle and iowait
    return sum(values) - idle, sum(values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=float, default=0.5, help="seconds per row")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    cpus, rows, done = os.cpu_count(), [], threading.Event()

    def sample():
        last = busy_jiffies()
        while not done.wait(0.05):
            cur = busy_jiffies()
            rows.append((time.time(), cpus * (cur[0] - last[0]) / max(1, cur[1] - last[1])))
            last = cur

    sampler = threading.Thread(target=sample, daemon=True)
    t0 = time.time()
    sampler.start()
    status = subprocess.call(command)
    wall = time.time() - t0
    done.set()
    sampler.join()
    if rows:
        print(f"{wall:.2f} s; {sum(b for _, b in rows) / len(rows):.2f} of {cpus} CPUs busy on average")
        print("\n| from s | busy CPUs |\n| ---: | ---: |")
        for k in range(int(wall / args.bin) + 1):
            part = [b for t, b in rows if k * args.bin <= t - t0 < (k + 1) * args.bin]
            if part:
                print(f"| {k * args.bin:.1f} | {sum(part) / len(part):.2f} |")
    sys.exit(status)


if __name__ == "__main__":
    main()
