#pragma once
// The matrix products of the fused CPU kernels: in the operands' own dtype, or under bf16 precision
// (models/precision.h) with bf16 operands. LibTorch runs bf16 products through oneDNN, which
// accumulates in float32; the kernels take each result back to float32 for the gate, softmax and
// loss arithmetic, which never leaves float32.
#include <torch/torch.h>

#include "luong/models/precision.h"

namespace luong::models {

struct MatrixProducts {
  bool bf16 = false;

  /// A weight as the products take it, converted once per kernel call rather than once per step.
  torch::Tensor operand(const torch::Tensor& weight) const { return bf16 ? to_bf16(weight) : weight; }

  /// a b, in float32 under bf16.
  torch::Tensor mm(const torch::Tensor& a, const torch::Tensor& b) const {
    return bf16 ? to_bf16(a).mm(to_bf16(b)).to(torch::kFloat) : a.mm(b);
  }
  /// bias + a b (bias broadcast over the rows, or a matrix of a's shape).
  torch::Tensor addmm(const torch::Tensor& bias, const torch::Tensor& a, const torch::Tensor& b) const {
    return bf16 ? torch::add(bias, to_bf16(a).mm(to_bf16(b))) : torch::addmm(bias, a, b);
  }
  void addmm_out(torch::Tensor& out, const torch::Tensor& bias, const torch::Tensor& a, const torch::Tensor& b) const {
    if (bf16) {
      torch::add_out(out, bias, to_bf16(a).mm(to_bf16(b)));
    } else {
      torch::addmm_out(out, bias, a, b);
    }
  }
  void mm_out(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b) const {
    if (bf16) {
      out.copy_(to_bf16(a).mm(to_bf16(b)));
    } else {
      torch::mm_out(out, a, b);
    }
  }
  /// out += a b
  void add_mm_(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b) const {
    if (bf16) {
      out.add_(to_bf16(a).mm(to_bf16(b)));
    } else {
      out.addmm_(a, b);
    }
  }

 private:
  static torch::Tensor to_bf16(const torch::Tensor& t) {
    return t.scalar_type() == torch::kBFloat16 ? t : t.to(torch::kBFloat16);
  }
};

/// How a fused kernel is called: its products in bf16 under bf16 precision for a float32 model, and
/// then its inputs in float32 whatever dtype autocast gave the module ops before it. The kernel runs
/// with autocast off for the call's scope: its products are explicit (MatrixProducts), and the ops
/// around them must stay in float32.
struct FusedKernelCall {
  bool bf16 = false;
  c10::impl::ExcludeDispatchKeyGuard no_autocast{c10::DispatchKey::AutocastCPU};

  /// `weight`: one of the kernel's parameters (its dtype and device are the model's).
  explicit FusedKernelCall(const torch::Tensor& weight)
      : bf16(weight.scalar_type() == torch::kFloat && bf16_products(weight.device())) {}
  torch::Tensor input(const torch::Tensor& t) const {
    return bf16 && t.defined() && t.scalar_type() == torch::kBFloat16 ? t.to(torch::kFloat) : t;
  }
};

}  // namespace luong::models
