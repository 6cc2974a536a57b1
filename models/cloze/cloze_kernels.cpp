#include "luong/cloze/cloze_kernels.h"

#include "luong/util/target_clones.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "luong/cloze/glibc_exp.h"

namespace luong::cloze {

// ---- numpy's arithmetic ------------------------------------------------------------------------
// The training is chaotic: past update ~150 a last-bit difference grows until the run settles in
// another minimum (the seed ends at 3.5e-5; with other rounding, 0.013 or 0.033). So every kernel
// rounds exactly as the seed's numpy does on an x86-64 machine with FMA (Debian 12: numpy 1.24 on
// OpenBLAS 0.3.21, glibc's exp and log):
//  - a matrix product is OpenBLAS's dgemm (see gemm_impl), a separate array from what it is added to;
//  - a row sum is numpy's pairwise summation (pairwise_sum);
//  - exp and log are glibc's, as numpy's float64 loops call them without AVX-512 (exp inlined:
//    glibc_exp.h);
//  - elementwise expressions round after every operation: this file is compiled with
//    -ffp-contract=off, and the only fused multiply-adds are the explicit std::fma of the products.
// On a processor without FMA, std::fma is a (correct, slower) libm call.

// The bodies are always inlined into the cloned callers below, so that each clone compiles them for
// its instruction set; the public functions are thin wrappers.
#define LUONG_KERNEL [[gnu::always_inline]] inline
// flatten inlines every layer into each clone, so the whole sentence runs with AVX-512 or AVX2 + FMA
// where the processor has them, and with SSE2 elsewhere (util/target_clones.h).
#define LUONG_CLONES LUONG_X86_FLATTEN_CLONES

// Eight doubles as two 32-byte GCC vectors: one ymm each with AVX2, two xmm with SSE2. (A single
// 64-byte vector type is native only with AVX-512; elsewhere GCC lowers it through memory.)
constexpr int kBlock = 8;
typedef double Half __attribute__((vector_size(kBlock / 2 * sizeof(double))));
struct Block {
  Half lo, hi;
};

inline Half load_half(const double* p) {
  Half h;
  std::memcpy(&h, p, sizeof h);
  return h;
}
inline Block load_block(const double* p) { return {load_half(p), load_half(p + kBlock / 2)}; }
inline void store_half(double* p, const Half& h) { std::memcpy(p, &h, sizeof h); }
// x * b + c per lane with one rounding; GCC turns the lane loop into one vfmadd where FMA exists.
LUONG_KERNEL Half fma_half(double x, const Half& b, const Half& c) {
  Half r;
  for (int i = 0; i < kBlock / 2; ++i) r[i] = std::fma(x, b[i], c[i]);
  return r;
}
LUONG_KERNEL Block fma_block(double x, const Block& b, const Block& c) { return {fma_half(x, b.lo, c.lo), fma_half(x, b.hi, c.hi)}; }

template <class Value>
[[gnu::noinline]] double pairwise_sum_halves(const Value& value, int begin, int n);

/// numpy's pairwise summation of value(begin) ... value(begin + n - 1) (umath/loops_utils.h:
/// pairwise_sum): below 8 terms a plain loop from 0; up to 128, eight interleaved partial sums
/// combined as a tree, then the leftover terms; above, the two halves (split at a multiple of 8).
template <class Value>
LUONG_KERNEL double pairwise_sum(const Value& value, int begin, int n) {
  if (n < 8) {
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += value(begin + i);
    return sum;
  }
  if (n > 128) return pairwise_sum_halves(value, begin, n);
  double r[8];
  for (int j = 0; j < 8; ++j) r[j] = value(begin + j);
  int i = 8;
  for (; i < n - n % 8; i += 8) {
    for (int j = 0; j < 8; ++j) r[j] += value(begin + i + j);
  }
  double sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
  for (; i < n; ++i) sum += value(begin + i);
  return sum;
}

// Out of line: the recursion must not be inlined into itself (nor into the flattened callers).
template <class Value>
double pairwise_sum_halves(const Value& value, int begin, int n) {
  int half = n / 2;
  half -= half % 8;
  return pairwise_sum(value, begin, half) + pairwise_sum(value, begin + half, n - half);
}

/// An operand read one element at a time: element (r, c) is data[r * row_stride + c * col_stride],
/// so a transpose is a view, not a copy.
struct MatrixView {
  const double* data;
  int row_stride;
  int col_stride;
  double operator()(int r, int c) const { return data[r * row_stride + c * col_stride]; }
};
inline MatrixView rows_of(const double* data, int cols) { return {data, cols, 1}; }
inline MatrixView transpose_of(const double* data, int cols) { return {data, 1, cols}; }

enum class Store { kAssign, kAdd };

template <Store store>
LUONG_KERNEL void store_result(double* out, double product, double divisor) {
  if constexpr (store == Store::kAssign) {
    *out = product / divisor;
  } else {
    *out += product / divisor;
  }
}
template <Store store>
LUONG_KERNEL void store_half_result(double* out, const Half& product, double divisor) {
  if constexpr (store == Store::kAssign) {
    store_half(out, product / divisor);
  } else {
    store_half(out, load_half(out) + product / divisor);
  }
}

// One output as one multiply-add chain over k from 0: sum_kk a(i, kk) b[kk, j].
LUONG_KERNEL double fma_chain(MatrixView a, const double* b, int b_stride, int i, int j, int k) {
  double acc = 0.0;
  for (int kk = 0; kk < k; ++kk) acc = std::fma(a(i, kk), b[kk * b_stride + j], acc);
  return acc;
}

// Rows i and i + 1, columns [j0, j0 + kBlocks * kBlock) for kBlocks <= 3: 4 * kBlocks independent
// chains of vector multiply-adds, each load of b shared by both rows. (Named accumulators: GCC keeps
// an array of them in memory.)
template <Store store, int kBlocks>
LUONG_KERNEL void gemm_two_rows(double* out, MatrixView a, const double* b, int b_stride, int i, int j0, int k, int m,
                                double divisor) {
  static_assert(kBlocks >= 1 && kBlocks <= 3);
  Block r0b0 = {}, r0b1 = {}, r0b2 = {}, r1b0 = {}, r1b1 = {}, r1b2 = {};
  for (int kk = 0; kk < k; ++kk) {
    const double x0 = a(i, kk), x1 = a(i + 1, kk);
    const double* br = b + kk * b_stride + j0;
    const Block b0 = load_block(br);
    r0b0 = fma_block(x0, b0, r0b0);
    r1b0 = fma_block(x1, b0, r1b0);
    if constexpr (kBlocks > 1) {
      const Block b1 = load_block(br + kBlock);
      r0b1 = fma_block(x0, b1, r0b1);
      r1b1 = fma_block(x1, b1, r1b1);
    }
    if constexpr (kBlocks > 2) {
      const Block b2 = load_block(br + 2 * kBlock);
      r0b2 = fma_block(x0, b2, r0b2);
      r1b2 = fma_block(x1, b2, r1b2);
    }
  }
  const Block* results[2][3] = {{&r0b0, &r0b1, &r0b2}, {&r1b0, &r1b1, &r1b2}};
  for (int r = 0; r < 2; ++r) {
    for (int q = 0; q < kBlocks; ++q) {
      double* o = out + (i + r) * m + j0 + q * kBlock;
      store_half_result<store>(o, results[r][q]->lo, divisor);
      store_half_result<store>(o + kBlock / 2, results[r][q]->hi, divisor);
    }
  }
}

/// out[n,m] (=, or += with Store::kAdd) (a[n,k] @ b[k,m]) / divisor, rounded as numpy's matmul,
/// which is OpenBLAS's dgemm (its Haswell kernels on AVX2 and later; verified against numpy for
/// sizes 2-40 and every transpose the seed uses):
///  - every output is one multiply-add chain over k in ascending order, starting from 0;
///  - except numpy's last row when n is odd, which OpenBLAS (column-major, so it sees that row as
///    its 1-wide tail) computes for the first m - m % 4 columns as four partial chains over k mod 4
///    for the first k - k % 8 terms, then the remaining terms into the first, then (s0 + s1) + (s2 + s3).
/// The product is rounded before it is divided or added, as numpy's separate arrays are; divisor 1
/// divides exactly. b is row-major with row stride b_stride; a may be any view. (With n = 1 or m = 1
/// numpy calls gemv instead; the seed has neither: its sentences have 2 tokens or more.)
template <Store store>
LUONG_KERNEL void gemm_impl(double* out, MatrixView a, const double* b, int b_stride, int n, int k, int m,
                            double divisor = 1.0) {
  const int plain_rows = n - n % 2;
  const int blocks = m / kBlock;
  for (int i = 0; i < plain_rows; i += 2) {
    int q = 0;
    for (; q + 3 <= blocks; q += 3) gemm_two_rows<store, 3>(out, a, b, b_stride, i, q * kBlock, k, m, divisor);
    if (blocks - q == 2) gemm_two_rows<store, 2>(out, a, b, b_stride, i, q * kBlock, k, m, divisor);
    if (blocks - q == 1) gemm_two_rows<store, 1>(out, a, b, b_stride, i, q * kBlock, k, m, divisor);
  }
  // The columns past the last block, eight rows at a time: one output alone is a chain of k
  // dependent multiply-adds; eight are independent chains.
  for (int j = blocks * kBlock; j < m; ++j) {
    int i0 = 0;
    for (; i0 + kBlock <= plain_rows; i0 += kBlock) {
      double acc[kBlock] = {};
      for (int kk = 0; kk < k; ++kk) {
        const double x = b[kk * b_stride + j];
        for (int r = 0; r < kBlock; ++r) acc[r] = std::fma(a(i0 + r, kk), x, acc[r]);
      }
      for (int r = 0; r < kBlock; ++r) store_result<store>(out + (i0 + r) * m + j, acc[r], divisor);
    }
    for (int i = i0; i < plain_rows; ++i) store_result<store>(out + i * m + j, fma_chain(a, b, b_stride, i, j, k), divisor);
  }
  if (plain_rows == n) return;
  const int i = n - 1;
  double* orow = out + i * m;
  const int split_cols = m - m % 4, split_terms = k - k % 8;
  for (int j = 0; j < split_cols; j += kBlock / 2) {
    Half s0 = {}, s1 = {}, s2 = {}, s3 = {};
    const double* bj = b + j;
    for (int kk = 0; kk < split_terms; kk += 4) {
      s0 = fma_half(a(i, kk), load_half(bj + kk * b_stride), s0);
      s1 = fma_half(a(i, kk + 1), load_half(bj + (kk + 1) * b_stride), s1);
      s2 = fma_half(a(i, kk + 2), load_half(bj + (kk + 2) * b_stride), s2);
      s3 = fma_half(a(i, kk + 3), load_half(bj + (kk + 3) * b_stride), s3);
    }
    for (int kk = split_terms; kk < k; ++kk) s0 = fma_half(a(i, kk), load_half(bj + kk * b_stride), s0);
    store_half_result<store>(orow + j, (s0 + s1) + (s2 + s3), divisor);
  }
  for (int j = split_cols; j < m; ++j) store_result<store>(orow + j, fma_chain(a, b, b_stride, i, j, k), divisor);
}

// ---- the layers, rounded as numpy ------------------------------------------------------------------
// The same layers as cloze_reference.cpp's, in the same order, with numpy's rounding.

LUONG_KERNEL void embedding_forward_impl(double* X, const double* E, const int* idx, int n, int d) {
  for (int i = 0; i < n; ++i) std::memcpy(X + i * d, E + static_cast<std::size_t>(idx[i]) * d, sizeof(double) * d);
}

// np.add.at: the rows are added one token after another.
LUONG_KERNEL void embedding_backward_impl(double* dE, const double* dX, const int* idx, int n, int d) {
  for (int i = 0; i < n; ++i) {
    double* row = dE + static_cast<std::size_t>(idx[i]) * d;
    const double* g = dX + i * d;
    for (int j = 0; j < d; ++j) row[j] += g[j];
  }
}

LUONG_KERNEL void matmul_forward_impl(double* out, const double* a, const double* b, int n, int k, int m) {
  gemm_impl<Store::kAssign>(out, rows_of(a, k), b, m, n, k, m);
}

LUONG_CLONES void numpy_matmul_cloned(double* out, const double* a, const double* b, int n, int k, int m) {
  matmul_forward_impl(out, a, b, n, k, m);
}

LUONG_KERNEL void matmul_backward_impl(double* da, double* db, const double* dout, const double* a, const double* b_t, int n,
                                       int k, int m) {
  if (da != nullptr) gemm_impl<Store::kAdd>(da, rows_of(dout, m), b_t, k, n, m, k);   // da += dout @ b^T
  if (db != nullptr) gemm_impl<Store::kAdd>(db, transpose_of(a, k), dout, m, k, n, m);  // db += a^T @ dout
}

LUONG_KERNEL void softmax_rows_forward_impl(double* P, const double* S, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const double* s = S + r * cols;
    double* p = P + r * cols;
    double top = s[0];
    for (int c = 1; c < cols; ++c) top = std::max(top, s[c]);
    if (glibc_exp_uses_fma()) {
      for (int c = 0; c < cols; ++c) p[c] = glibc_exp_main(s[c] - top);  // vectorised
      for (int c = 0; c < cols; ++c) {
        if (!glibc_exp_is_main_path(s[c] - top)) p[c] = std::exp(s[c] - top);  // the row's maximum, the masked diagonal
      }
    } else {
      for (int c = 0; c < cols; ++c) p[c] = std::exp(s[c] - top);
    }
    const double sum = pairwise_sum([p](int c) { return p[c]; }, 0, cols);
    for (int c = 0; c < cols; ++c) p[c] /= sum;
  }
}

LUONG_KERNEL void softmax_rows_backward_impl(double* dS, const double* dP, const double* P, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const double* p = P + r * cols;
    const double* g = dP + r * cols;
    const double dot = pairwise_sum([g, p](int c) { return g[c] * p[c]; }, 0, cols);
    double* out = dS + r * cols;
    for (int c = 0; c < cols; ++c) out[c] += p[c] * (g[c] - dot);
  }
}

// K_t: scratch [dk, n] for K transposed (the product's right operand is read row by row).
LUONG_KERNEL void attention_scores_forward_impl(double* S, const double* Q, const double* K, double* K_t, int n, int dk) {
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < dk; ++c) K_t[c * n + i] = K[i * dk + c];
  }
  gemm_impl<Store::kAssign>(S, rows_of(Q, dk), K_t, n, n, dk, n, std::sqrt(static_cast<double>(dk)));
  for (int i = 0; i < n; ++i) S[i * n + i] = -1e9;
}

LUONG_KERNEL void attention_scores_backward_impl(double* dQ, double* dK, double* dS, const double* Q, const double* K, int n,
                                                 int dk) {
  for (int i = 0; i < n; ++i) dS[i * n + i] = 0.0;  // the masked score was a constant
  const double root = std::sqrt(static_cast<double>(dk));
  gemm_impl<Store::kAdd>(dQ, rows_of(dS, n), K, dk, n, n, dk, root);       // dQ += (dS @ K) / sqrt(dk)
  gemm_impl<Store::kAdd>(dK, transpose_of(dS, n), Q, dk, n, n, dk, root);  // dK += (dS^T @ Q) / sqrt(dk)
}

LUONG_KERNEL double cross_entropy_forward_impl(const double* P, const int* targets, int n, int vocab) {
  return pairwise_sum([=](int i) { return -std::log(P[i * vocab + targets[i]] + 1e-12); }, 0, n);
}

LUONG_KERNEL void cross_entropy_backward_impl(double* dscores, const double* P, const int* targets, int n, int vocab) {
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < vocab; ++c) dscores[i * vocab + c] += P[i * vocab + c];
    dscores[i * vocab + targets[i]] -= 1.0;
  }
}

// ---- the model ---------------------------------------------------------------------------------

namespace {
std::vector<double> transpose(const double* a, int rows, int cols) {
  std::vector<double> t(static_cast<std::size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) t[static_cast<std::size_t>(c) * rows + r] = a[r * cols + c];
  }
  return t;
}
}  // namespace

void ClozeTransposes::update(const ClozeParameters& p) {
  const ClozeDims& m = p.dims;
  W_Q_t = transpose(p.W_Q(), m.d, m.dk);
  W_K_t = transpose(p.W_K(), m.d, m.dk);
  W_V_t = transpose(p.W_V(), m.d, m.dv);
  W_O_t = transpose(p.W_O(), m.dv, m.vocab);
}

ClozeWorkspace::ClozeWorkspace(const ClozeDims& m, int t) {
  const auto n = static_cast<std::size_t>(t);
  for (auto* buffer : {&X, &dX}) buffer->assign(n * m.d, 0.0);
  for (auto* buffer : {&Q, &K, &K_t, &dQ, &dK}) buffer->assign(n * m.dk, 0.0);
  for (auto* buffer : {&V, &V_t, &Z, &dV, &dZ}) buffer->assign(n * m.dv, 0.0);
  for (auto* buffer : {&S, &A, &dS, &dA}) buffer->assign(n * n, 0.0);
  for (auto* buffer : {&scores, &P, &dscores}) buffer->assign(n * m.vocab, 0.0);
}

namespace {

/// Where one sentence's weight gradients are added.
struct WeightGradients {
  double* W_Q;
  double* W_K;
  double* W_V;
  double* W_O;
};

// The seed's forward_backward, line by line: returns the sentence's loss, adds its weight gradients
// to `grads` and writes d(loss)/dX [n, d] to dX.
LUONG_KERNEL double sentence_forward_backward(const ClozeParameters& params, const ClozeTransposes& t, const int* idx, int n,
                                              const WeightGradients& grads, double* dX, ClozeWorkspace& ws) {
  const ClozeDims& m = params.dims;
  // forward
  embedding_forward_impl(ws.X.data(), params.E(), idx, n, m.d);                             // X (n, d)
  matmul_forward_impl(ws.Q.data(), ws.X.data(), params.W_Q(), n, m.d, m.dk);                // Q (n, dk)
  matmul_forward_impl(ws.K.data(), ws.X.data(), params.W_K(), n, m.d, m.dk);                // K (n, dk)
  matmul_forward_impl(ws.V.data(), ws.X.data(), params.W_V(), n, m.d, m.dv);                // V (n, dv)
  attention_scores_forward_impl(ws.S.data(), ws.Q.data(), ws.K.data(), ws.K_t.data(), n, m.dk);  // S (n, n)
  softmax_rows_forward_impl(ws.A.data(), ws.S.data(), n, n);                                // A (n, n)
  matmul_forward_impl(ws.Z.data(), ws.A.data(), ws.V.data(), n, n, m.dv);                   // Z (n, dv)
  matmul_forward_impl(ws.scores.data(), ws.Z.data(), params.W_O(), n, m.dv, m.vocab);       // scores (n, vocab)
  softmax_rows_forward_impl(ws.P.data(), ws.scores.data(), n, m.vocab);                     // P (n, vocab)
  const double loss = cross_entropy_forward_impl(ws.P.data(), idx, n, m.vocab);

  // backward, in reverse; the activation gradients start from zero
  const auto zero = [n](double* v, int cols) { std::fill_n(v, static_cast<std::size_t>(n) * cols, 0.0); };
  zero(ws.dscores.data(), m.vocab);
  zero(ws.dZ.data(), m.dv);
  zero(ws.dA.data(), n);
  zero(ws.dV.data(), m.dv);
  zero(ws.dS.data(), n);
  zero(ws.dQ.data(), m.dk);
  zero(ws.dK.data(), m.dk);
  zero(dX, m.d);
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < m.dv; ++c) ws.V_t[static_cast<std::size_t>(c) * n + i] = ws.V[static_cast<std::size_t>(i) * m.dv + c];
  }
  cross_entropy_backward_impl(ws.dscores.data(), ws.P.data(), idx, n, m.vocab);
  matmul_backward_impl(ws.dZ.data(), grads.W_O, ws.dscores.data(), ws.Z.data(), t.W_O_t.data(), n, m.dv, m.vocab);
  matmul_backward_impl(ws.dA.data(), ws.dV.data(), ws.dZ.data(), ws.A.data(), ws.V_t.data(), n, n, m.dv);  // Z = A V
  softmax_rows_backward_impl(ws.dS.data(), ws.dA.data(), ws.A.data(), n, n);
  attention_scores_backward_impl(ws.dQ.data(), ws.dK.data(), ws.dS.data(), ws.Q.data(), ws.K.data(), n, m.dk);
  matmul_backward_impl(dX, grads.W_Q, ws.dQ.data(), ws.X.data(), t.W_Q_t.data(), n, m.d, m.dk);
  matmul_backward_impl(dX, grads.W_K, ws.dK.data(), ws.X.data(), t.W_K_t.data(), n, m.d, m.dk);
  matmul_backward_impl(dX, grads.W_V, ws.dV.data(), ws.X.data(), t.W_V_t.data(), n, m.d, m.dv);
  return loss;
}

}  // namespace


LUONG_CLONES
double numpy_exact_forward_backward(const ClozeParameters& params, const ClozeTransposes& t, const int* idx, int n,
                                    ClozeParameters& grads, ClozeWorkspace& ws) {
  const WeightGradients weights{grads.W_Q(), grads.W_K(), grads.W_V(), grads.W_O()};
  const double loss = sentence_forward_backward(params, t, idx, n, weights, ws.dX.data(), ws);
  embedding_backward_impl(grads.E(), ws.dX.data(), idx, n, params.dims.d);
  return loss;
}

LUONG_CLONES
std::vector<double> cloze_attention(const ClozeParameters& params, const int* idx, int n) {
  const ClozeDims& m = params.dims;
  ClozeWorkspace ws(m, n);
  embedding_forward_impl(ws.X.data(), params.E(), idx, n, m.d);
  matmul_forward_impl(ws.Q.data(), ws.X.data(), params.W_Q(), n, m.d, m.dk);
  matmul_forward_impl(ws.K.data(), ws.X.data(), params.W_K(), n, m.d, m.dk);
  attention_scores_forward_impl(ws.S.data(), ws.Q.data(), ws.K.data(), ws.K_t.data(), n, m.dk);
  softmax_rows_forward_impl(ws.A.data(), ws.S.data(), n, n);
  return std::vector<double>(ws.A.begin(), ws.A.begin() + static_cast<std::ptrdiff_t>(n) * n);
}

void numpy_matmul(double* out, const double* a, const double* b, int n, int k, int m) {
  numpy_matmul_cloned(out, a, b, n, k, m);
}

double cloze_forward_backward(ClozeKernels kernels, const ClozeParameters& params, const int* idx, int n,
                              ClozeParameters& grads) {
  if (kernels == ClozeKernels::kReference) return cloze_forward_backward_reference(params, idx, n, grads);
  ClozeTransposes transposes;
  transposes.update(params);
  ClozeWorkspace ws(params.dims, n);
  return numpy_exact_forward_backward(params, transposes, idx, n, grads, ws);
}

namespace {

// The seed's Adam, one array operation at a time: every product and quotient is rounded on its own
// (no fused multiply-adds in this file), and the gradient is divided by the sentence count.
LUONG_CLONES
void adam_range(double* p, const double* gr, double* m, double* v, std::size_t begin, std::size_t end,
                double correction1, double correction2, double sentences, const AdamOptions& o) {
  for (std::size_t i = begin; i < end; ++i) {
    const double g = gr[i] / sentences;
    m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
    v[i] = o.beta2 * v[i] + (1 - o.beta2) * (g * g);
    const double mhat = m[i] / correction1;
    const double vhat = v[i] / correction2;
    p[i] -= o.lr * mhat / (std::sqrt(vhat) + o.eps);
  }
}

std::size_t weights_size(const ClozeDims& m) {
  return 2 * static_cast<std::size_t>(m.d) * m.dk + static_cast<std::size_t>(m.d) * m.dv +
         static_cast<std::size_t>(m.dv) * m.vocab;
}

}  // namespace

ClozeBatch::ClozeBatch(const ClozeDims& dims, const std::vector<std::vector<int>>& sentences) : dims_(dims) {
  sentence_begin_.push_back(0);
  int longest = 0;
  for (const auto& sentence : sentences) {
    idx_.insert(idx_.end(), sentence.begin(), sentence.end());
    sentence_begin_.push_back(static_cast<int>(idx_.size()));
    longest = std::max(longest, static_cast<int>(sentence.size()));
  }
  total_ = static_cast<int>(idx_.size());
  // Longest first, so that the dynamic schedule ends with short sentences to even out the threads.
  const int count = static_cast<int>(sentences.size());
  for (int i = 0; i < count; ++i) sentence_order_.push_back(i);
  std::stable_sort(sentence_order_.begin(), sentence_order_.end(),
                   [&](int a, int b) { return sentences[static_cast<std::size_t>(a)].size() > sentences[static_cast<std::size_t>(b)].size(); });
  sentence_weights_.assign(static_cast<std::size_t>(count) * weights_size(dims), 0.0);
  sentence_loss_.assign(static_cast<std::size_t>(count), 0.0);
  dX_.assign(static_cast<std::size_t>(total_) * dims.d, 0.0);
  longest_ = longest;
}

LUONG_CLONES
void ClozeBatch::sentence_pass(int s, const ClozeParameters& params, ClozeWorkspace& ws) {
  const ClozeDims& m = dims_;
  const int r = sentence_begin_[s], n = sentence_begin_[s + 1] - r;
  double* w = &sentence_weights_[static_cast<std::size_t>(s) * weights_size(m)];
  std::fill_n(w, weights_size(m), 0.0);
  const WeightGradients weights{w, w + m.d * m.dk, w + 2 * m.d * m.dk, w + 2 * m.d * m.dk + m.d * m.dv};
  sentence_loss_[static_cast<std::size_t>(s)] =
      sentence_forward_backward(params, transposes_, &idx_[static_cast<std::size_t>(r)], n, weights,
                                &dX_[static_cast<std::size_t>(r) * m.d], ws);
}

double ClozeBatch::forward_backward(const ClozeParameters& params, ClozeParameters& grads, int threads) {
  return run(params, grads, threads, nullptr, nullptr);
}

double ClozeBatch::update(ClozeParameters& params, ClozeParameters& grads, const AdamStep& adam, int threads) {
  return run(params, grads, threads, &adam, params.data.data());
}

// One parallel region per update: the sentences, then the gradient sums and (for update()) Adam over
// the same parameter ranges, so there is no second region to start. Every sentence writes its own
// buffers and the sums run in sentence order, as the seed's loop does, so the result does not
// depend on the thread count.
double ClozeBatch::run(const ClozeParameters& params, ClozeParameters& grads, int threads, const AdamStep* adam,
                       double* updated_params) {
  transposes_.update(params);
  const int sentences = static_cast<int>(sentence_begin_.size()) - 1;
  const std::size_t size = grads.data.size();
  const std::size_t embedding_size = static_cast<std::size_t>(dims_.vocab) * dims_.d;
  const std::size_t per_sentence = weights_size(dims_);
  constexpr int kPieces = 8;
  while (static_cast<int>(workspaces_.size()) < threads) workspaces_.emplace_back(dims_, longest_);
#pragma omp parallel num_threads(threads)
  {
    ClozeWorkspace& ws = workspaces_[static_cast<std::size_t>(omp_get_thread_num())];
#pragma omp for schedule(dynamic, 1)
    for (int k = 0; k < sentences; ++k) sentence_pass(sentence_order_[static_cast<std::size_t>(k)], params, ws);
#pragma omp for schedule(static)
    for (int piece = 0; piece < kPieces; ++piece) {
      const std::size_t begin = size * piece / kPieces, end = size * (piece + 1) / kPieces;
      double* g = grads.data.data();
      std::fill(g + begin, g + end, 0.0);
      // The embedding gradient: np.add.at of every sentence's dX, token after token.
      const std::size_t embedding_end = std::min(end, embedding_size);
      const auto d = static_cast<std::size_t>(dims_.d);
      for (int r = 0; r < total_ && begin < embedding_end; ++r) {
        const std::size_t row = static_cast<std::size_t>(idx_[static_cast<std::size_t>(r)]) * d;
        const double* source = &dX_[static_cast<std::size_t>(r) * d];
        for (std::size_t i = std::max(begin, row); i < std::min(embedding_end, row + d); ++i) g[i] += source[i - row];
      }
      // The weights: grads[k] += each sentence's, in sentence order.
      const std::size_t weights_begin = std::max(begin, embedding_size);
      for (int s = 0; s < sentences && weights_begin < end; ++s) {
        const double* w = &sentence_weights_[static_cast<std::size_t>(s) * per_sentence];
        for (std::size_t i = weights_begin; i < end; ++i) g[i] += w[i - embedding_size];
      }
      if (adam != nullptr) {
        // Every parameter piece is read-only until the sentences are done (the barrier of the
        // first omp for), so updating it here is safe.
        adam_range(updated_params, g, adam->m->data(), adam->v->data(), begin, end, adam->correction1,
                   adam->correction2, adam->sentences, adam->options);
      }
    }
  }
  double loss = 0;  // the seed's total_loss += l, sentence after sentence
  for (int s = 0; s < sentences; ++s) loss += sentence_loss_[static_cast<std::size_t>(s)];
  return loss;
}

ClozeTrainResult train_cloze(ClozeParameters& params, const std::vector<std::vector<int>>& sentences, int updates,
                             int threads, const AdamOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  ClozeBatch batch(params.dims, sentences);
  ClozeParameters grads(params.dims);
  std::vector<double> m(params.data.size(), 0.0), v(params.data.size(), 0.0);
  const int count = static_cast<int>(sentences.size());
  ClozeTrainResult result;
  for (int update = 1; update <= updates; ++update) {
    const ClozeBatch::AdamStep adam{&m, &v, 1.0 - std::pow(options.beta1, update), 1.0 - std::pow(options.beta2, update),
                                    static_cast<double>(count), options};
    const double total_loss = batch.update(params, grads, adam, std::max(1, threads));
    if (update == 1 || update % 20 == 0) result.loss_curve.emplace_back(update, total_loss / batch.tokens());
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace luong::cloze
