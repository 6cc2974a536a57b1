#pragma once
// How many times each fast path has run in this process. Product code only counts; the tests read
// the counts to show that the path they compare with its reference was the one taken. Relaxed
// atomics: a count is exact once the work that made it has been joined.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace luong::path_counts {

enum class Path : int {
  kFusedRecurrentRows,        ///< rows the fused recurrences' and decoders' time loops computed
  kOneDnnFloat32Products,     ///< float32 products oneDNN ran (MatrixProducts, --float32-products)
  kPanelProducts,             ///< products luong's panel kernels ran
  kProductsDealt,             ///< products MatrixProducts::mm_each dealt to the threads
  kBf16LibraryProducts,       ///< bf16 products left to the libraries
  kStepTeamProducts,          ///< per-step products a step team shared
  kDeferredWeightGradients,   ///< the fused loss's weight gradients left to side threads
  kGradientChunksSideBySide,  ///< gradient-norm chunks summed four arrays side by side
  kSideTasks,                 ///< tasks the side threads ran (util/side_tasks.h)
  kCount
};

namespace detail {
inline std::array<std::atomic<std::int64_t>, static_cast<std::size_t>(Path::kCount)> counts{};
}

inline void add(Path path, std::int64_t n = 1) noexcept {
  detail::counts[static_cast<std::size_t>(path)].fetch_add(n, std::memory_order_relaxed);
}

inline std::int64_t read(Path path) noexcept {
  return detail::counts[static_cast<std::size_t>(path)].load(std::memory_order_relaxed);
}

}  // namespace luong::path_counts
