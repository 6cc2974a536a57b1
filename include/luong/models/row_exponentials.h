#pragma once
// The softmax's exponentials over rows of vocabulary logits, as one pass per row where LibTorch
// takes four ops (max, sub, exp, sum) and its max over a dimension alone costs more than the
// exponentials (it tracks indices without vectorising). Raw pointers, no LibTorch: the loops are
// compiled for AVX-512, AVX2 + FMA and baseline x86-64 and chosen at load time.
#include <cstdint>

namespace luong::models {

/// x [rows, cols] with row stride `stride`: each row's maximum into maxima[r], the row replaced by
/// exp(x - maximum), and that row's sum into sums[r] (so log-softmax = x - maximum - log sum). When
/// `argmax` is not null, argmax[r] is the first column holding the maximum (as torch::max's index).
/// Float rows use vector_expf (<= 1 ulp from std::exp) and sum in float; double rows vector_exp.
void exponentiate_rows(float* x, int64_t rows, int64_t cols, int64_t stride, float* maxima, float* sums,
                       int64_t* argmax);
void exponentiate_rows(double* x, int64_t rows, int64_t cols, int64_t stride, double* maxima, double* sums,
                       int64_t* argmax);

}  // namespace luong::models
