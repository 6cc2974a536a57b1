#pragma once
// Rows of a table gathered by index: every embedding lookup and the loss's selection of real tokens.
// On the CPU a backward that adds each row's gradient back in one serial pass: LibTorch's CPU
// embedding backward and index_add_ run a tensor operation per row (docs/PERFORMANCE.md).
#include <torch/torch.h>

#include <cstdint>
#include <optional>

namespace luong::models {

/// table [V, D], rows [N] int64 -> [N, D] = table[rows]. `skip`: a row index whose gradient is not
/// taken (nn.Embedding's padding_idx). On a dense float or double CPU table, one autograd node
/// (GatherRowsFunction); on a GPU index_select (with skip, masked; LibTorch's embedding under
/// deterministic algorithms), whose backward never reads back to the host.
torch::Tensor gather_rows(const torch::Tensor& table, const torch::Tensor& rows, std::optional<int64_t> skip = {});

}  // namespace luong::models
