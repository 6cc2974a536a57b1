#!/usr/bin/env bash
# The GPU check, one call on the lent GPU machine (16 cores, CUDA toolkit, cmake, ninja, and a
# python3 with torch 2.11 + CUDA 13.0; no network). It unpacks the Debian packages of .debs/
# (scripts/fetch-gpu-debs.sh, run beforehand where there is network) into a prefix, builds luong
# against that python3's LibTorch, runs the CUDA tests and a few of the CPU ones, then bench/gpu.sh.
# Logs go to $OUT (the device tool brings them back); the last lines are a summary.
#
#   scripts/gpu-check.sh             on the GPU machine (needs .debs/ and the corpus in .gpu-data/)
#   scripts/gpu-check.sh --prebuilt  the same with the binaries built here (build/luong, its three
#                                    modules, build/tests/luong_tests and luong_crash_helper, carried
#                                    over), run against that machine's torch through .venv links:
#                                    saves the build's two minutes of device time; the machine's own
#                                    GCC 13 build then runs beside the tests and gets a smoke test
#   scripts/gpu-check.sh --dry-run   here: the same up to the first step that needs a GPU
#
# Budget: under 10 minutes (build ~3, tests ~2, benchmarks ~5), each phase under its own timeout.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
dry_run=0 prebuilt=0
for arg in "$@"; do
  case $arg in
    --dry-run) dry_run=1 ;;
    --prebuilt) prebuilt=1 ;;
    *) echo "gpu-check: unknown option $arg" >&2; exit 2 ;;
  esac
done
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
configure_and_build() {  # BUILD_DIR CXXFLAGS TARGET...: the machine's own compiler against python3's LibTorch
  local dir=$1 flags=$2
  shift 2
  phase configure 240 cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLUONG_PYTHON="$python" \
    -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$libs" -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$libs" \
    -DCMAKE_MODULE_LINKER_FLAGS="-Wl,-rpath-link,$libs" || { tail -30 "$OUT/configure.log"; return 1; }
  phase build 400 cmake --build "$dir" -j"$(nproc)" --target "$@" || { tail -40 "$OUT/build.log"; return 1; }
}
if ((prebuilt)); then
  # The binaries' RUNPATH names this checkout's .venv torch: point it at python3's.
  torch_dir=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  site=.venv/lib/python3.11/site-packages
  if [[ ! -e $site/torch/lib/libtorch.so ]]; then
    mkdir -p "$site"
    ln -sfn "$torch_dir" "$site/torch"
    ln -sfn "$(dirname "$torch_dir")/nvidia" "$site/nvidia"
  fi
  for binary in build/luong build/libluong_commands.so build/libluong_cuda.so build/tests/luong_tests build/tests/luong_crash_helper; do
    [[ -x $binary ]] || { say "--prebuilt: $binary was not carried"; exit 2; }
  done
  build=build
  if ((!dry_run)); then
    configure_and_build build-gcc -g luong >/dev/null 2>&1 &  # beside the tests; checked after them
    own_build=$!
  fi
else
  configure_and_build "$build" "" luong luong_tests || exit 1
fi
"$build/luong" --version | tee "$OUT/version.txt"

# ---- tests: every CUDA test, and the CPU tests the GPU build could break ------------------------
if ((prebuilt)); then  # the CPU tests of these binaries ran where they were built
  phase cuda-tests 200 "$build/tests/luong_tests" --gtest_filter='*Cuda*'
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran" "$OUT/cuda-tests.log" | tail -12
else
  phase cuda-tests 150 ctest --test-dir "$build" --output-on-failure -j4 \
    -R 'Cuda|FusedRecurrence|StateDict|Layers|LinkTest|RemoveTree|Padded'  
  grep -E "tests passed|Skipped|Failed|Passed" "$OUT/cuda-tests.log" | tail -8
fi
if ((dry_run)); then
  say "dry run: $(grep -c "no CUDA device is visible" "$OUT/cuda-tests.log") CUDA tests skipped with their reason"
  say "dry run ends before the first step that needs a GPU (bench/gpu.sh)"
  exit 0
fi

# ---- the machine's own build (--prebuilt): it must train on both devices ------------------------
if [[ -n ${own_build:-} ]]; then
  wait "$own_build"
  say "own GCC build: exit $? ($(gcc --version | head -1))"
  small=(train --data builtin:numbers --train-size 512 --dev-size 64 --test-size 64 --hidden 32 --embed 16 --batch 32
         --threads 4 --epochs 2)
  for device in cpu cuda; do
    if ! phase "own-build-$device" 90 build-gcc/luong "${small[@]}" --device "$device" --out "/tmp/own-$device"; then
      debugger=$(command -v gdb || command -v cuda-gdb)
      [[ -n $debugger ]] && timeout 120 "$debugger" -q -batch -ex "set pagination off" -ex run -ex bt -ex "info sharedlibrary" \
        --args build-gcc/luong "${small[@]}" --device "$device" --out "/tmp/own-$device-gdb" >"$OUT/own-build-$device.gdb.log" 2>&1
      grep -E "^#|signal" "$OUT/own-build-$device.gdb.log" | head -30
    fi
    tail -2 "$OUT/own-build-$device.log"
  done
fi

# ---- benchmarks -----------------------------------------------------------------------------------
phase bench 360 bench/gpu.sh "$build/luong"
tail -20 "$OUT/bench.log"
say "end $(date -u +%FT%TZ)"
printf '%s\n' "${summary[@]}"
