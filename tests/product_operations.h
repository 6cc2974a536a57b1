#pragma once
// MatrixProducts' in-place operations, for the tests that hold one way of multiplying against another.
#include <torch/torch.h>

#include <vector>

#include "luong/models/matrix_products.h"

namespace luong::test {

/// With b (a tensor or a PanelOperand) and a [M, K], into columns [16, 16 + N) of a [M, N + 32] buffer
/// of zeros: the whole buffer after addmm_out from `bias` [N], after addmm_out from `start` [M, N] (the
/// decoder's embedding gates start its input gates so), after mm_out; and start + a b by add_mm_.
template <typename Operand>
std::vector<torch::Tensor> in_place_operations(const models::MatrixProducts& products, const torch::Tensor& a,
                                               const Operand& b, const torch::Tensor& bias,
                                               const torch::Tensor& start) {
  std::vector<torch::Tensor> out;
  torch::Tensor wide = torch::zeros({start.size(0), start.size(1) + 32});
  torch::Tensor block = wide.narrow(1, 16, start.size(1));  // rows of unit column stride
  products.addmm_out(block, bias, a, b);
  out.push_back(wide.clone());
  products.addmm_out(block, start, a, b);
  out.push_back(wide.clone());
  products.mm_out(block, a, b);
  out.push_back(wide.clone());
  torch::Tensor sum = start.clone();
  products.add_mm_(sum, a, b);
  out.push_back(sum);
  return out;
}

}  // namespace luong::test
