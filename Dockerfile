# luong in a container.
#
# CUDA (default): the official PyTorch devel image; LibTorch is the one inside its Python package
# (found through torch.utils.cmake_prefix_path), so the build uses CUDA and cuDNN.
#   docker build -t luong .
#   docker run --gpus all -v /path/to/shared:/shared luong
#
# CPU only, from Debian 12's packages (the same stack as CI):
#   docker build -t luong-cpu --build-arg BASE_IMAGE=debian:12 --build-arg TORCH=debian --build-arg DEVICE=cpu .
ARG BASE_IMAGE=pytorch/pytorch:2.4.1-cuda12.4-cudnn9-devel
FROM ${BASE_IMAGE}
ARG TORCH=python
# cuda for the PyTorch image; pass --build-arg DEVICE=cpu with TORCH=debian.
ARG DEVICE=cuda
ENV LUONG_DEVICE=${DEVICE}

ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake g++ make pkg-config zlib1g-dev \
      libsentencepiece-dev libcxxopts-dev libgtest-dev \
 && if [ "$TORCH" = debian ]; then \
      apt-get install -y --no-install-recommends libtorch-dev libgloo-dev libopenblas0 python3-torch python3-numpy; \
    fi \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/luong
COPY . .
RUN if [ "$TORCH" = debian ]; then prefix=""; \
    else prefix="-DCMAKE_PREFIX_PATH=$(python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"; fi \
 && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release $prefix \
 && cmake --build build -j"$(nproc)" \
 && cmake --install build --prefix /usr/local

# The README's headline experiment; mount the shared data at /shared (or pass --data).
WORKDIR /work
CMD luong train --config /opt/luong/experiments/dot-luong.json --data /shared/data/tatoeba-ara-eng/ara-eng.tsv \
    --device "$LUONG_DEVICE" --out /work/runs/dot-luong
