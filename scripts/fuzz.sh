#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for SECONDS (default 60) on a
# scratch copy of its committed seed corpus, in parallel JOBS at a time (default: the cores).
# Prints executions, speed and findings per target; exits non-zero on any crash, leak, timeout or
# out-of-memory. Crash inputs are kept in build-fuzz/findings/.
#
#   scripts/fuzz.sh [SECONDS=60] [TARGETS...]
#   (targets: tsv opus word_tokenizer vocabulary state_dict trainer_state optimizer_state)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(tsv opus word_tokenizer vocabulary state_dict trainer_state optimizer_state)
build=${FUZZ_BUILD_DIR:-build-fuzz}

cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DLUONG_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" > "$build.build.log" 2>&1 || { tail -50 "$build.build.log"; exit 1; }

mkdir -p "$build/findings"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for target in "${targets[@]}"; do
  mkdir -p "$work/$target"
  set +e
  OMP_NUM_THREADS=1 "$build/fuzz/${target}_fuzz" "$work/$target" "fuzz/corpus/$target" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/findings/${target}-" \
    > "$work/$target.log" 2>&1
  code=$?
  set -e
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$work/$target.log")
  speed=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$work/$target.log")
  cov=$(grep -oE 'cov: [0-9]+' "$work/$target.log" | tail -1)
  if ((code == 0)); then
    printf '%-15s %10s runs in %ss (%s/s), %s, 0 crashes, 0 leaks, 0 timeouts\n' "$target" "${runs:-?}" "$seconds" "${speed:-?}" "${cov:-cov: ?}"
  else
    status=1
    printf '%-15s FAILED (exit %d) after %s runs:\n' "$target" "$code" "${runs:-?}"
    grep -E 'ERROR|invariant|SUMMARY|Test unit written|==[0-9]+==' "$work/$target.log" | head -20
  fi
done
exit $status
