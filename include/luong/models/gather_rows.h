#pragma once
// Rows of a table gathered by index, with a backward that adds each row's gradient back in one
// serial pass: the CPU's embedding lookups and the loss's selection of real tokens. LibTorch's CPU
// embedding backward and index_add_ cost 0.26-0.48 ms a call at the notebook's sizes (a tensor
// operation per row), 7-9% of a training step.
#include <torch/torch.h>

#include <cstdint>
#include <optional>

namespace luong::models {

/// table [V, D], rows [N] int64 -> [N, D] = table[rows]. `skip`: a row index whose gradient is not
/// taken (nn.Embedding's padding_idx). On a dense float or double CPU table, one autograd node
/// (GatherRowsFunction); elsewhere LibTorch's embedding (with skip) or index_select.
torch::Tensor gather_rows(const torch::Tensor& table, const torch::Tensor& rows, std::optional<int64_t> skip = {});

}  // namespace luong::models
