#!/usr/bin/env bash
# The GPU measurements of BENCHMARKS.md in one device call (the machines are lent for minutes):
#   device run, carry [".gpu"] (site.tar.xz from ../shared/gpu/stage.sh, ecoli_MG1655.fa.gz):
#   bash scripts/gpu/session.sh STEP ...   (default: tests bench ncu map)
#   steps: tests gpustages bench cand scale ncu ncumap map gpupipe gpumem gpupairpipe gpupairs abpipe spy spystart spyworkers gpustart firstcalls batchsweep large multigpu
#          twoproc daskgpu procs gpuprocs nsys filewrites limits
#          cpus ceiling hostceiling dask daskab daskprof output (each is described where the case below handles it)
# (dask: the CPU scaling of --dask local:N; stage with EXTRA_PKGS naming dask, distributed and their
# dependencies, see BENCHMARKS.md "Scale-out on Dask")
# Each step writes under $OUT and prints a short summary.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar -xJf .gpu/site.tar.xz -C /tmp
# the installed layout of the one pymap namespace (pyproject's package-dir), without pip
# (SRC: another tree's mapper, filters and kernels, e.g. an older commit's, for a before/after on one machine)
SRC=${SRC:-.}
rm -rf /tmp/pkg && mkdir -p /tmp/pkg && cp -r "$SRC/mapper" /tmp/pkg/pymap && cp -r "$SRC/filters" /tmp/pkg/pymap/filters \
  && cp -r "$SRC/kernels" /tmp/pkg/pymap/kernels
export PYTHONPATH=/tmp/site:/tmp/pkg CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PYTHONUNBUFFERED=1
python3 scripts/gpu/register.py /tmp/site >/dev/null
# byte-compile what was unpacked, as pip does at install: else every process (each Dask worker too)
# compiles numba, dask and pymap from source at import, seconds each
python3 -m compileall -q -j 0 /tmp/site /tmp/pkg >/dev/null
# the E. coli reference and MAP_READS (default 1,000,000) simulated 150 bp reads under /tmp/map, made
# once a machine
ecoli_reads() {
  mkdir -p /tmp/map && cp .gpu/ecoli_MG1655.fa.gz /tmp/map/ && gunzip -f /tmp/map/ecoli_MG1655.fa.gz
  [ -f /tmp/map/r150.fq ] || python3 scripts/numpy_reads.py /tmp/map/ecoli_MG1655.fa -n ${MAP_READS:-1000000} -L 150 \
    --seed 3 -o /tmp/map/r150.fq
}
# a fresh machine's memory grows as it is first touched: TOUCH (24G) of /dev/shm written once, then freed
touch_memory() {
  head -c ${TOUCH:-24G} /dev/zero > /dev/shm/touch; rm -f /dev/shm/touch
}
# py-spy's static binary from .gpu/py-spy.xz (see the spy step) at /tmp/py-spy
unpack_pyspy() {
  [ -x /tmp/py-spy ] || { xz -dc .gpu/py-spy.xz > /tmp/py-spy && chmod +x /tmp/py-spy; }
}
steps=${*:-tests bench ncu map}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv | tee "$OUT/gpu.txt"
echo "cpus: $(nproc)" | tee -a "$OUT/gpu.txt"
for step in $steps; do
  echo "== $step $(date +%T)"
  case $step in
  tests)
    # the machine's own pytest (with plugins) clashes with a staged one: use the machine's
    if PYTHONPATH= python3 -c "import pytest" 2>/dev/null; then rm -rf /tmp/site/_pytest /tmp/site/pytest* /tmp/site/py.py /tmp/site/pluggy*; fi
    python3 -m pytest -q -rs tests/test_gatekeeper.py tests/test_sneakysnake.py -k cuda 2>&1 | tail -6 | tee "$OUT/tests.txt" ;;
  gpustages)
    if PYTHONPATH= python3 -c "import pytest" 2>/dev/null; then rm -rf /tmp/site/_pytest /tmp/site/pytest* /tmp/site/py.py /tmp/site/pluggy*; fi
    python3 -m pytest -q -rs -x tests/test_gpu_stages.py -k "${GPUSTAGES_K:-gpu}" 2>&1 | tail -30 | tee "$OUT/gpustages.txt" ;;
  bench)
    python3 scripts/bench_filters.py --pairs 1000000 --tile 8 --threads "$(nproc)" --repeat 5 \
      --json "$OUT/bench.json" > "$OUT/bench.md" 2> "$OUT/bench.log"; cat "$OUT/bench.md" ;;
  cand)
    python3 scripts/bench_filters.py --pairs 1000000 --tile 8 --candidates --no-pairs --threads "$(nproc)" --repeat 5 \
      --json "$OUT/cand.json" > "$OUT/cand.md" 2> "$OUT/cand.log"; cat "$OUT/cand.md" ;;
  scale)
    python3 scripts/bench_filters.py --pairs 1000000 --tile 16 --lengths 100 150 250 --edits 5 --no-cpu --repeat 5 \
      --json "$OUT/scale.json" > "$OUT/scale.md" 2> "$OUT/scale.log"; cat "$OUT/scale.md"
    for vis in 0 0,1; do
      CUDA_VISIBLE_DEVICES=$vis python3 scripts/bench_filters.py --pairs 1000000 --tile 16 --lengths 100 150 250 --edits 5 \
        --candidates --no-pairs --no-cpu --repeat 5 --json "$OUT/scale_cand_$vis.json" > "$OUT/scale_cand_$vis.md" 2>&1
      echo "GPUs $vis:"; grep candidates "$OUT/scale_cand_$vis.md"
    done ;;
  ncu)
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
    for k in k_words k_ascii; do
      enc=$([ $k = k_words ] && echo host || echo device)
      "$NCU" --target-processes all -k "regex:$k" -s 2 -c 1 --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
        python3 scripts/bench_filters.py --pairs 1000000 --tile 8 --lengths 100 --edits 5 --no-cpu --repeat 2 \
        --encode $enc > "$OUT/ncu_$k.txt" 2>&1
      grep -E "Registers Per|Achieved Occupancy|Theoretical Occupancy|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Duration|Block Limit" "$OUT/ncu_$k.txt" | head -20
    done ;;
  ncumap)
    # Nsight Compute on the mapping kernels of a whole `pymap align --device gpu` (NCU_READS reads, default
    # 400,000, batches of 200,000): the second launch of each of NCU_KERNELS (default the seeding, filter
    # and extension kernels). Counters need a machine that lets ncu read them (the device tool's
    # Firecracker machines, with --clock-control none)
    ecoli_reads && python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
    head -n $(( ${NCU_READS:-400000} * 4 )) /tmp/map/r150.fq > /tmp/map/ncu.fq
    A="python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa /tmp/map/ncu.fq --device gpu -t $(nproc) --no-progress -o /tmp/map/ncu.sam"
    $A 2>&1 | tail -1
    for k in ${NCU_KERNELS:-_k_query k_candidates _k_align}; do
      echo "== $k" | tee -a "$OUT/ncumap.txt"
      "$NCU" --target-processes all --clock-control none -k "regex:$k" -s 1 -c 1 --section SpeedOfLight \
        --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats $A > "$OUT/ncu_$k.txt" 2>&1
      grep -E "Duration|DRAM Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|No Eligible" \
        "$OUT/ncu_$k.txt" | tee -a "$OUT/ncumap.txt"
    done ;;
  map)
    mkdir -p /tmp/map && cp .gpu/ecoli_MG1655.fa.gz /tmp/map/ && gunzip -f /tmp/map/ecoli_MG1655.fa.gz
    python3 scripts/numpy_reads.py /tmp/map/ecoli_MG1655.fa -n ${MAP_READS:-2000000} -L 150 --seed 3 -o /tmp/map/r150.fq
    python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    TIMEFORMAT="%R s wall, %U s user"
    for dev in cpu gpu cpu gpu; do
      { time python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq \
        --device $dev -t "$(nproc)" --batch-size 200000 --no-progress -o /tmp/map/$dev.sam ; } 2>&1 | tail -3 | tee -a "$OUT/map_$dev.txt"
    done
    cmp <(grep -v '^@PG' /tmp/map/cpu.sam) <(grep -v '^@PG' /tmp/map/gpu.sam) && echo "cpu and gpu SAM identical" | tee -a "$OUT/map.txt"
    python3 scripts/numpy_reads.py --check /tmp/map/gpu.sam | tee -a "$OUT/map.txt" ;;
  gpupipe)
    # per-stage times of --device cpu and gpu in one warm process (scripts/bench_gpu_pipeline.py); BATCH
    # (reads a batch), BATCHES (side by side, a comma list), DEVICES (default cpu,gpu), GPUPIPE_FLAGS (more
    # flags: --timeline)
    ecoli_reads
    python3 scripts/bench_gpu_pipeline.py /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq -t "$(nproc)" --batch-size ${BATCH:-200000} \
      --repeats 2 --workdir /tmp/map --profile ${PROFILE:-0} --batches "${BATCHES:-}" --devices ${DEVICES:-cpu,gpu} ${GPUPIPE_FLAGS:-} 2>&1 \
      | grep -v -i warn | tee -a "$OUT/gpupipe.md" ;;
  gpumem)
    # GPU memory (nvidia-smi's memory.used, sampled every 100 ms, its peak) and host memory (max RSS) of
    # whole `pymap align --device gpu` runs on MAP_READS reads with each of MEM_BATCHES batches side by side
    ecoli_reads
    for n in ${MEM_BATCHES:-5 8 12}; do
      nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > /tmp/gmem_$n.txt &
      sampler=$!
      /usr/bin/time -f "batches $n: %e s, max RSS %M KB" python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa \
        /tmp/map/r150.fq --device gpu -t "$(nproc)" --batches $n --no-progress -o /tmp/map/m.sam 2>&1 | tail -1 \
        | tee -a "$OUT/gpumem.txt"
      kill $sampler
      echo "  GPU memory used, peak: $(sort -n /tmp/gmem_$n.txt | tail -1) MiB" | tee -a "$OUT/gpumem.txt"
    done ;;
  gpupairpipe)
    # the gpupipe step on FR pairs (MAP_PAIRS, default 500,000, of 150 bp; --batch-size / 2 pairs a batch),
    # with the timeline of each row's last run (hits and pairing of each batch)
    mkdir -p /tmp/map && cp .gpu/ecoli_MG1655.fa.gz /tmp/map/ && gunzip -f /tmp/map/ecoli_MG1655.fa.gz
    [ -f /tmp/map/p2.fq ] || python3 scripts/numpy_reads.py /tmp/map/ecoli_MG1655.fa -n ${MAP_PAIRS:-500000} -L 150 \
      --seed 5 -o /tmp/map/p1.fq --pairs /tmp/map/p2.fq
    python3 scripts/bench_gpu_pipeline.py /tmp/map/ecoli_MG1655.fa /tmp/map/p1.fq --mates /tmp/map/p2.fq -t "$(nproc)" \
      --batch-size ${BATCH:-200000} --repeats 2 --workdir /tmp/map --batches "${BATCHES:-}" --devices ${DEVICES:-cpu,gpu} \
      --timeline 2>&1 | grep -v -i warn | tee -a "$OUT/gpupairpipe.md" ;;
  gpupairs)
    # FR pairs (MAP_PAIRS, default 500,000, of 150 bp) as whole `pymap align` processes, SAM to a file,
    # --device cpu on all cores and --device gpu alternated; records compared without @PG
    mkdir -p /tmp/map && cp .gpu/ecoli_MG1655.fa.gz /tmp/map/ && gunzip -f /tmp/map/ecoli_MG1655.fa.gz
    [ -f /tmp/map/p2.fq ] || python3 scripts/numpy_reads.py /tmp/map/ecoli_MG1655.fa -n ${MAP_PAIRS:-500000} -L 150 \
      --seed 5 -o /tmp/map/p1.fq --pairs /tmp/map/p2.fq
    python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    TIMEFORMAT="%R"
    for i in 0 1 2; do for dev in cpu gpu; do
      s=$( { time python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa /tmp/map/p1.fq /tmp/map/p2.fq --device $dev \
        -t "$(nproc)" --no-progress -o /tmp/map/p_$dev.sam 2>/tmp/map/p_$dev.err ; } 2>&1 | tail -1 )
      echo "run $i $dev: $s s; $(grep -o '[0-9.]* s (seed.*' /tmp/map/p_$dev.err | head -1)" | tee -a "$OUT/gpupairs.txt"
    done; done
    cmp <(grep -v '^@PG' /tmp/map/p_cpu.sam) <(grep -v '^@PG' /tmp/map/p_gpu.sam) && echo "records identical" \
      | tee -a "$OUT/gpupairs.txt" ;;
  spy)
    # where the host's time goes with batches side by side: py-spy samples of the thread holding the GIL
    # (SPY_FLAGS= : of every busy thread instead)
    # one warm process per device. .gpu/py-spy.xz is the static binary of the py-spy wheel, compressed:
    #   pip download py-spy --no-deps -d /tmp/dl && unzip -o /tmp/dl/py_spy*.whl -d /tmp/pyspy &&
    #   xz -9c /tmp/pyspy/py_spy-*.data/scripts/py-spy > .gpu/py-spy.xz
    ecoli_reads
    for dev in ${SPY_DEVICES:-gpu cpu}; do
      unpack_pyspy
      # one run first, so that the sampled process loads its kernels from the disk cache, not compiles them
      python3 scripts/bench_gpu_pipeline.py /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq -t "$(nproc)" --repeats 1 \
        --devices $dev --workdir /tmp/map > /dev/null 2>&1
      /tmp/py-spy record -r 200 -f raw ${SPY_FLAGS---gil} -o "$OUT/spy_$dev.txt" -- python3 scripts/bench_gpu_pipeline.py \
        /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq -t "$(nproc)" --batch-size ${BATCH:-200000} --repeats 3 --devices $dev \
        --workdir /tmp/map --batches "${BATCHES:-}" 2>&1 | grep -v -i warn | tail -3
      ex="--exclude compile Linker nvvm"
      python3 scripts/spy_summary.py "$OUT/spy_$dev.txt" --top 60 $ex > "$OUT/spy_$dev.md"
      python3 scripts/spy_summary.py "$OUT/spy_$dev.txt" --top 50 --under map_batch $ex > "$OUT/spy_${dev}_batch.md"
      gzip -f "$OUT/spy_$dev.txt"
    done ;;
  spystart)
    # where a whole `pymap align --device gpu|cpu` process spends its time (start-up included): py-spy of
    # every busy thread, after one run that fills the kernel caches (.gpu/py-spy.xz: see spy)
    ecoli_reads
    unpack_pyspy
    for dev in ${SPY_DEVICES:-gpu cpu}; do
      python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq --device $dev -t "$(nproc)" --no-progress \
        -o /tmp/map/$dev.sam 2>&1 | tail -1
      /tmp/py-spy record -r 200 -f raw -o "$OUT/spystart_$dev.txt" -- python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa \
        /tmp/map/r150.fq --device $dev -t "$(nproc)" --no-progress -o /tmp/map/$dev.sam 2>&1 | grep -v py-spy | tail -1
      python3 scripts/spy_summary.py "$OUT/spystart_$dev.txt" --top 70 > "$OUT/spystart_$dev.md"
      python3 scripts/spy_summary.py "$OUT/spystart_$dev.txt" --top 40 --under LocalRun.__init__ > "$OUT/spystart_${dev}_init.md"
      gzip -f "$OUT/spystart_$dev.txt"
    done ;;
  spyworkers)
    # where the worker processes of the default layout (--processes auto) spend their CPU: py-spy cannot
    # follow the fork server's children from the command, so `py-spy --native` is attached to each worker
    # SPY_AFTER s into the run (4.5) for SPY_FOR s (5). The input: the reads, or with SPY_PAIRS=1 as many
    # pairs, SPY_COPIES times over (10; MAP_READS=2000000 gives the 20 M of BENCHMARKS.md) on /dev/shm.
    # Unwinding native stacks stops the processes: shares, not times (thirty-fifth session)
    ecoli_reads
    unpack_pyspy
    W=/dev/shm/pymap; mkdir -p $W
    if [ -n "${SPY_PAIRS:-}" ]; then
      [ -f /tmp/map/p1.fq ] || python3 scripts/numpy_reads.py /tmp/map/ecoli_MG1655.fa -n ${MAP_READS:-1000000} -L 150 \
        --seed 5 -o /tmp/map/p1.fq --pairs /tmp/map/p2.fq > /dev/null
      for m in 1 2; do for k in $(seq ${SPY_COPIES:-10}); do cat /tmp/map/p$m.fq; done > $W/spy$m.fq; done
      IN="$W/spy1.fq $W/spy2.fq"
      for m in 1 2; do head -200000 /tmp/map/p$m.fq > $W/warm$m.fq; done
      WARM="$W/warm1.fq $W/warm2.fq"        # pairs compile their own kernels (pairing, rescue)
    else
      for k in $(seq ${SPY_COPIES:-10}); do cat /tmp/map/r150.fq; done > $W/spy1.fq
      IN=$W/spy1.fq
      WARM=/tmp/map/r150.fq
    fi
    A="python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa --no-progress -t $(nproc) --device gpu"
    $A $WARM -o $W/spy.sam > /dev/null 2>&1                  # fills the kernel caches
    rm -f $W/spy.sam
    $A $IN -o $W/spy.sam 2> $W/spy.log &
    sleep ${SPY_AFTER:-4.5}
    server=$(pgrep -o -f "forkserver import main")          # its children share its command line
    for w in $(pgrep -P "$server"); do
      /tmp/py-spy record --pid $w --native -r 100 -d ${SPY_FOR:-5} -f raw -o "$OUT/spyworkers_$w.txt" > /dev/null 2>&1 &
    done
    wait
    tail -1 $W/spy.log
    cat "$OUT"/spyworkers_*.txt > "$OUT/spyworkers.txt" && rm -f "$OUT"/spyworkers_*.txt
    python3 scripts/spy_summary.py "$OUT/spyworkers.txt" --busy --top 60 --callers mapiter_trivial_get mapiter_get pwrite64 \
      > "$OUT/spyworkers.md"
    gzip -f "$OUT/spyworkers.txt"
    rm -f $W/spy*.fq $W/warm*.fq $W/spy.sam ;;
  batchsweep)
    # the warm GPU pipeline on MAP_READS reads per batch size (BATCH_SIZES) and batches side by side
    # (BATCHES: "" is pymap's default), one process per size, the faster of two runs
    ecoli_reads && python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq --device gpu -t "$(nproc)" --no-progress \
      -o /tmp/map/sweep.sam 2>/dev/null
    for bs in ${BATCH_SIZES:-200000 100000 400000 200000}; do
      echo "batch size $bs" | tee -a "$OUT/batchsweep.md"
      python3 scripts/bench_gpu_pipeline.py /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq -t "$(nproc)" --devices gpu \
        --repeats 2 --batch-size $bs --batches "${BATCHES-,6,16}" --workdir /tmp/map 2>&1 | grep -E "^\| gpu" \
        | tee -a "$OUT/batchsweep.md"
    done ;;
  firstcalls)
    # every kernel's first call (cache load, lock wait) in whole `pymap align` processes, after a run
    # that fills the caches (scripts/first_calls.py)
    ecoli_reads && python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    for dev in ${FIRST_DEVICES:-gpu cpu}; do
      python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq --device $dev -t "$(nproc)" --no-progress \
        -o /tmp/map/fc.sam 2>/dev/null
      TIMEFORMAT="$dev: %R s wall"
      { time python3 scripts/first_calls.py align /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq --device $dev -t "$(nproc)" \
        --no-progress -o /tmp/map/fc.sam --top 25 ; } 2>&1 | grep -v -i warn | tee -a "$OUT/firstcalls.txt"
    done ;;
  gpustart)
    # what a --device gpu process pays before its first read: Numba's CUDA import, the context, the
    # first copy (persistence mode off makes the driver's start dearer), and the import's costliest modules
    nvidia-smi -q | grep -i -E "persistence mode" | head -1 | tee "$OUT/gpustart.txt"
    python3 -X importtime -c "from numba import cuda" 2> "$OUT/imp_cuda.txt"
    python3 -c "
import time; t0 = time.perf_counter()
import numba; t1 = time.perf_counter()
from numba import cuda; t2 = time.perf_counter()
cuda.current_context(); t3 = time.perf_counter()
import numpy as np; cuda.to_device(np.zeros(10)); cuda.synchronize(); t4 = time.perf_counter()
print(f'import numba {t1 - t0:.2f} s, numba.cuda {t2 - t1:.2f} s, context {t3 - t2:.2f} s, first copy {t4 - t3:.2f} s')
" | tee -a "$OUT/gpustart.txt"
    sort -t'|' -k2 -n "$OUT/imp_cuda.txt" | tail -12 | tee -a "$OUT/gpustart.txt"
    # whole processes on a few reads (start-up and exit, little mapping), after one run that fills the caches
    ecoli_reads && python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    head -n 8000 /tmp/map/r150.fq > /tmp/map/few.fq
    TIMEFORMAT="%R"
    for i in 0 1 2; do for dev in cpu gpu; do
      s=$( { time python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa /tmp/map/few.fq --device $dev -t "$(nproc)" \
        --no-progress -o /tmp/map/few_$dev.sam 2>/tmp/map/few.err ; } 2>&1 | tail -1 )
      [ $i = 0 ] || echo "2,000 reads, $dev: $s s wall; $(grep -o '[0-9.]* s (seed.*' /tmp/map/few.err | head -1)" \
        | tee -a "$OUT/gpustart.txt"
    done; done ;;
  large)
    # a human-like genome (LARGE_SIZE, default 1G) mapped with its minimizer index resident on the GPU
    mkdir -p /tmp/big
    [ -f /tmp/big/g.fa ] || python3 scripts/make_genome.py --size ${LARGE_SIZE:-1G} --out /tmp/big/g.fa --seed 1 | tail -1
    python3 scripts/numpy_reads.py /tmp/big/g.fa -n ${LARGE_READS:-2000000} -L 150 --seed 6 -o /tmp/big/r.fq
    TIMEFORMAT="%R s wall, %U s user"
    { time python3 -m pymap.cli index /tmp/big/g.fa -t "$(nproc)" ; } 2>&1 | tail -2 | tee -a "$OUT/large.txt"
    head -n 400000 /tmp/big/r.fq > /tmp/big/warm.fq          # compiles both devices' kernels first
    for dev in gpu cpu; do python3 -m pymap.cli align /tmp/big/g.fa /tmp/big/warm.fq --device $dev -t "$(nproc)" \
      --no-progress -o /tmp/big/warm.sam 2>&1 | tail -1 | cut -c1-40; done
    for dev in gpu cpu gpu cpu; do
      echo "device $dev" | tee -a "$OUT/large.txt"
      { time python3 -m pymap.cli align /tmp/big/g.fa /tmp/big/r.fq --device $dev -t "$(nproc)" \
        --no-progress -o /tmp/big/$dev.sam ; } 2>&1 | grep -E "pymap\] [0-9]|CPU|wall" | tee -a "$OUT/large.txt"
    done
    cmp <(grep -v '^@PG' /tmp/big/cpu.sam) <(grep -v '^@PG' /tmp/big/gpu.sam) && echo "cpu and gpu SAM identical" | tee -a "$OUT/large.txt"
    python3 scripts/numpy_reads.py --check /tmp/big/gpu.sam | tee -a "$OUT/large.txt" ;;
  multigpu)
    # one GPU against all of them, --device gpu, one warm process each
    ecoli_reads
    all=$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd,)
    for vis in 0 "$all"; do
      echo "GPUs $vis"
      CUDA_VISIBLE_DEVICES=$vis python3 scripts/bench_gpu_pipeline.py /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq -t "$(nproc)" \
        --batch-size ${BATCH:-200000} --repeats 2 --devices gpu --workdir /tmp/map --batches "${BATCHES:-}" 2>&1 | grep -v -i warn | tee -a "$OUT/multigpu.md"
    done ;;
  gpuprocs)
    # whole `pymap align --device gpu` runs on every visible GPU, MAP_READS reads x REPEAT_SETS (default
    # 10) on /dev/shm, ROUNDS rounds (default 2): one process on GPU 0 (-t nproc), --processes NGPU (a
    # worker a GPU), and NGPU independent processes, one a GPU (-t nproc/NGPU), on equal parts of the
    # reads (the most the worker processes could reach); records of the first two compared
    ecoli_reads && python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    W=/dev/shm/pymap; mkdir -p $W && head -400000 /tmp/map/r150.fq > $W/warm.fq
    for k in $(seq ${REPEAT_SETS:-10}); do cat /tmp/map/r150.fq; done > $W/many.fq
    ngpu=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
    part=$(( ($(wc -l < $W/many.fq) / 4 + ngpu - 1) / ngpu * 4 ))
    split -l $part -d -a 1 $W/many.fq $W/part_
    A="python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa --no-progress --device gpu"
    $A $W/warm.fq -t "$(nproc)" -o $W/warm.sam 2>/dev/null
    secs() { python3 -c "import time; print(f'{time.time() - $1:.2f}')"; }
    for round in $(seq ${ROUNDS:-2}); do
      t0=$(date +%s.%N); CUDA_VISIBLE_DEVICES=0 $A $W/many.fq -t "$(nproc)" -o $W/one.sam 2>/dev/null
      echo "r$round one GPU, one process: $(secs $t0) s" | tee -a "$OUT/gpuprocs.md"
      t0=$(date +%s.%N); $A $W/many.fq -t "$(nproc)" --processes $ngpu -o $W/procs.sam 2>$W/procs.log
      echo "r$round $ngpu GPUs, --processes $ngpu: $(secs $t0) s; $(grep -o 'ready after.*' $W/procs.log)" \
        | tee -a "$OUT/gpuprocs.md"
      t0=$(date +%s.%N)
      for g in $(seq 0 $((ngpu - 1))); do
        [ -f $W/part_$g ] && CUDA_VISIBLE_DEVICES=$g $A $W/part_$g -t $(( $(nproc) / ngpu )) -o $W/part_$g.sam 2>/dev/null &
      done
      wait
      echo "r$round $ngpu GPUs, independent processes on $ngpu parts: $(secs $t0) s" | tee -a "$OUT/gpuprocs.md"
    done
    cmp -s <(grep -v '^@PG' $W/one.sam) <(grep -v '^@PG' $W/procs.sam) && echo "records identical" \
      | tee -a "$OUT/gpuprocs.md" || echo "RECORDS DIFFER" | tee -a "$OUT/gpuprocs.md"
    rm -f $W/*.sam $W/part_* ;;
  twoproc)
    # one process's ceiling on one GPU: the warm pipeline on MAP_READS reads in one process (-t nproc), then
    # two processes at once on the two halves (-t nproc/2 each, then -t nproc each): their wall times
    ecoli_reads && python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    half=$(( $(wc -l < /tmp/map/r150.fq) / 8 * 4 ))
    head -n $half /tmp/map/r150.fq > /tmp/map/half_a.fq && tail -n +$((half + 1)) /tmp/map/r150.fq > /tmp/map/half_b.fq
    B="python3 scripts/bench_gpu_pipeline.py /tmp/map/ecoli_MG1655.fa"
    echo "one process, -t $(nproc)" | tee -a "$OUT/twoproc.md"
    $B /tmp/map/r150.fq -t "$(nproc)" --devices gpu --repeats 2 --workdir /tmp/map 2>&1 | grep -E "^(\| gpu|#)" | tee -a "$OUT/twoproc.md"
    for t in $(( $(nproc) / 2 )) "$(nproc)"; do
      echo "two processes at once, -t $t each" | tee -a "$OUT/twoproc.md"
      mkdir -p /tmp/map/two_a /tmp/map/two_b
      $B /tmp/map/half_a.fq -t $t --devices gpu --repeats 3 --workdir /tmp/map/two_a > /tmp/map/two_a.txt 2>&1 &
      $B /tmp/map/half_b.fq -t $t --devices gpu --repeats 3 --workdir /tmp/map/two_b > /tmp/map/two_b.txt 2>&1 &
      wait
      for h in a b; do grep -E "^(\| gpu|#)" /tmp/map/two_$h.txt | sed "s/^/$h /" | tee -a "$OUT/twoproc.md"; done
    done ;;
  procs)
    # `pymap align --processes P` (PROCS, default "1 2 3 4") on MAP_READS reads (a set of REPEAT_SETS
    # copies of them, default 10) with --device gpu on every visible GPU, ROUNDS rounds (default 2),
    # output on /dev/shm; then --device cpu on the reads once, -t nproc in one process against nproc
    # processes of one thread; records compared with the first run's
    ecoli_reads && python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    W=/dev/shm/pymap; mkdir -p $W && head -400000 /tmp/map/r150.fq > $W/warm.fq
    for k in $(seq ${REPEAT_SETS:-10}); do cat /tmp/map/r150.fq; done > $W/many.fq
    A="python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa --no-progress -t $(nproc)"
    for t in "$(nproc)" 1; do $A $W/warm.fq --device gpu -t $t --batch-size 200000 -o $W/warm.sam 2>/dev/null; done
    $A $W/warm.fq --device cpu -o $W/warm.sam 2>/dev/null
    first=""
    for round in $(seq ${ROUNDS:-2}); do
      for P in ${PROCS:-1 2 3 4}; do
        /usr/bin/time -f "gpu, $(wc -l < $W/many.fq | awk '{print $1/4}') reads, --processes $P: wall %e s" \
          $A $W/many.fq --device gpu --processes $P -o $W/p$P.sam > $W/p.log 2>&1
        grep -E "note: processes|wall" $W/p.log | cut -c1-250 | tee -a "$OUT/procs.md"
        [ -n "$first" ] || first=$W/p$P.sam
        [ "$W/p$P.sam" = "$first" ] || { cmp -s <(grep -v '^@PG' $first) <(grep -v '^@PG' $W/p$P.sam) \
          && echo "records identical" || echo "RECORDS DIFFER"; } | tee -a "$OUT/procs.md"
        [ "$W/p$P.sam" = "$first" ] || rm -f $W/p$P.sam
      done
    done
    rm -f $W/*.sam
    for P in 1 "$(nproc)"; do
      /usr/bin/time -f "cpu, $(wc -l < /tmp/map/r150.fq | awk '{print $1/4}') reads, --processes $P: wall %e s" \
        $A /tmp/map/r150.fq --device cpu --processes $P -o $W/c$P.sam 2>&1 | grep -E "wall" | tee -a "$OUT/procs.md"
    done
    cmp -s <(grep -v '^@PG' $W/c1.sam) <(grep -v '^@PG' $W/c$(nproc).sam) && echo "cpu records identical" | tee -a "$OUT/procs.md"
    rm -rf $W ;;
  daskgpu)
    # GPU workers under Dask on this machine: a scheduler and DASK_SHAPES workers x threads (default 2x8 4x4)
    # against one `pymap align --device gpu` process on MAP_READS reads, output on /dev/shm
    ecoli_reads && python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    export DASK_DISTRIBUTED__DIAGNOSTICS__NVML=False DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False
    A="python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq --no-progress --device gpu"
    mkdir -p /dev/shm/pymap && head -400000 /tmp/map/r150.fq > /dev/shm/pymap/warm.fq
    for t in "$(nproc)" 1; do       # the kernels of both paths compiled (a worker's task maps on one thread)
      python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa /dev/shm/pymap/warm.fq --no-progress --device gpu -t $t \
        --batch-size 200000 -o /dev/shm/pymap/warm.sam 2>/dev/null
    done
    /usr/bin/time -f "one process: wall %e s" $A -t "$(nproc)" -o /dev/shm/pymap/one.sam 2>&1 | grep -E "wall" | tee -a "$OUT/daskgpu.md"
    for shape in ${DASK_SHAPES:-2x8 4x4}; do
      python3 -m distributed.cli.dask_scheduler --host 127.0.0.1 --port 8786 --no-dashboard > /tmp/map/sch.log 2>&1 &
      sleep 3
      for k in $(seq ${shape%x*}); do
        python3 -m distributed.cli.dask_worker tcp://127.0.0.1:8786 --nthreads ${shape#*x} --no-nanny --no-dashboard \
          > /tmp/map/wk$k.log 2>&1 &
      done
      sleep 8
      /usr/bin/time -f "dask $shape: wall %e s" $A --dask tcp://127.0.0.1:8786 --batch-size 200000 -o /dev/shm/pymap/dk.sam \
        2>&1 | grep -E "wall|note: dask|error" | tee -a "$OUT/daskgpu.md"
      cmp -s <(grep -v '^@PG' /dev/shm/pymap/one.sam) <(grep -v '^@PG' /dev/shm/pymap/dk.sam) && echo "records identical" \
        | tee -a "$OUT/daskgpu.md"
      pkill -f dask_worker; pkill -f dask_scheduler; sleep 2
    done
    rm -rf /dev/shm/pymap ;;
  cpus)
    # what the host's "cores" are (threads per core), and how one pymap process scales over them
    lscpu | grep -E "^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|CPU\(s\)|NUMA node\(s\))" | tee "$OUT/cpus.txt"
    ecoli_reads
    python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    TIMEFORMAT="%R"
    for t in ${THREADS:-16 1 2 4 8 16}; do
      s=$( { time CUDA_VISIBLE_DEVICES= python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq -t $t \
        --no-progress -o /tmp/map/t.sam 2>/tmp/map/t.err ; } 2>&1 | tail -1 )
      echo "threads $t: $s s; $(grep -o '[0-9.]* s (seed.*' /tmp/map/t.err | head -1)" | tee -a "$OUT/cpus.txt"
    done ;;
  ceiling)
    # the host's own ceiling for N independent single-threaded processes: one pymap -t 1 on 1/16 of
    # the reads alone, then N of them at once, each on its own 1/16 (same work each): T1 / TN
    ecoli_reads && mkdir -p /tmp/map/parts
    python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    n=$(( $(wc -l < /tmp/map/r150.fq) / 64 * 4 ))
    split -l $n -d -a 2 /tmp/map/r150.fq /tmp/map/parts/p
    one() { CUDA_VISIBLE_DEVICES= python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa /tmp/map/parts/p$1 -t 1 --no-progress \
      -o /tmp/map/parts/o$1.sam 2>/dev/null; }
    one 00
    for N in 1 8 16; do
      t0=$(date +%s.%N)
      for i in $(seq 0 $((N - 1))); do one $(printf %02d $i) & done; wait
      echo "processes $N: $(python3 -c "import time; print(round(time.time() - $t0, 2))") s (each maps $((n / 4)) reads)" | tee -a "$OUT/ceiling.txt"
    done ;;
  limits)
    # what a GPU run of the default layout (--processes auto) leaves idle: the busy CPUs (cpu_busy.py) and the
    # GPU's utilisation (nvidia-smi, every 100 ms) over a plain run; then py-spy attached to each worker, not
    # pausing it, LIMITS_AFTER s (3) into a run for LIMITS_FOR s (3): --gil (how much of the time each worker
    # holds Python's lock) and --idle (where its batch threads' time goes, waits included).
    # MAP_READS=2000000 (LIMITS_COPIES=10 copies: the 20 M reads of BENCHMARKS.md) on /dev/shm
    ecoli_reads && unpack_pyspy
    python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    W=/dev/shm/pymap; mkdir -p $W
    touch_memory
    for k in $(seq ${LIMITS_COPIES:-10}); do cat /tmp/map/r150.fq; done > $W/lim.fq
    A="python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa --no-progress -t $(nproc) --device gpu"
    $A /tmp/map/r150.fq --processes 2 -o $W/lim.sam > /dev/null 2>&1          # the kernels loaded once
    rm -f $W/lim.sam
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 > /tmp/map/util.txt &
    smi=$!
    python3 scripts/gpu/cpu_busy.py -- $A $W/lim.fq -o $W/lim.sam > "$OUT/limits_busy.md" 2> /tmp/map/lim.log
    kill $smi
    { head -1 "$OUT/limits_busy.md"
      awk '{n++; s+=$1; if ($1>0) {b++; t+=$1}} END {printf "GPU utilisation (nvidia-smi, 100 ms): mean %.1f %%, over samples with a kernel %.1f %%\n", s/n, t/b}' /tmp/map/util.txt
      tail -1 /tmp/map/lim.log; } | tee "$OUT/limits.md"
    for mode in gil idle; do
      rm -f $W/lim.sam
      $A $W/lim.fq -o $W/lim.sam 2> /tmp/map/lim.log &
      sleep ${LIMITS_AFTER:-3}
      server=$(pgrep -o -f "forkserver import main")          # the workers' parent (see spyworkers)
      for w in $(pgrep -P "$server"); do
        /tmp/py-spy record --pid $w --$mode --threads --nonblocking -r 100 -d ${LIMITS_FOR:-3} -f raw \
          -o /tmp/map/lim_${mode}_$w.txt > /dev/null 2>&1 &
      done
      wait
      for f in /tmp/map/lim_${mode}_*.txt; do
        awk -v f="${f##*/}" -v s=${LIMITS_FOR:-3} -v m=$mode '{n+=$NF} END {printf "%s: %d samples in %d s at 100 Hz: %.2f %s\n",
          f, n, s, n/(100*s), m == "gil" ? "of the time holding Python'"'"'s lock" : "threads on average"}' "$f"
      done | tee -a "$OUT/limits.md"
      cat /tmp/map/lim_${mode}_*.txt > /tmp/map/lim_$mode.txt
      python3 scripts/spy_summary.py /tmp/map/lim_$mode.txt --top 50 --under map_chunk > "$OUT/limits_$mode.md"
      gzip -c /tmp/map/lim_$mode.txt > "$OUT/limits_$mode.txt.gz"
    done
    rm -f $W/lim.fq $W/lim.sam /tmp/map/lim_* ;;
  filewrites)
    # how fast P processes write one file on this host's tmpfs: pwrite, a file each, mapped stretches allocated
    # or not (scripts/bench_file_writes.py; pymap's workers write mapped, allocated stretches); memory touched first
    touch_memory
    python3 scripts/bench_file_writes.py --dir /dev/shm --procs ${WRITE_PROCS:-1 2 4 8} --mib 1024 | tee "$OUT/filewrites.md" ;;
  hostceiling)
    # the host's ceiling without start-up: N single-threaded processes timed together once warm, on a
    # compute loop, random DRAM reads and pymap -t 1 mapping 1/16 of the reads (scripts/bench_host_ceiling.py)
    ecoli_reads && python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    lscpu | grep -E "^(CPU\(s\)|Thread|Core|Socket|Model name|CPU max MHz|L3)" | tee "$OUT/lscpu.txt"
    head -n $(( $(wc -l < /tmp/map/r150.fq) / 64 * 4 )) /tmp/map/r150.fq > /tmp/map/part.fq
    # (CEILING_WORK: which work, default all three; CEILING_FLAGS: more flags, e.g. --batch-size 5000)
    CUDA_VISIBLE_DEVICES= python3 scripts/bench_host_ceiling.py --procs ${CEILING_PROCS:-1,4,8,16} \
      --work ${CEILING_WORK:-compute,memory,pymap} ${CEILING_FLAGS:-} \
      --ref /tmp/map/ecoli_MG1655.fa --reads /tmp/map/part.fq | tee -a "$OUT/hostceiling.md" ;;
  dask)
    mkdir -p /tmp/map && cp .gpu/ecoli_MG1655.fa.gz /tmp/map/ && gunzip -f /tmp/map/ecoli_MG1655.fa.gz
    python3 scripts/numpy_reads.py /tmp/map/ecoli_MG1655.fa -n ${MAP_READS:-1000000} -L 150 --seed 3 -o /tmp/map/r150.fq
    # CPU scaling: no GPU filter (16 processes on one GPU would measure the GPU's sharing instead)
    CUDA_VISIBLE_DEVICES= python3 scripts/bench_output.py --ref /tmp/map/ecoli_MG1655.fa --reads /tmp/map/r150.fq --only dask \
      -t "$(nproc)" --workers ${DASK_WORKERS:-1,2,4,8,16} --repeats 1 --batch-size 20000 --workdir /tmp/map/dask \
      --md "$OUT/dask.md" --json "$OUT/dask.json" 2> "$OUT/dask.log"; cat "$OUT/dask.md"
    grep -h "note: dask" /tmp/map/dask/dask_local*.log | tee -a "$OUT/dask.md" ;;
  abpipe)
    # warm-pipeline A/B of pymap trees on MAP_READS reads (scripts/gpu/abpipe.sh): TREES="before=.gpu/prev.tar.gz
    # after=." (a tree or a .tar.gz of `git archive REV mapper filters kernels`), ROUNDS, DEVICES; WHOLE=1 for
    # whole processes; AB_READS (default the MAP_READS reads) and MATES for other reads
    ecoli_reads && python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    SITE=/tmp/site REF=/tmp/map/ecoli_MG1655.fa READS=${AB_READS:-/tmp/map/r150.fq} bash scripts/gpu/abpipe.sh 2>&1 \
      | grep -v -i warn | tee -a "$OUT/abpipe.txt" ;;
  daskab)
    # Dask settings A/B: `--dask local:DASK_N` (default 16) on MAP_READS reads, whole runs alternated
    # without and with the environment AB_ENV (e.g. "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL=1s"), AB_RUNS each
    ecoli_reads && python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    for i in $(seq ${AB_RUNS:-3}); do
      for ab in A B; do
        envs=""; [ $ab = B ] && envs="$AB_ENV"
        t0=$(date +%s.%N)
        env $envs CUDA_VISIBLE_DEVICES= python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq \
          --dask local:${DASK_N:-16} --no-progress -o /tmp/map/ab.sam 2> /tmp/map/ab.err
        echo "$ab $(python3 -c "import time; print(round(time.time() - $t0, 2))") s: $(grep -o 'first chunk back.*' /tmp/map/ab.err | sed 's/ (chunks.*//')" | tee -a "$OUT/daskab.txt"
      done
    done ;;
  daskprof)
    ecoli_reads
    python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    TIMEFORMAT="%R s wall, %U s user"
    for i in 1 2; do { time python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq -t "$(nproc)" \
      --no-progress -o /tmp/map/t.sam ; } 2>&1 | tail -2; done
    for spec in ${DASK_WORKERS:-local:16 local:4}; do
      python3 scripts/profile_dask.py /tmp/map/ecoli_MG1655.fa /tmp/map/r150.fq $spec /tmp/map/d.sam 2>&1 \
        | grep -v -i warn | head -45 | tee "$OUT/prof_${spec/:/_}.txt"
    done ;;
  output)
    # BAM and --sort costs at -t 2 (samtools sort from pysam: the machine has no samtools)
    ecoli_reads
    CUDA_VISIBLE_DEVICES= python3 scripts/bench_output.py --ref /tmp/map/ecoli_MG1655.fa --reads /tmp/map/r150.fq --only all -t 2 \
      --repeats 1 --samtools pysam --workdir /tmp/map/output --md "$OUT/output.md" --json "$OUT/output.json" \
      2> "$OUT/output.log"; cat "$OUT/output.md" ;;
  nsys)
    # Nsight Systems around the default `pymap align --device gpu -t nproc` (worker processes) on MAP_READS
    # reads x REPEAT_SETS (default 10) on /dev/shm: the run alone under scripts/gpu/cpu_busy.py (how many
    # CPUs it keeps busy), a CUDA trace (kernels, copies, CUDA calls) and a trace of the CPUs sampled
    # (500 Hz a CPU; the CUDA trace did not start in the workers when both were asked of one run), each
    # exported to SQLite and summed up by scripts/gpu/nsys_summary.py. The machines' nsys is the one
    # bundled with Nsight Compute; its importer needs libdw and libelf, which the image lacks:
    # .gpu/nsyslibs holds Debian's (apt-get download libdw1 libelf1, dpkg-deb -x each, copy their
    # usr/lib/x86_64-linux-gnu/* there).
    ecoli_reads && python3 -m pymap.cli index /tmp/map/ecoli_MG1655.fa 2>&1 | tail -1
    NSYS=$(ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys | tail -1)
    export LD_LIBRARY_PATH=$PWD/.gpu/nsyslibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    W=/dev/shm/pymap; mkdir -p $W && head -400000 /tmp/map/r150.fq > $W/warm.fq
    for k in $(seq ${REPEAT_SETS:-10}); do cat /tmp/map/r150.fq; done > $W/many.fq
    A="python3 -m pymap.cli align /tmp/map/ecoli_MG1655.fa --no-progress -t $(nproc) --device gpu"
    $A $W/warm.fq -o $W/warm.sam 2>/dev/null
    rm -f $W/nsys.sam; python3 scripts/gpu/cpu_busy.py -- $A $W/many.fq -o $W/nsys.sam > "$OUT/nsys_busy.md" 2>/dev/null
    head -1 "$OUT/nsys_busy.md"
    for trace in cuda cpus; do
      case $trace in
        cuda) flags="-t cuda --sample=none --cpuctxsw=none" ;;
        cpus) flags="-t none --sample=process-tree --cpuctxsw=none" ;;
      esac
      rm -f $W/nsys.sam
      $NSYS profile $flags -f true -o /tmp/map/nsys_$trace $A $W/many.fq -o $W/nsys.sam > /tmp/map/nsys_$trace.log 2>&1
      $NSYS export -t sqlite -f true -o /tmp/map/nsys_$trace.sqlite /tmp/map/nsys_$trace.nsys-rep > /dev/null 2>&1
      python3 scripts/gpu/nsys_summary.py /tmp/map/nsys_$trace.sqlite ${NSYS_WINDOW:+--window $NSYS_WINDOW} \
        > "$OUT/nsys_$trace.md" 2>&1
      head -12 "$OUT/nsys_$trace.md"
      xz -T0 -6 -c /tmp/map/nsys_$trace.sqlite > "$OUT/nsys_$trace.sqlite.xz"
    done ;;
  esac
done
