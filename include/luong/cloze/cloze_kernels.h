#pragma once
// The cloze head's layers rounded exactly as the seed's numpy rounds them on x86-64 with FMA
// (Debian 12: numpy 1.24 on OpenBLAS 0.3.21, glibc's exp and log), and the seed's training on top:
// the whole corpus as one batch with its sentences on threads. The same function as the reference
// layers of cloze_head.h; the arithmetic is portable C++ (explicit std::fma), compiled for AVX-512,
// AVX2 + FMA and baseline where the compiler targets x86-64 (util/target_clones.h).
#include <cstddef>
#include <utility>
#include <vector>

#include "luong/cloze/cloze_head.h"

namespace luong::cloze {

/// Transposed weights for the backward pass, refreshed once per update.
struct ClozeTransposes {
  std::vector<double> W_Q_t, W_K_t, W_V_t, W_O_t;
  void update(const ClozeParameters& p);
};

/// Per-sentence activations (sized for the longest sentence).
struct ClozeWorkspace {
  ClozeWorkspace(const ClozeDims& dims, int max_tokens);
  std::vector<double> X, Q, K, K_t, V, V_t, S, A, Z, scores, P;
  std::vector<double> dX, dQ, dK, dV, dS, dA, dZ, dscores;
};

/// cloze_forward_backward(kNumpyExact) with the caller's transposes and workspace.
double numpy_exact_forward_backward(const ClozeParameters& params, const ClozeTransposes& transposes, const int* idx,
                                    int n, ClozeParameters& grads, ClozeWorkspace& ws);

/// Forward only: the attention matrix A [n,n] of one sentence (for the display heat map), rounded
/// as numpy.
std::vector<double> cloze_attention(const ClozeParameters& params, const int* idx, int n);

/// out[n,m] = a[n,k] @ b[k,m] rounded as numpy's matmul (OpenBLAS's dgemm; see cloze_kernels.cpp).
void numpy_matmul(double* out, const double* a, const double* b, int n, int k, int m);

/// The whole corpus as one batch: the sentences run in parallel, each into its own gradient
/// buffers; then the gradients are summed in sentence order (and Adam applied) over parameter
/// ranges in parallel. The result is bit-identical to the seed's serial loop for any thread count.
class ClozeBatch {
 public:
  ClozeBatch(const ClozeDims& dims, const std::vector<std::vector<int>>& sentences);

  /// Sets `grads` to d(loss)/d(parameters) summed over all sentences; returns the summed loss.
  double forward_backward(const ClozeParameters& params, ClozeParameters& grads, int threads);

  /// One Adam step of the seed's training.
  struct AdamStep {
    std::vector<double>* m;
    std::vector<double>* v;
    double correction1, correction2;  ///< 1 - beta1^step, 1 - beta2^step
    double sentences;                 ///< the gradient is averaged over sentences (divided by this)
    AdamOptions options;
  };
  /// forward_backward, then the Adam step on `params`, in one parallel region.
  double update(ClozeParameters& params, ClozeParameters& grads, const AdamStep& adam, int threads);

  int tokens() const { return total_; }

 private:
  /// updated_params: params' own buffer when `adam` is given (params are read-only until then).
  double run(const ClozeParameters& params, ClozeParameters& grads, int threads, const AdamStep* adam,
             double* updated_params);
  void sentence_pass(int sentence, const ClozeParameters& params, ClozeWorkspace& ws);

  ClozeDims dims_;
  std::vector<int> idx_;                // all token ids, sentence after sentence
  std::vector<int> sentence_begin_;     // size sentences + 1
  std::vector<int> sentence_order_;     // longest first: the order threads take sentences in
  int total_ = 0;
  int longest_ = 0;
  std::vector<double> sentence_weights_;  // per sentence: its W_Q, W_K, W_V, W_O gradients
  std::vector<double> sentence_loss_;
  std::vector<double> dX_;                // [tokens, d]: d(loss)/dX of every token
  std::vector<ClozeWorkspace> workspaces_;  // one per thread
  ClozeTransposes transposes_;
};

struct ClozeTrainResult {
  std::vector<std::pair<int, double>> loss_curve;  ///< (update, mean loss per token): update 1 and every 20th
  double seconds = 0;
};

/// The seed's training loop: `updates` full-corpus Adam steps with the gradient averaged over
/// sentences. Sentences run on `threads` threads, each into its own gradient buffer, summed in
/// sentence order so the result does not depend on the thread count.
ClozeTrainResult train_cloze(ClozeParameters& params, const std::vector<std::vector<int>>& sentences, int updates,
                             int threads, const AdamOptions& options = {});

}  // namespace luong::cloze
