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
/// Float rows use vector_expf_below_88 (vector_expf's bits, <= 2 ulp from std::exp) and sum in float;
/// double rows vector_exp.
void exponentiate_rows(float* x, int64_t rows, int64_t cols, int64_t stride, float* maxima, float* sums,
                       int64_t* argmax);
void exponentiate_rows(double* x, int64_t rows, int64_t cols, int64_t stride, double* maxima, double* sums,
                       int64_t* argmax);

/// The same maxima, and log(sum) of each row's exponentials, leaving x unchanged: log-softmax is then
/// (x - maximum) - log_sum, as LibTorch computes it (beam search's selection, which reads x once more).
void log_sum_exponentials(const float* x, int64_t rows, int64_t cols, int64_t stride, float* maxima, float* log_sums);
void log_sum_exponentials(const double* x, int64_t rows, int64_t cols, int64_t stride, double* maxima,
                          double* log_sums);

/// The softmax cross-entropy's gradient, formed in place from the exponentials that exponentiate_rows
/// left in x [rows, cols] (row stride `stride`): row r scaled by row_scales[r] (to probabilities), less
/// `offset` (label smoothing's eps / V), less target_weight at column target_columns[r] (none where it
/// is negative); and the bias's gradient alongside, column_sums[c] += row_weights[r] x[r][c] over the
/// rows, in the same pass over x (a separate gemv over the logits runs at memory speed).
void softmax_gradient_rows(float* x, int64_t rows, int64_t cols, int64_t stride, const float* row_scales, float offset,
                           const int64_t* target_columns, float target_weight, const float* row_weights,
                           float* column_sums);
void softmax_gradient_rows(double* x, int64_t rows, int64_t cols, int64_t stride, const double* row_scales,
                           double offset, const int64_t* target_columns, double target_weight,
                           const double* row_weights, double* column_sums);

}  // namespace luong::models
