#!/usr/bin/env bash
# Installs luong's build and test dependencies from Debian 12 packages. Idempotent: packages already
# present are left alone, and apt's lists are refreshed only when something must be installed.
set -euo pipefail

packages=(
  build-essential cmake g++ ccache pkg-config git
  libtorch-dev libgloo-dev            # LibTorch 1.13 (CPU) and its c10d transport
  libopenblas0                        # without it, LibTorch's matmuls use the slow reference BLAS
  libsentencepiece-dev                # subword tokenizer (C++ trainer and processor)
  libcxxopts-dev libgtest-dev zlib1g-dev bc
  clang libclang-rt-14-dev            # libFuzzer targets (scripts/fuzz.sh)
  python3-torch python3-numpy python3-matplotlib   # the Python references, parity fixtures, benchmarks
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
