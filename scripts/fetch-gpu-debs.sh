#!/usr/bin/env bash
# Downloads into .debs/ (git-ignored) the Debian 12 packages that scripts/gpu-check.sh unpacks on the
# GPU machine, which has no network: the headers and CMake files the build needs beyond CUDA, cmake,
# ninja and python3's torch, and the shared libraries luong loads at run time (the closure of
# sentencepiece, cairo and pango, without libc and libstdc++, which that machine has in newer
# versions). About 12 MB; run it once before the device call.
set -euo pipefail
cd "$(dirname "$0")/.."
development=(
  libsentencepiece-dev libcxxopts-dev libgtest-dev libgloo-dev nlohmann-json3-dev
  libcairo2-dev libpango1.0-dev libglib2.0-dev libharfbuzz-dev
)
runtime=(
  libsentencepiece0 libcairo2 libpango-1.0-0 libpangocairo-1.0-0 libpangoft2-1.0-0 libglib2.0-0 libharfbuzz0b
  libfontconfig1 fontconfig-config libfreetype6 libfribidi0 libthai0 libdatrie1 libgraphite2-3 libpixman-1-0
  libpng16-16 libbrotli1 libexpat1 libffi8 libpcre2-8-0 libmount1 libblkid1 libselinux1 libbsd0 libmd0
  libx11-6 libx11-data libxau6 libxcb1 libxcb-render0 libxcb-shm0 libxdmcp6 libxext6 libxrender1
  fonts-dejavu-core
)
mkdir -p .debs
cd .debs
rm -f ./*.deb
apt-get download "${development[@]}" "${runtime[@]}" >/dev/null
echo "fetch-gpu-debs: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1) in .debs/"
