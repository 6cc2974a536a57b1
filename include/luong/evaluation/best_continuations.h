#pragma once
// Beam search's selection step on the CPU, in one read of the step's log-probabilities: what LibTorch
// does as a conversion to double, an addition of each beam's score and a top-k over beams x vocabulary
// (three passes over the largest tensor of the step, which cost more than the vocabulary projection at
// the notebook's sizes). Raw pointers, no LibTorch; compiled for AVX-512, AVX2 + FMA and baseline x86-64.
#include <cstdint>

namespace luong::evaluation {

/// For each of `sentences` sentences with `beams` rows each: log_probs [sentences * beams, vocab]
/// (contiguous), base [sentences * beams] (each row's log-probability so far; -inf for an unused row)
/// -> the `count` best continuations, best first: values[s * count + i] = base[row] + log_probs[row, token]
/// computed in double, indices[s * count + i] = beam * vocab + token. Equal values keep the smaller
/// index first. Candidates whose value is -inf or NaN are never chosen; where fewer than `count` remain,
/// the rest are -inf with index -1. Sentences [first_sentence, last_sentence) only, so callers can split
/// the work across threads. When `maxima` and `log_sums` are given (models/row_exponentials.h's
/// log_sum_exponentials of each row), `log_probs` holds logits, and each one's log-probability is
/// (x - maxima[row]) - log_sums[row] in T, as LibTorch's log_softmax computes it.
void best_continuations(const float* log_probs, const double* base, int64_t beams, int64_t vocab, int64_t count,
                        int64_t first_sentence, int64_t last_sentence, double* values, int64_t* indices,
                        const float* maxima = nullptr, const float* log_sums = nullptr);
void best_continuations(const double* log_probs, const double* base, int64_t beams, int64_t vocab, int64_t count,
                        int64_t first_sentence, int64_t last_sentence, double* values, int64_t* indices,
                        const double* maxima = nullptr, const double* log_sums = nullptr);

}  // namespace luong::evaluation
