#!/usr/bin/env bash
# Builds the `fuzz` preset (clang, libFuzzer, ASan + UBSan) and runs every tests/fuzz/*_fuzz.cpp
# target for N seconds each (default 60), starting from the committed seeds in
# tests/fuzz/corpus/<name>/ (plus <name>.dict when present). Prints executions and crashes per
# target; exits non-zero when any target found a crash, timeout or OOM.
#   usage: tests/fuzz/run_fuzz.sh [seconds-per-target] [target-name ...]
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."

secs="${1:-60}"
shift || true
if [ $# -gt 0 ]; then
  names=("$@")
else
  names=()
  for src in tests/fuzz/*_fuzz.cpp; do names+=("$(basename "$src" .cpp)"); done
fi

[ -f build/fuzz/CMakeCache.txt ] || cmake --preset fuzz >/dev/null || exit 1
cmake --build build/fuzz -j "$(nproc)" --target "${names[@]}" >/dev/null || {
  echo "run_fuzz: build failed (cmake --build build/fuzz)" >&2; exit 1; }

artifacts=build/fuzz/artifacts
mkdir -p "$artifacts"
failed=0
printf '%-26s %8s %14s %8s %8s\n' target seconds executions exec/s crashes
for name in "${names[@]}"; do
  short="${name%_fuzz}"
  seeds="tests/fuzz/corpus/$short"
  work="tests/fuzz/corpus-$short"  # grows across runs; ignored by git
  mkdir -p "$work"
  args=(-max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048
        -artifact_prefix="$artifacts/$short-")
  [ -f "tests/fuzz/$short.dict" ] && args+=(-dict="tests/fuzz/$short.dict")
  log="$artifacts/$short.log"
  before=$(ls "$artifacts" | grep -c "^$short-" || true)
  "build/fuzz/tests/$name" "${args[@]}" "$work" $([ -d "$seeds" ] && echo "$seeds") >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{print $2}' | tail -1)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | awk '{print $2}' | tail -1)
  after=$(ls "$artifacts" | grep -c "^$short-" || true)
  crashes=$((after - before))
  [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes=1
  printf '%-26s %8s %14s %8s %8s\n' "$name" "$secs" "${execs:-?}" "${rate:-?}" "$crashes"
  if [ "$crashes" -ne 0 ]; then
    failed=1
    echo "  see $log and $artifacts/$short-*" >&2
  fi
done
exit "$failed"
