#pragma once
// What the fused recurrent layer (fused_recurrence.cpp) and the fused decoders (fused_decoders.cpp)
// share besides the cells (recurrent_cells.h).
#include <vector>

#include "luong/models/fused_recurrence.h"
#include "luong/util/path_counts.h"

namespace luong::models::detail {

// Refuses lengths that are not [batch] or lie outside [0, steps].
void check_inputs(const torch::Tensor& lengths, int64_t batch, int64_t steps);
// Lengths as the kernels read them: int64 on the CPU, contiguous.
torch::Tensor to_lengths(const torch::Tensor& lengths);
torch::Tensor empty_lengths();
// w_ih, w_hh, b_ih, b_hh per layer (bottom first) or direction: the kernels take their cells as one list.
std::vector<torch::Tensor> flat_weights(const std::vector<CellWeights>& layers);

}  // namespace luong::models::detail
