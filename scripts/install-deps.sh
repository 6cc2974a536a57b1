#!/usr/bin/env bash
# Installs luong's build and test dependencies: Debian 12 packages by name, and LibTorch as the PyPI
# `torch` wheel (2.11.0, CUDA 13.0: MKL and oneDNN on the CPU, cuDNN and NCCL on the GPU) in the
# project's own virtual environment .venv/, with every Python package pinned in
# scripts/requirements.txt. Idempotent: present packages are left alone, apt's lists are refreshed
# only when something must be installed, and pip runs only when the pins changed.
#
#   scripts/install-deps.sh [--without-fuzz]   (--without-fuzz: no clang, for images that only build)
set -euo pipefail
cd "$(dirname "$0")/.."
with_fuzz=1
[[ ${1:-} == --without-fuzz ]] && with_fuzz=0

packages=(
  build-essential cmake g++ ccache pkg-config git ninja-build
  python3 python3-venv                # the interpreter of .venv/
  libgloo-dev                         # headers that ProcessGroupGloo's header includes (c10d on the CPU)
  libsentencepiece-dev                # subword tokenizer (C++ trainer and processor)
  libcxxopts-dev libgtest-dev zlib1g-dev bc
  libopenblas0                        # a foreign BLAS, for the thread-pool test
  nlohmann-json3-dev                  # every JSON file
  libcairo2-dev libpango1.0-dev fonts-dejavu-core fonts-noto-core   # heat maps and curves, Arabic shaped
  libcpp-httplib-dev                  # luong serve's HTTP/1.1 server (and the tests' client)
  wrk                                 # bench/serve_load.sh's load generator
  iproute2                            # ss: the serve test reads the server's listen backlog
  python3-numpy python3-matplotlib    # the cloze seed keeps Debian's numpy (its curve was made with it)
)
((with_fuzz)) && packages+=(clang libclang-rt-dev)   # libFuzzer targets (scripts/fuzz.sh)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} Debian packages present"
else
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The virtual environment: Debian's python3, so that its ABI is the one the Debian packages use.
requirements=scripts/requirements.txt
stamp=.venv/.requirements
if [[ ! -x .venv/bin/python ]]; then
  /usr/bin/python3 -m venv .venv
fi
if ! cmp -s "$requirements" "$stamp"; then
  echo "install-deps: installing the pinned Python packages into .venv/ (torch with CUDA 13: a few GB)"
  .venv/bin/python -m pip install --quiet --no-input --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$stamp"
else
  echo "install-deps: .venv/ matches $requirements"
fi
.venv/bin/python -c 'import torch; print("install-deps: torch", torch.__version__, "CUDA", torch.version.cuda)'
