#!/usr/bin/env bash
# Warm-pipeline A/B of pymap trees: scripts/bench_gpu_pipeline.py on the same reads with each tree's
# pymap, the trees alternated for ROUNDS rounds, the records compared with the last tree's.
#
#   TREES="before=old.tar.gz after=." REF=ref.fa READS=reads.fq bash scripts/gpu/abpipe.sh
#
# TREES: space-separated NAME=PATH, PATH a source tree (mapper/, filters/, kernels/) or a .tar.gz of
# one (`git archive REV mapper filters kernels | gzip > old.tar.gz`). Each tree is laid out as the
# installed `pymap` package under /tmp/pkg_NAME and warmed once (its kernels compiled), all side by
# side. SITE: a directory put first on PYTHONPATH (session.sh's staged packages); ROUNDS (2), DEVICES
# (gpu), THREADS (all cores), BATCH (200000), FLAGS (more bench flags) as their names say.
# WHOLE=1: whole `pymap align` processes instead (start-up and exit included; MATES: read 2 for pairs;
# ALIGN_FLAGS: more align flags), each tree's wall seconds and its summary line.
set -uo pipefail
: "${TREES:?TREES=\"NAME=PATH ...\"}" "${REF:?}" "${READS:?}"
ROUNDS=${ROUNDS:-2}; DEVICES=${DEVICES:-gpu}; THREADS=${THREADS:-$(nproc)}; BATCH=${BATCH:-200000}
names=()
for spec in $TREES; do
  name=${spec%%=*}; path=${spec#*=}; names+=("$name")
  src=$path
  if [[ $path == *.tar.gz ]]; then
    src=/tmp/abtree_$name; rm -rf "$src" && mkdir -p "$src" && tar -xzf "$path" -C "$src"
  fi
  pkg=/tmp/pkg_$name
  rm -rf "$pkg" && mkdir -p "$pkg" && cp -r "$src/mapper" "$pkg/pymap" && cp -r "$src/filters" "$pkg/pymap/filters" \
    && cp -r "$src/kernels" "$pkg/pymap/kernels" && python3 -m compileall -q -j 0 "$pkg" >/dev/null
done
pp() { echo "${SITE:+$SITE:}/tmp/pkg_$1"; }
head -80000 "$READS" > /tmp/abpipe_warm.fq
for name in "${names[@]}"; do
  PYTHONPATH=$(pp "$name") python3 -m pymap.cli align "$REF" /tmp/abpipe_warm.fq --device "${DEVICES%%,*}" \
    -t "$THREADS" --no-progress -o "/tmp/abpipe_warm_$name.sam" 2>"/tmp/abpipe_warm_$name.log" &
done
wait
echo "warmed $(date +%T)"
for r in $(seq "$ROUNDS"); do
  for name in "${names[@]}"; do
    mkdir -p "/tmp/abpipe_$name"
    if [ -n "${WHOLE:-}" ]; then
      for dev in ${DEVICES//,/ }; do
        t0=$(date +%s.%N)
        PYTHONPATH=$(pp "$name") python3 -m pymap.cli align "$REF" "$READS" ${MATES:-} --device "$dev" -t "$THREADS" \
          ${ALIGN_FLAGS:-} --no-progress -o "/tmp/abpipe_$name/bench_$dev.sam" 2>"/tmp/abpipe_$name/whole.log"
        echo "$name r$r $dev: $(python3 -c "import time; print(f'{time.time() - $t0:.2f}')") s wall;" \
          "$(grep -o '[0-9.]* s (seed.*' "/tmp/abpipe_$name/whole.log" | head -1)" \
          "$(grep -o 'ready after.*' "/tmp/abpipe_$name/whole.log" | head -1)"
      done
      continue
    fi
    PYTHONPATH=$(pp "$name") python3 scripts/bench_gpu_pipeline.py "$REF" "$READS" -t "$THREADS" --batch-size "$BATCH" \
      --repeats 2 --devices "$DEVICES" --workdir "/tmp/abpipe_$name" ${FLAGS:-} 2>&1 \
      | grep -E "^\| (cpu|gpu)" | sed "s/^/$name r$r: /"
  done
done
last=${names[-1]}
for name in "${names[@]}"; do
  [ "$name" = "$last" ] && continue
  for f in /tmp/abpipe_"$name"/bench_*.sam; do
    g=/tmp/abpipe_$last/$(basename "$f")
    cmp -s <(grep -v '^@PG' "$f") <(grep -v '^@PG' "$g") && echo "records $name = $last ($(basename "$f"))" \
      || echo "records $name DIFFER from $last ($(basename "$f"))"
  done
done
