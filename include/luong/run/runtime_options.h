#pragma once
// Where and how a command runs: the device, the thread pools, determinism and the CPU kernels' switches.
// Every command that runs a model takes these flags; training records them in config.json (--resume
// may change them).
#include <cstdint>
#include <string>

#include "luong/models/matrix_products.h"
#include "luong/util/options.h"

// X(type, name, default, flag, group, help, range, on_resume): see luong/util/options.h.
#define LUONG_RUNTIME_OPTIONS(X)                                                                               \
  X(std::string, device, "cpu", "device", "runtime", "cpu or cuda[:N]", ::luong::options::kAnyValue, kMayChange) \
  X(std::int64_t, threads, 0, "threads",                                                                         \
    "runtime", "LibTorch intra-op threads (0 = the cores this process may use; any BLAS's own pool gets 1)",     \
    ::luong::options::closed(0, 1024), kMayChange)                                                                \
  X(bool, deterministic, false, "deterministic", "runtime",                                                     \
    "repeatable GPU runs: deterministic cuDNN and cuBLAS algorithms (slower)", ::luong::options::kAnyValue,      \
    kMayChange)                                                                                                   \
  X(::luong::models::Float32Products, float32_products, ::luong::models::Float32Products::kAuto,                  \
    "float32-products", "runtime",                                                                              \
    "the fused kernels' float32 library products: auto (oneDNN for the large ones on AMD processors with "      \
    "AVX-512, else MKL), mkl, or onednn (where LibTorch's oneDNN product runs)",                                \
    ::luong::options::kAnyValue, kMayChange)                                                                    \
  X(::luong::models::PanelProducts, panel_products, ::luong::models::PanelProducts::kOn, "panel-products",        \
    "runtime", "the per-step products in luong's own panel kernels: on, off (the libraries'), or no-amx (bf16 "  \
    "panels by AVX512-BF16 rather than AMX tiles)", ::luong::options::kAnyValue, kMayChange)                    \
  X(bool, step_teams, true, "!no-step-teams", "runtime",                                                        \
    "under bf16 on AMX, the decoder's two row blocks make each step's products together (off: each alone)",      \
    ::luong::options::kAnyValue, kMayChange)

namespace luong::run {

struct RuntimeOptions {
  LUONG_OPTIONS_STRUCT_BODY(LUONG_RUNTIME_OPTIONS)
};

}  // namespace luong::run
