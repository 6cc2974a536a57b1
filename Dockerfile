# luong in a container: the same steps CI runs (scripts/install-deps.sh, then README's build), and the
# main job as the default command. One binary serves the CPU and the GPU (LibTorch from the PyPI
# torch wheel, CUDA 13.0); both images carry the CUDA 13 toolkit, which LibTorch's CMake files need
# to compile against it, as the development machines do.
#
# CUDA (default): NVIDIA's CUDA 13 devel image.
#   docker build -t luong .
#   docker run --gpus all -v /path/to/shared:/shared luong
#
# CPU: Debian 12 with NVIDIA's CUDA 13 toolkit (compile and link only).
#   docker build -t luong-cpu --build-arg BASE_IMAGE=debian:12 .
#   docker run -v /path/to/shared:/shared luong-cpu
ARG BASE_IMAGE=nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04
FROM ${BASE_IMAGE}

ENV DEBIAN_FRONTEND=noninteractive
# Debian 12 has no CUDA 13 toolkit of its own: NVIDIA's repository provides it (the CUDA image has it).
RUN if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then \
      apt-get update && apt-get install -y --no-install-recommends ca-certificates wget \
      && wget -q https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
      && dpkg -i cuda-keyring_1.1-1_all.deb && rm cuda-keyring_1.1-1_all.deb \
      && apt-get update && apt-get install -y --no-install-recommends cuda-toolkit-13-0 \
      && rm -rf /var/lib/apt/lists/*; \
    fi
ENV PATH=/usr/local/cuda/bin:${PATH}

WORKDIR /opt/luong
COPY . .
RUN apt-get update && apt-get install -y --no-install-recommends sudo \
 && ./scripts/install-deps.sh --without-fuzz \
 && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLUONG_BUILD_TESTS=OFF \
 && cmake --build build -j"$(nproc)" \
 && rm -rf /var/lib/apt/lists/*

# The main job (README's first command) on the mounted corpus; built-in data without it.
VOLUME /shared
RUN ln -s /shared ../shared
CMD ["./scripts/main-job.sh"]
