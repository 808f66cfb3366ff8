#!/usr/bin/env bash
# Builds the libFuzzer targets (cmake --preset fuzz: clang, ASan, UBSan) and runs each
# tests/fuzz/*_fuzz for SECONDS (default 60), printing executions and crashes per target.
# Usage: tests/fuzz/run_fuzz.sh [SECONDS] [TARGET...]   Exit status 1 when any target crashed.
set -euo pipefail
seconds=${1:-60}
shift || true
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in tests/fuzz/*_fuzz.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi

cmake --preset fuzz >/dev/null
cmake --build build/fuzz -j"$(nproc)" --target "${targets[@]}"

status=0
for name in "${targets[@]}"; do
  bin=$(find build/fuzz -name "$name" -type f -perm -u+x | head -n1)
  corpus="tests/fuzz/corpus-$name"  # git-ignored; grows across runs
  seeds="tests/fuzz/seeds/$name"
  artifacts="build/fuzz/artifacts-$name/"
  log="build/fuzz/$name.log"
  mkdir -p "$corpus" "$artifacts"
  dirs=("$corpus")
  [ -d "$seeds" ] && dirs+=("$seeds")
  # UBSan findings must stop the run and count as crashes, not scroll by.
  if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$bin" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$artifacts" \
       -rss_limit_mb=4096 "${dirs[@]}" >"$log" 2>&1; then
    crashes=$(grep -c "runtime error" "$log" || true)
    [ "$crashes" -gt 0 ] && status=1
  else
    crashes=$(ls "$artifacts" | wc -l)
    [ "$crashes" -eq 0 ] && crashes=1
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  echo "$name: ${seconds}s, $execs executions, $crashes crashes (log: $log, artifacts: $artifacts)"
done
exit $status
