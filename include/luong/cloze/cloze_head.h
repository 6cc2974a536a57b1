#pragma once
// One self-attention head trained as a cloze task, with a hand-written backward pass, in the style of
// karpathy/llm.c: every `<layer>_forward` has a `<layer>_backward` beside it, shapes are in the
// comments, all arrays are row-major doubles, and every backward *accumulates* (+=) into its
// gradient buffers, so callers zero them first.
//
// These layers (cloze_reference.cpp) are the readable reference: plain loops, portable C++. The
// training runs the same layers in cloze_kernels.h, rounded exactly as the seed's numpy rounds them
// (OpenBLAS's dgemm order, numpy's pairwise sums, glibc's exp), so that the chaotic run follows the
// seed's trajectory to the last bit; cloze_forward_backward() reaches either.
//
//   X = E[idx]                    (n, d)
//   Q = X W_Q, K = X W_K, V = X W_V
//   S = Q K^T / sqrt(d_k), S_ii = -1e9
//   A = softmax_rows(S)           (n, n)
//   Z = A V                       (n, d_v)
//   scores = Z W_O                (n, vocab)
//   P = softmax_rows(scores); loss = -sum_i log(P[i, idx_i] + 1e-12)
#include <cstddef>
#include <vector>

namespace luong::cloze {

// ---- layer pairs -------------------------------------------------------------------------------

/// X[n,d] = E[idx[i], :]
void embedding_forward(double* X, const double* E, const int* idx, int n, int d);
/// dE[idx[i], :] += dX[i, :] (scatter-add: a token repeated in a sentence gets every position's share)
void embedding_backward(double* dE, const double* dX, const int* idx, int n, int d);

/// out[n,m] = a[n,k] @ b[k,m]
void matmul_forward(double* out, const double* a, const double* b, int n, int k, int m);
/// da[n,k] += dout[n,m] @ b^T (b_t: b transposed, [m,k]); db[k,m] += a^T @ dout. Either may be null.
void matmul_backward(double* da, double* db, const double* dout, const double* a, const double* b_t, int n, int k,
                     int m);

/// P[rows,cols] = softmax of each row of S (max-subtracted, like the seed).
void softmax_rows_forward(double* P, const double* S, int rows, int cols);
/// dS[rows,cols] += P * (dP - rowsum(dP * P))
void softmax_rows_backward(double* dS, const double* dP, const double* P, int rows, int cols);

/// S[n,n] = Q K^T / sqrt(dk) with the diagonal set to -1e9 (a token may not attend to itself).
void attention_scores_forward(double* S, const double* Q, const double* K, int n, int dk);
/// dQ[n,dk] += dS K / sqrt(dk); dK[n,dk] += dS^T Q / sqrt(dk). The masked diagonal gets no gradient:
/// dS's diagonal is set to 0 first, as the seed's np.where does.
void attention_scores_backward(double* dQ, double* dK, double* dS, const double* Q, const double* K, int n,
                               int dk);

/// loss = -sum_i log(P[i, targets[i]] + 1e-12) over P[n,vocab] (the seed's formula).
double cross_entropy_forward(const double* P, const int* targets, int n, int vocab);
/// dscores[n,vocab] += P - onehot(targets): the gradient of softmax + negative log-likelihood.
void cross_entropy_backward(double* dscores, const double* P, const int* targets, int n, int vocab);

// ---- the model ---------------------------------------------------------------------------------

struct ClozeDims {
  int vocab = 98;
  int d = 24;
  int dk = 24;
  int dv = 24;
};

/// E [vocab,d], W_Q [d,dk], W_K [d,dk], W_V [d,dv], W_O [dv,vocab] in one buffer (gradients and Adam
/// moments use the same layout).
struct ClozeParameters {
  explicit ClozeParameters(const ClozeDims& dims);
  ClozeDims dims;
  std::vector<double> data;
  double* E() { return data.data(); }
  double* W_Q() { return E() + static_cast<std::size_t>(dims.vocab) * dims.d; }
  double* W_K() { return W_Q() + static_cast<std::size_t>(dims.d) * dims.dk; }
  double* W_V() { return W_K() + static_cast<std::size_t>(dims.d) * dims.dk; }
  double* W_O() { return W_V() + static_cast<std::size_t>(dims.d) * dims.dv; }
  const double* E() const { return const_cast<ClozeParameters*>(this)->E(); }
  const double* W_Q() const { return const_cast<ClozeParameters*>(this)->W_Q(); }
  const double* W_K() const { return const_cast<ClozeParameters*>(this)->W_K(); }
  const double* W_V() const { return const_cast<ClozeParameters*>(this)->W_V(); }
  const double* W_O() const { return const_cast<ClozeParameters*>(this)->W_O(); }
  static constexpr const char* kNames[5] = {"E", "W_Q", "W_K", "W_V", "W_O"};
  /// The five tensors as (offset, rows, cols), in kNames order.
  struct Slice {
    std::size_t offset;
    int rows;
    int cols;
  };
  Slice slice(int which) const;
};

/// Initialisation as the seed: 0.1 * np.random.randn for E, W_Q, W_K, W_V, W_O in that order after
/// np.random.seed(seed).
void init_numpy(ClozeParameters& params, unsigned seed = 0);

/// The two implementations of the same function.
enum class ClozeKernels {
  kReference,   ///< the layer pairs above (cloze_reference.cpp)
  kNumpyExact,  ///< rounded as the seed's numpy (cloze_kernels.h): what training runs
};

/// Forward and backward for one sentence idx[0..n): returns the loss summed over its tokens and
/// accumulates d(loss)/d(parameters) into `grads`.
double cloze_forward_backward(ClozeKernels kernels, const ClozeParameters& params, const int* idx, int n,
                              ClozeParameters& grads);

/// The reference forward and backward of one sentence (what cloze_forward_backward(kReference) runs).
double cloze_forward_backward_reference(const ClozeParameters& params, const int* idx, int n, ClozeParameters& grads);

struct AdamOptions {
  double lr = 0.02;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

}  // namespace luong::cloze
