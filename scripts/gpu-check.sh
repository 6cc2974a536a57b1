#!/usr/bin/env bash
# The GPU check, one call on the lent GPU machine (16 cores, CUDA toolkit, cmake, ninja, and a
# python3 with torch 2.11 + CUDA 13.0; no network). It unpacks the Debian packages of .debs/
# (scripts/fetch-gpu-debs.sh, run beforehand where there is network) into a prefix, builds luong
# against that python3's LibTorch, runs the CUDA tests and a few of the CPU ones, then bench/gpu.sh.
# Logs go to $OUT (the device tool brings them back); the last lines are a summary.
#
#   scripts/gpu-check.sh            on the GPU machine (needs .debs/ and the corpus in .gpu-data/)
#   scripts/gpu-check.sh --dry-run  here: the same up to the first step that needs a GPU
#
# Budget: under 10 minutes (build ~3, tests ~2, benchmarks ~5), each phase under its own timeout.
set -uo pipefail
cd "$(dirname "$0")/.."
dry_run=0
[[ ${1:-} == --dry-run ]] && dry_run=1
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
prefix=${LUONG_PREFIX:-/tmp/luong-prefix}
build=${LUONG_GPU_BUILD:-build-gpu}
summary=()
say() { echo "gpu-check: $*" | tee -a "$OUT/summary.txt"; }
phase() {  # phase NAME SECONDS COMMAND...: runs it with its log in $OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local status=$?
  summary+=("$name: exit $status in $((SECONDS - start)) s")
  say "$name: exit $status in $((SECONDS - start)) s"
  return $status
}

: >"$OUT/summary.txt"
say "start $(date -u +%FT%TZ), dry run $dry_run"
{
  nvidia-smi || echo "no nvidia-smi"
  python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda, "devices", torch.cuda.device_count())'
  nproc
  gcc --version | head -1
  cmake --version | head -1
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

# ---- the Debian packages, unpacked into a prefix ------------------------------------------------
if ! ls .debs/*.deb >/dev/null 2>&1; then
  say "no .debs/: run scripts/fetch-gpu-debs.sh first"
  exit 2
fi
mkdir -p "$prefix"
for deb in .debs/*.deb; do dpkg -x "$deb" "$prefix"; done
libs="$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# pkg-config would find only the system's modules: the build searches the prefix by name instead.
export PKG_CONFIG_LIBDIR=/nonexistent
cat >"$prefix/fonts.conf" <<CONF
<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir>$prefix/usr/share/fonts</dir><cachedir>/tmp/luong-fontconfig</cachedir></fontconfig>
CONF
export FONTCONFIG_FILE="$prefix/fonts.conf"
say "unpacked $(ls .debs/*.deb | wc -l) packages into $prefix"

# ---- build ----------------------------------------------------------------------------------------
python=$(command -v python3)
[[ -x .venv/bin/python && $dry_run == 1 ]] && python=$PWD/.venv/bin/python
phase configure 240 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLUONG_PYTHON="$python" \
  -DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$libs" -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$libs" \
  -DCMAKE_MODULE_LINKER_FLAGS="-Wl,-rpath-link,$libs" || { tail -30 "$OUT/configure.log"; exit 1; }
phase build 400 cmake --build "$build" -j"$(nproc)" --target luong luong_tests || { tail -40 "$OUT/build.log"; exit 1; }
"$build/luong" --version | tee "$OUT/version.txt"

# ---- tests: every CUDA test, and the CPU tests the GPU build could break ------------------------
phase cuda-tests 150 ctest --test-dir "$build" --output-on-failure -j4 -R 'Cuda|FusedRecurrence|StateDict|Layers|LinkTest|RemoveTree'
grep -E "tests passed|Skipped|Failed|Passed" "$OUT/cuda-tests.log" | tail -8
if ((dry_run)); then
  grep -c "no CUDA device is visible" "$OUT/cuda-tests.log" | xargs -I{} say "dry run: {} CUDA tests skipped with their reason"
  say "dry run ends before the first step that needs a GPU (bench/gpu.sh)"
  exit 0
fi

# ---- benchmarks -----------------------------------------------------------------------------------
phase bench 360 bench/gpu.sh "$build/luong"
tail -20 "$OUT/bench.log"
say "end $(date -u +%FT%TZ)"
printf '%s\n' "${summary[@]}"
