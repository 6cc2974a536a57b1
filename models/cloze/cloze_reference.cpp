// The cloze head's layers written plainly: each output a loop over its inputs, one layer after the
// other. The reference that cloze_kernels.cpp's numpy-exact versions are tested against (and that
// autograd checks, in tests/cloze_test.cpp and `luong gradcheck`).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "luong/cloze/cloze_head.h"
#include "luong/cloze/numpy_random.h"

namespace luong::cloze {

// ---- layer pairs -------------------------------------------------------------------------------

void embedding_forward(double* X, const double* E, const int* idx, int n, int d) {
  for (int i = 0; i < n; ++i) std::memcpy(X + i * d, E + static_cast<std::size_t>(idx[i]) * d, sizeof(double) * d);
}

void embedding_backward(double* dE, const double* dX, const int* idx, int n, int d) {
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) dE[static_cast<std::size_t>(idx[i]) * d + j] += dX[i * d + j];
  }
}

void matmul_forward(double* out, const double* a, const double* b, int n, int k, int m) {
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < m; ++j) {
      double sum = 0;
      for (int kk = 0; kk < k; ++kk) sum += a[i * k + kk] * b[kk * m + j];
      out[i * m + j] = sum;
    }
  }
}

void matmul_backward(double* da, double* db, const double* dout, const double* a, const double* b_t, int n, int k,
                     int m) {
  if (da != nullptr) {  // da[i, kk] += sum_j dout[i, j] b[kk, j]
    for (int i = 0; i < n; ++i) {
      for (int kk = 0; kk < k; ++kk) {
        double sum = 0;
        for (int j = 0; j < m; ++j) sum += dout[i * m + j] * b_t[j * k + kk];
        da[i * k + kk] += sum;
      }
    }
  }
  if (db != nullptr) {  // db[kk, j] += sum_i a[i, kk] dout[i, j]
    for (int kk = 0; kk < k; ++kk) {
      for (int j = 0; j < m; ++j) {
        double sum = 0;
        for (int i = 0; i < n; ++i) sum += a[i * k + kk] * dout[i * m + j];
        db[kk * m + j] += sum;
      }
    }
  }
}

void softmax_rows_forward(double* P, const double* S, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const double top = *std::max_element(S + r * cols, S + (r + 1) * cols);
    double sum = 0;
    for (int c = 0; c < cols; ++c) sum += P[r * cols + c] = std::exp(S[r * cols + c] - top);
    for (int c = 0; c < cols; ++c) P[r * cols + c] /= sum;
  }
}

void softmax_rows_backward(double* dS, const double* dP, const double* P, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    double dot = 0;
    for (int c = 0; c < cols; ++c) dot += dP[r * cols + c] * P[r * cols + c];
    for (int c = 0; c < cols; ++c) dS[r * cols + c] += P[r * cols + c] * (dP[r * cols + c] - dot);
  }
}

void attention_scores_forward(double* S, const double* Q, const double* K, int n, int dk) {
  const double root = std::sqrt(static_cast<double>(dk));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      double dot = 0;
      for (int c = 0; c < dk; ++c) dot += Q[i * dk + c] * K[j * dk + c];
      S[i * n + j] = i == j ? -1e9 : dot / root;
    }
  }
}

void attention_scores_backward(double* dQ, double* dK, double* dS, const double* Q, const double* K, int n, int dk) {
  const double root = std::sqrt(static_cast<double>(dk));
  for (int i = 0; i < n; ++i) dS[i * n + i] = 0.0;  // the masked score was a constant
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const double g = dS[i * n + j] / root;
      for (int c = 0; c < dk; ++c) {
        dQ[i * dk + c] += g * K[j * dk + c];
        dK[j * dk + c] += g * Q[i * dk + c];
      }
    }
  }
}

double cross_entropy_forward(const double* P, const int* targets, int n, int vocab) {
  double loss = 0;
  for (int i = 0; i < n; ++i) loss -= std::log(P[i * vocab + targets[i]] + 1e-12);
  return loss;
}

void cross_entropy_backward(double* dscores, const double* P, const int* targets, int n, int vocab) {
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < vocab; ++c) dscores[i * vocab + c] += P[i * vocab + c];
    dscores[i * vocab + targets[i]] -= 1.0;
  }
}

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


void init_numpy(ClozeParameters& params, unsigned seed) {
  NumpyRandom rng(seed);
  for (double& value : params.data) value = 0.1 * rng.gauss();  // E, W_Q, W_K, W_V, W_O are contiguous in draw order
}

namespace {

std::vector<double> transposed(const double* a, int rows, int cols) {
  std::vector<double> t(static_cast<std::size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) t[static_cast<std::size_t>(c) * rows + r] = a[r * cols + c];
  }
  return t;
}

}  // namespace

double cloze_forward_backward_reference(const ClozeParameters& params, const int* idx, int n, ClozeParameters& grads) {
  const ClozeDims& m = params.dims;
  const auto size = [n](int cols) { return static_cast<std::size_t>(n) * cols; };
  std::vector<double> X(size(m.d)), Q(size(m.dk)), K(size(m.dk)), V(size(m.dv)), S(size(n)), A(size(n)), Z(size(m.dv)),
      scores(size(m.vocab)), P(size(m.vocab));
  // forward
  embedding_forward(X.data(), params.E(), idx, n, m.d);                          // X (n, d)
  matmul_forward(Q.data(), X.data(), params.W_Q(), n, m.d, m.dk);                // Q (n, dk)
  matmul_forward(K.data(), X.data(), params.W_K(), n, m.d, m.dk);                // K (n, dk)
  matmul_forward(V.data(), X.data(), params.W_V(), n, m.d, m.dv);                // V (n, dv)
  attention_scores_forward(S.data(), Q.data(), K.data(), n, m.dk);               // S (n, n)
  softmax_rows_forward(A.data(), S.data(), n, n);                                // A (n, n)
  matmul_forward(Z.data(), A.data(), V.data(), n, n, m.dv);                      // Z (n, dv)
  matmul_forward(scores.data(), Z.data(), params.W_O(), n, m.dv, m.vocab);       // scores (n, vocab)
  softmax_rows_forward(P.data(), scores.data(), n, m.vocab);                     // P (n, vocab)
  const double loss = cross_entropy_forward(P.data(), idx, n, m.vocab);
  // backward, in reverse; every gradient buffer starts from zero
  std::vector<double> dscores(size(m.vocab)), dZ(size(m.dv)), dA(size(n)), dV(size(m.dv)), dS(size(n)), dQ(size(m.dk)),
      dK(size(m.dk)), dX(size(m.d));
  cross_entropy_backward(dscores.data(), P.data(), idx, n, m.vocab);
  matmul_backward(dZ.data(), grads.W_O(), dscores.data(), Z.data(), transposed(params.W_O(), m.dv, m.vocab).data(), n,
                  m.dv, m.vocab);
  matmul_backward(dA.data(), dV.data(), dZ.data(), A.data(), transposed(V.data(), n, m.dv).data(), n, n, m.dv);
  softmax_rows_backward(dS.data(), dA.data(), A.data(), n, n);
  attention_scores_backward(dQ.data(), dK.data(), dS.data(), Q.data(), K.data(), n, m.dk);
  matmul_backward(dX.data(), grads.W_Q(), dQ.data(), X.data(), transposed(params.W_Q(), m.d, m.dk).data(), n, m.d, m.dk);
  matmul_backward(dX.data(), grads.W_K(), dK.data(), X.data(), transposed(params.W_K(), m.d, m.dk).data(), n, m.d, m.dk);
  matmul_backward(dX.data(), grads.W_V(), dV.data(), X.data(), transposed(params.W_V(), m.d, m.dv).data(), n, m.d, m.dv);
  embedding_backward(grads.E(), dX.data(), idx, n, m.d);
  return loss;
}

}  // namespace luong::cloze
