#include "luong/cloze/cloze_head.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "luong/cloze/numpy_random.h"
#include "luong/util/vector_math.h"

namespace luong::cloze {

// ---- layer pairs -------------------------------------------------------------------------------
// The bodies are always inlined into the cloned callers below, so that each clone compiles them for
// its instruction set; the public functions are thin wrappers.
#define LUONG_KERNEL [[gnu::always_inline]] inline


LUONG_KERNEL void embedding_forward_impl(double* X, const double* E, const int* idx, int n, int d) {
  for (int i = 0; i < n; ++i) std::memcpy(X + i * d, E + static_cast<std::size_t>(idx[i]) * d, sizeof(double) * d);
}

LUONG_KERNEL void embedding_backward_impl(double* dE, const double* dX, const int* idx, int n, int d) {
  for (int i = 0; i < n; ++i) {
    double* row = dE + static_cast<std::size_t>(idx[i]) * d;
    const double* g = dX + i * d;
    for (int j = 0; j < d; ++j) row[j] += g[j];
  }
}

// The products are output-stationary: a block of kBlock outputs stays in registers while the
// reduction runs, instead of being loaded and stored once per term. Every output is summed in
// ascending order of the reduction index, like numpy's naive order (GCC may fuse multiply-adds).
constexpr int kBlock = 8;
// Eight doubles as two 32-byte GCC vectors: one ymm each with AVX2, a zmm half with AVX-512, two
// xmm with SSE2. (A single 64-byte vector type is native only with AVX-512; elsewhere GCC lowers it
// through memory, 20x slower.) Every lane is computed on its own, so the results do not depend on
// which clone runs.
typedef double Half __attribute__((vector_size(kBlock / 2 * sizeof(double))));
struct Block {
  Half lo, hi;
  double operator[](int i) const { return i < kBlock / 2 ? lo[i] : hi[i - kBlock / 2]; }
};
inline Block operator*(double x, const Block& b) { return {x * b.lo, x * b.hi}; }
inline Block operator*(const Block& a, const Block& b) { return {a.lo * b.lo, a.hi * b.hi}; }
inline Block& operator+=(Block& a, const Block& b) {
  a.lo += b.lo;
  a.hi += b.hi;
  return a;
}
inline Block lane_max(const Block& a, const Block& b) { return {a.lo > b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi}; }

inline Block load_block(const double* p) {
  Block b;
  std::memcpy(&b.lo, p, sizeof b.lo);
  std::memcpy(&b.hi, p + kBlock / 2, sizeof b.hi);
  return b;
}
inline void store_block(double* p, const Block& b) {
  std::memcpy(p, &b.lo, sizeof b.lo);
  std::memcpy(p + kBlock / 2, &b.hi, sizeof b.hi);
}
inline double horizontal_sum(const Block& b) {
  double sum = 0.0;
  for (int i = 0; i < kBlock; ++i) sum += b[i];
  return sum;
}

LUONG_KERNEL void matmul_forward_impl(double* out, const double* a, const double* b, int n, int k, int m) {
  for (int i = 0; i < n; ++i) {
    const double* arow = a + i * k;
    double* orow = out + i * m;
    int j0 = 0;
    // Four independent accumulators hide the FMA latency.
    for (; j0 + 4 * kBlock <= m; j0 += 4 * kBlock) {
      Block a0 = {}, a1 = {}, a2 = {}, a3 = {};
      for (int kk = 0; kk < k; ++kk) {
        const double x = arow[kk];
        const double* br = b + kk * m + j0;
        a0 += x * load_block(br);
        a1 += x * load_block(br + kBlock);
        a2 += x * load_block(br + 2 * kBlock);
        a3 += x * load_block(br + 3 * kBlock);
      }
      store_block(orow + j0, a0);
      store_block(orow + j0 + kBlock, a1);
      store_block(orow + j0 + 2 * kBlock, a2);
      store_block(orow + j0 + 3 * kBlock, a3);
    }
    for (; j0 + kBlock <= m; j0 += kBlock) {
      Block acc = {};
      for (int kk = 0; kk < k; ++kk) acc += arow[kk] * load_block(b + kk * m + j0);
      store_block(orow + j0, acc);
    }
  }
  // The columns past the last block (2 of the vocabulary's 98), eight rows at a time: one row's
  // column alone is a chain of k dependent multiply-adds; eight are independent chains.
  const int j_rest = m - m % kBlock;
  for (int j = j_rest; j < m; ++j) {
    int i0 = 0;
    for (; i0 + kBlock <= n; i0 += kBlock) {
      double acc[kBlock] = {};
      for (int kk = 0; kk < k; ++kk) {
        const double x = b[kk * m + j];
        for (int r = 0; r < kBlock; ++r) acc[r] += a[(i0 + r) * k + kk] * x;
      }
      for (int r = 0; r < kBlock; ++r) out[(i0 + r) * m + j] = acc[r];
    }
    for (int i = i0; i < n; ++i) {
      double acc = 0.0;
      for (int kk = 0; kk < k; ++kk) acc += a[i * k + kk] * b[kk * m + j];
      out[i * m + j] = acc;
    }
  }
}

LUONG_KERNEL void matmul_backward_impl(double* da, double* db, const double* dout, const double* a, const double* b_t, int n, int k,
                                int m) {
  if (da != nullptr) {
    // da[i, kk] += sum_j dout[i, j] * b^T[j, kk]
    for (int i = 0; i < n; ++i) {
      const double* g = dout + i * m;
      double* row = da + i * k;
      int k0 = 0;
      for (; k0 + 3 * kBlock <= k; k0 += 3 * kBlock) {
        Block a0 = load_block(row + k0), a1 = load_block(row + k0 + kBlock), a2 = load_block(row + k0 + 2 * kBlock);
        for (int j = 0; j < m; ++j) {
          const double x = g[j];
          const double* bt = b_t + j * k + k0;
          a0 += x * load_block(bt);
          a1 += x * load_block(bt + kBlock);
          a2 += x * load_block(bt + 2 * kBlock);
        }
        store_block(row + k0, a0);
        store_block(row + k0 + kBlock, a1);
        store_block(row + k0 + 2 * kBlock, a2);
      }
      for (; k0 + kBlock <= k; k0 += kBlock) {
        Block acc = load_block(row + k0);
        for (int j = 0; j < m; ++j) acc += g[j] * load_block(b_t + j * k + k0);
        store_block(row + k0, acc);
      }
      for (int kk = k0; kk < k; ++kk) {
        double acc = row[kk];
        for (int j = 0; j < m; ++j) acc += g[j] * b_t[j * k + kk];
        row[kk] = acc;
      }
    }
  }
  if (db != nullptr) {
    // db[kk, j] += sum_i a[i, kk] * dout[i, j]
    for (int kk = 0; kk < k; ++kk) {
      double* row = db + kk * m;
      int j0 = 0;
      for (; j0 + 4 * kBlock <= m; j0 += 4 * kBlock) {
        Block a0 = load_block(row + j0), a1 = load_block(row + j0 + kBlock);
        Block a2 = load_block(row + j0 + 2 * kBlock), a3 = load_block(row + j0 + 3 * kBlock);
        for (int i = 0; i < n; ++i) {
          const double x = a[i * k + kk];
          const double* g = dout + i * m + j0;
          a0 += x * load_block(g);
          a1 += x * load_block(g + kBlock);
          a2 += x * load_block(g + 2 * kBlock);
          a3 += x * load_block(g + 3 * kBlock);
        }
        store_block(row + j0, a0);
        store_block(row + j0 + kBlock, a1);
        store_block(row + j0 + 2 * kBlock, a2);
        store_block(row + j0 + 3 * kBlock, a3);
      }
      for (; j0 + kBlock <= m; j0 += kBlock) {
        Block acc = load_block(row + j0);
        for (int i = 0; i < n; ++i) acc += a[i * k + kk] * load_block(dout + i * m + j0);
        store_block(row + j0, acc);
      }
    }
    // The columns past the last block, eight rows of db at a time (independent chains, as above).
    const int j_rest = m - m % kBlock;
    for (int j = j_rest; j < m; ++j) {
      int k0 = 0;
      for (; k0 + kBlock <= k; k0 += kBlock) {
        double acc[kBlock];
        for (int r = 0; r < kBlock; ++r) acc[r] = db[(k0 + r) * m + j];
        for (int i = 0; i < n; ++i) {
          const double g = dout[i * m + j];
          for (int r = 0; r < kBlock; ++r) acc[r] += a[i * k + k0 + r] * g;
        }
        for (int r = 0; r < kBlock; ++r) db[(k0 + r) * m + j] = acc[r];
      }
      for (int kk = k0; kk < k; ++kk) {
        double acc = db[kk * m + j];
        for (int i = 0; i < n; ++i) acc += a[i * k + kk] * dout[i * m + j];
        db[kk * m + j] = acc;
      }
    }
  }
}

LUONG_KERNEL void softmax_rows_forward_impl(double* P, const double* S, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const double* s = S + r * cols;
    double* p = P + r * cols;
    // Maximum and sum run over blocks of 8 (the sum's order differs from numpy's only in rounding).
    int c = 0;
    double top = s[0];
    if (cols >= kBlock) {
      Block block_max = load_block(s);
      for (c = kBlock; c + kBlock <= cols; c += kBlock) {
        const Block x = load_block(s + c);
        block_max = lane_max(block_max, x);
      }
      for (int i = 0; i < kBlock; ++i) top = std::max(top, block_max[i]);
    }
    for (; c < cols; ++c) top = std::max(top, s[c]);
    for (c = 0; c < cols; ++c) p[c] = vector_exp(s[c] - top);  // vectorised
    Block block_sum = {};
    for (c = 0; c + kBlock <= cols; c += kBlock) block_sum += load_block(p + c);
    double sum = horizontal_sum(block_sum);
    for (; c < cols; ++c) sum += p[c];
    for (c = 0; c < cols; ++c) p[c] /= sum;
  }
}

LUONG_KERNEL void softmax_rows_backward_impl(double* dS, const double* dP, const double* P, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const double* p = P + r * cols;
    const double* g = dP + r * cols;
    double dot = 0.0;
    for (int c = 0; c < cols; ++c) dot += g[c] * p[c];
    double* out = dS + r * cols;
    for (int c = 0; c < cols; ++c) out[c] += p[c] * (g[c] - dot);
  }
}

LUONG_KERNEL void attention_scores_forward_impl(double* S, const double* Q, const double* K, int n, int dk) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      Block block_dot = {};
      int c = 0;
      for (; c + kBlock <= dk; c += kBlock) block_dot += load_block(Q + i * dk + c) * load_block(K + j * dk + c);
      double dot = horizontal_sum(block_dot);
      for (; c < dk; ++c) dot += Q[i * dk + c] * K[j * dk + c];
      S[i * n + j] = i == j ? -1e9 : dot * scale;
    }
  }
}

LUONG_KERNEL void attention_scores_backward_impl(double* dQ, double* dK, const double* dS, const double* Q, const double* K, int n,
                               int dk) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;  // the masked score was a constant
      const double g = dS[i * n + j] * scale;
      for (int c = 0; c < dk; ++c) {
        dQ[i * dk + c] += g * K[j * dk + c];
        dK[j * dk + c] += g * Q[i * dk + c];
      }
    }
  }
}

LUONG_KERNEL double cross_entropy_forward_impl(const double* P, const int* targets, int n, int vocab) {
  double loss = 0.0;
  for (int i = 0; i < n; ++i) loss -= std::log(P[i * vocab + targets[i]] + 1e-12);
  return loss;
}

LUONG_KERNEL void cross_entropy_backward_impl(double* dscores, const double* P, const int* targets, int n, int vocab) {
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < vocab; ++c) dscores[i * vocab + c] += P[i * vocab + c];
    dscores[i * vocab + targets[i]] -= 1.0;
  }
}

void embedding_forward(double* X, const double* E, const int* idx, int n, int d) { embedding_forward_impl(X, E, idx, n, d); }
void embedding_backward(double* dE, const double* dX, const int* idx, int n, int d) { embedding_backward_impl(dE, dX, idx, n, d); }
void matmul_forward(double* out, const double* a, const double* b, int n, int k, int m) { matmul_forward_impl(out, a, b, n, k, m); }
void matmul_backward(double* da, double* db, const double* dout, const double* a, const double* b_t, int n, int k,
                     int m) { matmul_backward_impl(da, db, dout, a, b_t, n, k, m); }
void softmax_rows_forward(double* P, const double* S, int rows, int cols) { softmax_rows_forward_impl(P, S, rows, cols); }
void softmax_rows_backward(double* dS, const double* dP, const double* P, int rows, int cols) { softmax_rows_backward_impl(dS, dP, P, rows, cols); }
void attention_scores_forward(double* S, const double* Q, const double* K, int n, int dk) { attention_scores_forward_impl(S, Q, K, n, dk); }
void attention_scores_backward(double* dQ, double* dK, const double* dS, const double* Q, const double* K, int n,
                               int dk) { attention_scores_backward_impl(dQ, dK, dS, Q, K, n, dk); }
double cross_entropy_forward(const double* P, const int* targets, int n, int vocab) { return cross_entropy_forward_impl(P, targets, n, vocab); }
void cross_entropy_backward(double* dscores, const double* P, const int* targets, int n, int vocab) { cross_entropy_backward_impl(dscores, P, targets, n, vocab); }

// ---- the model ---------------------------------------------------------------------------------

ClozeParameters::ClozeParameters(const ClozeDims& dims_)
    : dims(dims_),
      data(static_cast<std::size_t>(dims.vocab) * dims.d + 2 * static_cast<std::size_t>(dims.d) * dims.dk +
               static_cast<std::size_t>(dims.d) * dims.dv + static_cast<std::size_t>(dims.dv) * dims.vocab,
           0.0) {}

ClozeParameters::Slice ClozeParameters::slice(int which) const {
  const ClozeDims& m = dims;
  const Slice slices[5] = {{0, m.vocab, m.d},
                           {static_cast<std::size_t>(W_Q() - E()), m.d, m.dk},
                           {static_cast<std::size_t>(W_K() - E()), m.d, m.dk},
                           {static_cast<std::size_t>(W_V() - E()), m.d, m.dv},
                           {static_cast<std::size_t>(W_O() - E()), m.dv, m.vocab}};
  return slices[which];
}

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
  for (auto* buffer : {&Q, &K, &dQ, &dK}) buffer->assign(n * m.dk, 0.0);
  for (auto* buffer : {&V, &V_t, &Z, &dV, &dZ}) buffer->assign(n * m.dv, 0.0);
  for (auto* buffer : {&S, &A, &dS, &dA}) buffer->assign(n * n, 0.0);
  for (auto* buffer : {&scores, &P, &dscores}) buffer->assign(n * m.vocab, 0.0);
}

// flatten inlines every layer into each clone, so the whole sentence runs with AVX-512 or AVX2 + FMA
// where the processor has them, and with SSE2 elsewhere.
#define LUONG_CLONES __attribute__((flatten, target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

LUONG_CLONES
double cloze_forward_backward(const ClozeParameters& params, const ClozeTransposes& t, const int* idx, int n,
                              ClozeParameters& grads, ClozeWorkspace& ws) {
  const ClozeDims& m = params.dims;
  // forward
  embedding_forward_impl(ws.X.data(), params.E(), idx, n, m.d);                    // X (n, d)
  matmul_forward_impl(ws.Q.data(), ws.X.data(), params.W_Q(), n, m.d, m.dk);       // Q (n, dk)
  matmul_forward_impl(ws.K.data(), ws.X.data(), params.W_K(), n, m.d, m.dk);       // K (n, dk)
  matmul_forward_impl(ws.V.data(), ws.X.data(), params.W_V(), n, m.d, m.dv);       // V (n, dv)
  attention_scores_forward_impl(ws.S.data(), ws.Q.data(), ws.K.data(), n, m.dk);   // S (n, n)
  softmax_rows_forward_impl(ws.A.data(), ws.S.data(), n, n);                       // A (n, n)
  matmul_forward_impl(ws.Z.data(), ws.A.data(), ws.V.data(), n, n, m.dv);          // Z (n, dv)
  matmul_forward_impl(ws.scores.data(), ws.Z.data(), params.W_O(), n, m.dv, m.vocab);  // scores (n, vocab)
  softmax_rows_forward_impl(ws.P.data(), ws.scores.data(), n, m.vocab);            // P (n, vocab)
  const double loss = cross_entropy_forward_impl(ws.P.data(), idx, n, m.vocab);

  // backward, in reverse; workspace gradients are zeroed, parameter gradients accumulate
  const auto zero = [n](std::vector<double>& v, int cols) { std::fill_n(v.begin(), static_cast<std::size_t>(n) * cols, 0.0); };
  zero(ws.dscores, m.vocab);
  zero(ws.dZ, m.dv);
  zero(ws.dA, n);
  zero(ws.dV, m.dv);
  zero(ws.dS, n);
  zero(ws.dQ, m.dk);
  zero(ws.dK, m.dk);
  zero(ws.dX, m.d);
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < m.dv; ++c) ws.V_t[static_cast<std::size_t>(c) * n + i] = ws.V[static_cast<std::size_t>(i) * m.dv + c];
  }
  cross_entropy_backward_impl(ws.dscores.data(), ws.P.data(), idx, n, m.vocab);
  matmul_backward_impl(ws.dZ.data(), grads.W_O(), ws.dscores.data(), ws.Z.data(), t.W_O_t.data(), n, m.dv, m.vocab);
  matmul_backward_impl(ws.dA.data(), ws.dV.data(), ws.dZ.data(), ws.A.data(), ws.V_t.data(), n, n, m.dv);  // Z = A V
  softmax_rows_backward_impl(ws.dS.data(), ws.dA.data(), ws.A.data(), n, n);
  attention_scores_backward_impl(ws.dQ.data(), ws.dK.data(), ws.dS.data(), ws.Q.data(), ws.K.data(), n, m.dk);
  matmul_backward_impl(ws.dX.data(), grads.W_Q(), ws.dQ.data(), ws.X.data(), t.W_Q_t.data(), n, m.d, m.dk);
  matmul_backward_impl(ws.dX.data(), grads.W_K(), ws.dK.data(), ws.X.data(), t.W_K_t.data(), n, m.d, m.dk);
  matmul_backward_impl(ws.dX.data(), grads.W_V(), ws.dV.data(), ws.X.data(), t.W_V_t.data(), n, m.d, m.dv);
  embedding_backward_impl(grads.E(), ws.dX.data(), idx, n, m.d);
  return loss;
}

std::vector<double> cloze_attention(const ClozeParameters& params, const int* idx, int n) {
  const ClozeDims& m = params.dims;
  ClozeWorkspace ws(m, n);
  embedding_forward_impl(ws.X.data(), params.E(), idx, n, m.d);
  matmul_forward_impl(ws.Q.data(), ws.X.data(), params.W_Q(), n, m.d, m.dk);
  matmul_forward_impl(ws.K.data(), ws.X.data(), params.W_K(), n, m.d, m.dk);
  attention_scores_forward_impl(ws.S.data(), ws.Q.data(), ws.K.data(), n, m.dk);
  softmax_rows_forward_impl(ws.A.data(), ws.S.data(), n, n);
  return std::vector<double>(ws.A.begin(), ws.A.begin() + static_cast<std::ptrdiff_t>(n) * n);
}

void init_numpy(ClozeParameters& params, unsigned seed) {
  NumpyRandom rng(seed);
  for (double& value : params.data) value = 0.1 * rng.gauss();  // E, W_Q, W_K, W_V, W_O are contiguous in draw order
}

namespace {

LUONG_CLONES
void adam_range(double* p, const double* gr, double* m, double* v, std::size_t begin, std::size_t end,
                double correction1, double correction2, double grad_scale, const AdamOptions& o) {
  for (std::size_t i = begin; i < end; ++i) {
    const double g = gr[i] * grad_scale;
    m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
    v[i] = o.beta2 * v[i] + (1 - o.beta2) * (g * g);
    const double mhat = m[i] / correction1;
    const double vhat = v[i] / correction2;
    p[i] -= o.lr * mhat / (std::sqrt(vhat) + o.eps);
  }
}

}  // namespace

ClozeBatch::ClozeBatch(const ClozeDims& dims, const std::vector<std::vector<int>>& sentences)
    : dims_(dims), chunk_grads_(kChunks, ClozeParameters(dims)) {
  sentence_begin_.push_back(0);
  for (const auto& sentence : sentences) {
    idx_.insert(idx_.end(), sentence.begin(), sentence.end());
    sentence_begin_.push_back(static_cast<int>(idx_.size()));
    const auto n = sentence.size();
    for (auto* per : {&S_, &A_, &dA_, &dS_}) per->emplace_back(n * n, 0.0);
    V_t_.emplace_back(n * static_cast<std::size_t>(dims.dv), 0.0);
  }
  total_ = static_cast<int>(idx_.size());
  // Sentences in two halves of equal count and near-equal sum of n^2 (the attention layers' cost),
  // for the two-thread static schedule: longest first, each to the lighter half with room.
  const int count = static_cast<int>(sentences.size());
  std::vector<int> by_cost(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) by_cost[static_cast<std::size_t>(i)] = i;
  std::stable_sort(by_cost.begin(), by_cost.end(),
                   [&](int a, int b) { return sentences[static_cast<std::size_t>(a)].size() > sentences[static_cast<std::size_t>(b)].size(); });
  std::vector<int> halves[2];
  std::size_t load[2] = {0, 0};
  const std::size_t room[2] = {static_cast<std::size_t>((count + 1) / 2), static_cast<std::size_t>(count / 2)};
  for (int i : by_cost) {
    const std::size_t n = sentences[static_cast<std::size_t>(i)].size();
    const int half = halves[0].size() == room[0] ? 1 : halves[1].size() == room[1] ? 0 : (load[0] <= load[1] ? 0 : 1);
    halves[half].push_back(i);
    load[half] += n * n;
  }
  sentence_order_ = halves[0];
  sentence_order_.insert(sentence_order_.end(), halves[1].begin(), halves[1].end());
  for (int c = 0; c <= kChunks; ++c) chunk_begin_[c] = total_ * c / kChunks;
  for (int c = 0; c <= kChunks; ++c) vocab_begin_[c] = dims.vocab * c / kChunks;
  const auto t = static_cast<std::size_t>(total_);
  const auto vocab = static_cast<std::size_t>(dims.vocab);
  for (auto* buffer : {&PQ_, &PK_}) buffer->assign(vocab * dims.dk, 0.0);
  PV_.assign(vocab * dims.dv, 0.0);
  for (auto* buffer : {&X_, &dX_}) buffer->assign(t * dims.d, 0.0);
  for (auto* buffer : {&Q_, &K_, &dQ_, &dK_}) buffer->assign(t * dims.dk, 0.0);
  for (auto* buffer : {&V_, &Z_, &dV_, &dZ_}) buffer->assign(t * dims.dv, 0.0);
  for (auto* buffer : {&scores_, &P_, &dscores_}) buffer->assign(t * dims.vocab, 0.0);
}

// Each phase is its own cloned function: OpenMP outlines the parallel region into a function of its
// own, which would otherwise miss the AVX2/AVX-512 versions of the inlined kernels.
// A token's query, key and value are its word's row of E W_Q, E W_K and E W_V, computed here over
// the 98-word vocabulary instead of the 214 tokens of an update: each row is the same sum in the
// same order, so the results are bit-identical. (The backward keeps per-token products: summing
// dQ per word first changes the rounding, and this training is chaotic enough that such a change
// can end it in another minimum, at loss 0.32 instead of the seed's ~1e-5.)
LUONG_CLONES
void ClozeBatch::vocab_forward(int c, const ClozeParameters& params) {
  const ClozeDims& m = dims_;
  const int v = vocab_begin_[c], n = vocab_begin_[c + 1] - v;
  const auto vu = static_cast<std::size_t>(v);
  const double* E = params.E() + vu * m.d;
  matmul_forward_impl(&PQ_[vu * m.dk], E, params.W_Q(), n, m.d, m.dk);  // rows [v, v + n) of E W_Q
  matmul_forward_impl(&PK_[vu * m.dk], E, params.W_K(), n, m.d, m.dk);
  matmul_forward_impl(&PV_[vu * m.dv], E, params.W_V(), n, m.d, m.dv);
}

LUONG_CLONES
void ClozeBatch::sentence_forward(int s, const ClozeParameters& params) {
  const ClozeDims& m = dims_;
  const int r = sentence_begin_[s], n = sentence_begin_[s + 1] - r;
  const auto su = static_cast<std::size_t>(s);
  const auto ru = static_cast<std::size_t>(r);
  for (int i = 0; i < n; ++i) {  // X, Q, K, V: this sentence's rows of E, E W_Q, E W_K, E W_V
    const auto row = ru + static_cast<std::size_t>(i);
    const auto word = static_cast<std::size_t>(idx_[row]);
    std::memcpy(&X_[row * m.d], params.E() + word * m.d, sizeof(double) * m.d);
    std::memcpy(&Q_[row * m.dk], &PQ_[word * m.dk], sizeof(double) * m.dk);
    std::memcpy(&K_[row * m.dk], &PK_[word * m.dk], sizeof(double) * m.dk);
    std::memcpy(&V_[row * m.dv], &PV_[word * m.dv], sizeof(double) * m.dv);
  }
  attention_scores_forward_impl(S_[su].data(), &Q_[ru * m.dk], &K_[ru * m.dk], n, m.dk);
  softmax_rows_forward_impl(A_[su].data(), S_[su].data(), n, n);
  matmul_forward_impl(&Z_[ru * m.dv], A_[su].data(), &V_[ru * m.dv], n, n, m.dv);
}

LUONG_CLONES
void ClozeBatch::rows_readout(int c, const ClozeParameters& params, const ClozeTransposes& t) {
  const ClozeDims& m = dims_;
  const int r = chunk_begin_[c], n = chunk_begin_[c + 1] - r;
  const auto rv = static_cast<std::size_t>(r) * m.vocab;
  const auto rz = static_cast<std::size_t>(r) * m.dv;
  matmul_forward_impl(&scores_[rv], &Z_[rz], params.W_O(), n, m.dv, m.vocab);
  softmax_rows_forward_impl(&P_[rv], &scores_[rv], n, m.vocab);
  chunk_loss_[c] = cross_entropy_forward_impl(&P_[rv], &idx_[static_cast<std::size_t>(r)], n, m.vocab);
  std::fill_n(&dscores_[rv], static_cast<std::size_t>(n) * m.vocab, 0.0);
  cross_entropy_backward_impl(&dscores_[rv], &P_[rv], &idx_[static_cast<std::size_t>(r)], n, m.vocab);
  ClozeParameters& g = chunk_grads_[static_cast<std::size_t>(c)];
  std::fill(g.data.begin(), g.data.end(), 0.0);
  std::fill_n(&dZ_[rz], static_cast<std::size_t>(n) * m.dv, 0.0);
  matmul_backward_impl(&dZ_[rz], g.W_O(), &dscores_[rv], &Z_[rz], t.W_O_t.data(), n, m.dv, m.vocab);
}

LUONG_CLONES
void ClozeBatch::sentence_backward(int s) {
  const ClozeDims& m = dims_;
  const int r = sentence_begin_[s], n = sentence_begin_[s + 1] - r;
  const auto su = static_cast<std::size_t>(s);
  const auto ru = static_cast<std::size_t>(r);
  const double* V = &V_[ru * m.dv];
  double* V_t = V_t_[su].data();
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < m.dv; ++c) V_t[static_cast<std::size_t>(c) * n + i] = V[static_cast<std::size_t>(i) * m.dv + c];
  }
  std::fill(dA_[su].begin(), dA_[su].end(), 0.0);
  std::fill(dS_[su].begin(), dS_[su].end(), 0.0);
  double* dV = &dV_[ru * m.dv];
  double* dQ = &dQ_[ru * m.dk];
  double* dK = &dK_[ru * m.dk];
  std::fill_n(dV, static_cast<std::size_t>(n) * m.dv, 0.0);
  std::fill_n(dQ, static_cast<std::size_t>(n) * m.dk, 0.0);
  std::fill_n(dK, static_cast<std::size_t>(n) * m.dk, 0.0);
  matmul_backward_impl(dA_[su].data(), dV, &dZ_[ru * m.dv], A_[su].data(), V_t, n, n, m.dv);
  softmax_rows_backward_impl(dS_[su].data(), dA_[su].data(), A_[su].data(), n, n);
  attention_scores_backward_impl(dQ, dK, dS_[su].data(), &Q_[ru * m.dk], &K_[ru * m.dk], n, m.dk);
}

LUONG_CLONES
void ClozeBatch::rows_backward(int c, const ClozeTransposes& t) {
  const ClozeDims& m = dims_;
  const int r = chunk_begin_[c], n = chunk_begin_[c + 1] - r;
  const auto ru = static_cast<std::size_t>(r);
  ClozeParameters& g = chunk_grads_[static_cast<std::size_t>(c)];
  double* dX = &dX_[ru * m.d];
  const double* X = &X_[ru * m.d];
  std::fill_n(dX, static_cast<std::size_t>(n) * m.d, 0.0);
  matmul_backward_impl(dX, g.W_Q(), &dQ_[ru * m.dk], X, t.W_Q_t.data(), n, m.d, m.dk);
  matmul_backward_impl(dX, g.W_K(), &dK_[ru * m.dk], X, t.W_K_t.data(), n, m.d, m.dk);
  matmul_backward_impl(dX, g.W_V(), &dV_[ru * m.dv], X, t.W_V_t.data(), n, m.d, m.dv);
}

double ClozeBatch::forward_backward(const ClozeParameters& params, ClozeParameters& grads, int threads) {
  return run(params, grads, threads, nullptr, nullptr);
}

double ClozeBatch::update(ClozeParameters& params, ClozeParameters& grads, const AdamStep& adam, int threads) {
  return run(params, grads, threads, &adam, params.data.data());
}

// One parallel region per update: the five layer phases, then the gradient sum and (for update())
// Adam over the same parameter ranges, so no thread waits between the two and there is no second
// region to start. Sentences go to threads in a precomputed order that evens out their n^2 cost.
double ClozeBatch::run(const ClozeParameters& params, ClozeParameters& grads, int threads, const AdamStep* adam,
                       double* updated_params) {
  transposes_.update(params);
  const int sentences = static_cast<int>(sentence_begin_.size()) - 1;
  const std::size_t size = grads.data.size();
  constexpr int kPieces = 8;
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (int c = 0; c < kChunks; ++c) vocab_forward(c, params);
#pragma omp for schedule(static)
    for (int k = 0; k < sentences; ++k) sentence_forward(sentence_order_[static_cast<std::size_t>(k)], params);
#pragma omp for schedule(static)
    for (int c = 0; c < kChunks; ++c) rows_readout(c, params, transposes_);
#pragma omp for schedule(static)
    for (int k = 0; k < sentences; ++k) sentence_backward(sentence_order_[static_cast<std::size_t>(k)]);
#pragma omp for schedule(static)
    for (int c = 0; c < kChunks; ++c) rows_backward(c, transposes_);
#pragma omp for schedule(static)
    for (int piece = 0; piece < kPieces; ++piece) {
      // Block sums in a fixed order, so the result does not depend on the thread count.
      const std::size_t begin = size * piece / kPieces, end = size * (piece + 1) / kPieces;
      double* g = grads.data.data();
      std::copy(chunk_grads_[0].data.begin() + static_cast<std::ptrdiff_t>(begin),
                chunk_grads_[0].data.begin() + static_cast<std::ptrdiff_t>(end), g + begin);
      for (int c = 1; c < kChunks; ++c) {
        const double* block = chunk_grads_[static_cast<std::size_t>(c)].data.data();
        for (std::size_t i = begin; i < end; ++i) g[i] += block[i];
      }
      // The embedding gradient: dX scattered to the words' rows in token order, as the serial
      // embedding_backward would, restricted to this piece.
      const std::size_t embedding_end = std::min(end, static_cast<std::size_t>(dims_.vocab) * dims_.d);
      for (int r = 0; r < total_ && begin < embedding_end; ++r) {
        const auto d = static_cast<std::size_t>(dims_.d);
        const std::size_t row = static_cast<std::size_t>(idx_[static_cast<std::size_t>(r)]) * d;
        const double* source = &dX_[static_cast<std::size_t>(r) * d];
        for (std::size_t i = std::max(begin, row); i < std::min(embedding_end, row + d); ++i) g[i] += source[i - row];
      }
      if (adam != nullptr) {
        // Every parameter piece is read-only until the phases above are done (the barrier of the
        // last omp for), so updating it here is safe.
        adam_range(updated_params, g, adam->m->data(), adam->v->data(), begin, end,
                   adam->correction1, adam->correction2, adam->grad_scale, adam->options);
      }
    }
  }
  double loss = 0;
  for (int c = 0; c < kChunks; ++c) loss += chunk_loss_[c];
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
                        1.0 / count, options};
    const double total_loss = batch.update(params, grads, adam, std::max(1, threads));
    if (update == 1 || update % 20 == 0) result.loss_curve.emplace_back(update, total_loss / batch.tokens());
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace luong::cloze
