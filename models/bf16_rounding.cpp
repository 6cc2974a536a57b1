#include "panel_kernels.h"

#ifdef LUONG_PANEL_KERNELS
#include <cstring>

namespace luong::models::panels {
namespace {

// ---- a's rows rounded to bf16 (to nearest even) --------------------------------------------------
// Each writes rows [0, m) of out (row stride out_ld, each row padded with zeros from k to out_ld).

// Rows of unit column stride (a step's rows, a batch's inputs), streamed row by row, 32 values a turn.
[[gnu::target("avx512f,avx512bw,avx512vl,avx512bf16")]] void round_dense_rows_bf16(const float* a, int64_t m,
                                                                                  int64_t k, int64_t lda,
                                                                                  uint16_t* out, int64_t out_ld) {
  for (int64_t r = 0; r < m; ++r) {
    const float* row = a + r * lda;
    uint16_t* rounded = out + r * out_ld;
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
      const __m512bh pair = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + i + 16), _mm512_loadu_ps(row + i));
      _mm512_storeu_si512(rounded + i, reinterpret_cast<__m512i>(pair));
    }
    for (; i < k; i += 16) {
      const auto lanes = first_lanes(k - i);
      _mm256_mask_storeu_epi16(rounded + i, lanes,
                               reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lanes, row + i))));
    }
    std::fill(rounded + k, rounded + out_ld, uint16_t{0});
  }
}

// (GCC 12 takes the undefined vector that its shuffle intrinsics start from for an uninitialised
// variable of this code's)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The rows of a 16 x 16 block become its columns (in place).
[[gnu::target("avx512f"), gnu::always_inline]] inline void transpose_16x16(__m512 (&v)[16]) {
  __m512 t[16];
  for (int q = 0; q < 16; q += 2) {
    t[q] = _mm512_unpacklo_ps(v[q], v[q + 1]);
    t[q + 1] = _mm512_unpackhi_ps(v[q], v[q + 1]);
  }
  for (int q = 0; q < 16; q += 4) {
    v[q] = _mm512_shuffle_ps(t[q], t[q + 2], 0x44);
    v[q + 1] = _mm512_shuffle_ps(t[q], t[q + 2], 0xEE);
    v[q + 2] = _mm512_shuffle_ps(t[q + 1], t[q + 3], 0x44);
    v[q + 3] = _mm512_shuffle_ps(t[q + 1], t[q + 3], 0xEE);
  }
  for (int q = 0; q < 4; ++q) {
    t[q] = _mm512_shuffle_f32x4(v[q], v[q + 4], 0x88);
    t[q + 4] = _mm512_shuffle_f32x4(v[q], v[q + 4], 0xDD);
    t[q + 8] = _mm512_shuffle_f32x4(v[q + 8], v[q + 12], 0x88);
    t[q + 12] = _mm512_shuffle_f32x4(v[q + 8], v[q + 12], 0xDD);
  }
  for (int q = 0; q < 4; ++q) {
    v[q] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0x88);
    v[q + 8] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0xDD);
    v[q + 4] = _mm512_shuffle_f32x4(t[q + 4], t[q + 12], 0x88);
    v[q + 12] = _mm512_shuffle_f32x4(t[q + 4], t[q + 12], 0xDD);
  }
}

// Columns of unit stride (lda 1: a weight gradient's transposed a, whose columns are the rows of the
// tensor it transposes): 16 x 16 blocks loaded as those rows and transposed in registers, faster
// than gathering a's rows value by value.
[[gnu::target("avx512f,avx512bw,avx512vl,avx512bf16")]] void round_transposed_rows_bf16(const float* a, int64_t m,
                                                                                       int64_t k,
                                                                                       int64_t column_stride,
                                                                                       uint16_t* out, int64_t out_ld) {
  for (int64_t r0 = 0; r0 < m; r0 += 16) {
    const int64_t rows = std::min<int64_t>(16, m - r0);
    const auto row_lanes = first_lanes(rows);
    for (int64_t p0 = 0; p0 < k; p0 += 16) {
      const int64_t values = std::min<int64_t>(16, k - p0);
      __m512 block[16];
      for (int64_t q = 0; q < 16; ++q) {
        block[q] = q < values ? _mm512_maskz_loadu_ps(row_lanes, a + (p0 + q) * column_stride + r0) : _mm512_setzero_ps();
      }
      transpose_16x16(block);
      const auto lanes = first_lanes(values);
      for (int64_t q = 0; q < rows; ++q) {
        _mm256_mask_storeu_epi16(out + (r0 + q) * out_ld + p0, lanes, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(block[q])));
      }
    }
    for (int64_t r = r0; r < r0 + rows; ++r) std::fill(out + r * out_ld + k, out + (r + 1) * out_ld, uint16_t{0});
  }
}

#pragma GCC diagnostic pop

// Any other strides: 16 values of a row gathered at a time, 16 rows by 16 values a turn, so that a
// turn's gathers read the same 16 cache lines and pages (row by row over the whole k, each row's
// gathers would stride through megabytes).
[[gnu::target("avx512f,avx512bw,avx512vl,avx512bf16")]] void round_gathered_rows_bf16(const float* a, int64_t m,
                                                                                     int64_t k, int64_t lda,
                                                                                     int64_t column_stride,
                                                                                     uint16_t* out, int64_t out_ld) {
  const __m512i index = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(static_cast<int>(column_stride)));
  for (int64_t r0 = 0; r0 < m; r0 += 16) {
    const int64_t r_end = std::min<int64_t>(m, r0 + 16);
    for (int64_t i = 0; i < k; i += 16) {
      const auto lanes = first_lanes(k - i);
      for (int64_t r = r0; r < r_end; ++r) {
        const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lanes, index, a + r * lda + i * column_stride, 4);
        _mm256_mask_storeu_epi16(out + r * out_ld + i, lanes, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
      }
    }
    for (int64_t r = r0; r < r_end; ++r) std::fill(out + r * out_ld + k, out + (r + 1) * out_ld, uint16_t{0});
  }
}

}  // namespace

// a [m, k] (a[r, p] at a[r lda + p column_stride]) rounded into out by whichever of the three its
// strides suit; the same values whichever runs (PanelProductsTest holds them to each other).
void round_rows_bf16(const float* a, int64_t m, int64_t k, int64_t lda, int64_t column_stride, uint16_t* out,
                     int64_t out_ld) {
  if (column_stride == 1 || k == 1) return round_dense_rows_bf16(a, m, k, lda, out, out_ld);
  if (lda == 1 || m == 1) return round_transposed_rows_bf16(a, m, k, column_stride, out, out_ld);
  round_gathered_rows_bf16(a, m, k, lda, column_stride, out, out_ld);
}

// Rows 2p and 2p + 1 of a row-major bf16 b interleaved, 8 columns at a time: (b[2p, c], b[2p + 1, c]).
[[gnu::target("avx2")]] void interleave_rows_avx2(const uint16_t* even, const uint16_t* odd, int64_t columns,
                                                  uint16_t* out) {
  int64_t c = 0;
  for (; c + 8 <= columns; c += 8) {
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(even + c));
    const __m128i o = _mm_loadu_si128(reinterpret_cast<const __m128i*>(odd + c));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * c), _mm_unpacklo_epi16(e, o));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * c + 8), _mm_unpackhi_epi16(e, o));
  }
  for (; c < columns; ++c) out[2 * c] = even[c], out[2 * c + 1] = odd[c];
}

// ---- a float32 b rounded straight into one bf16 panel ----------------------------------------------
// Each lays out a whole panel of `panel_pairs` pairs (its zero columns and pairs too), as
// pack_bf16_panels does. One pass from b to the panel, where rounding into a buffer and laying the
// buffer out went through the values three times.

// A weight w [columns, k] read as its transpose (panel column c is w's row c, row stride `stride`):
// a pair (w[c, 2i], w[c, 2i + 1]) is one 32-bit word, so 16 rows by 32 values rounded into 16 rows of
// 16 words are a 16 x 16 block of words, transposed in registers into 16 pairs by 16 columns.
[[gnu::target("avx512f,avx512bw,avx512vl,avx512bf16")]] void pack_rounded_transposed_panel(const float* w, int64_t k,
                                                                                          int64_t columns,
                                                                                          int64_t stride,
                                                                                          uint16_t* panel,
                                                                                          int64_t panel_pairs) {
  const int64_t pairs = (k + 1) / 2;
  for (int64_t c0 = 0; c0 < 48; c0 += 16) {
    const int64_t rows = std::clamp<int64_t>(columns - c0, 0, 16);
    for (int64_t i0 = 0; i0 < pairs; i0 += 16) {
      const int64_t p0 = 2 * i0;
      const auto low_lanes = first_lanes(k - p0), high_lanes = first_lanes(k - p0 - 16);
      __m512 block[16];
      for (int64_t q = 0; q < 16; ++q) {
        if (q < rows) {
          const float* row = w + (c0 + q) * stride + p0;
          block[q] = reinterpret_cast<__m512>(
              _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(high_lanes, row + 16), _mm512_maskz_loadu_ps(low_lanes, row)));
        } else {
          block[q] = _mm512_setzero_ps();
        }
      }
      transpose_16x16(block);
      const int64_t block_pairs = std::min<int64_t>(16, pairs - i0);
      for (int64_t q = 0; q < block_pairs; ++q) _mm512_storeu_ps(panel + (i0 + q) * 96 + 2 * c0, block[q]);
    }
  }
  std::fill(panel + pairs * 96, panel + panel_pairs * 96, uint16_t{0});
}

// Rows of unit column stride (b [k, columns], row stride `stride`): rows 2i and 2i + 1 rounded
// together (the first's 16 values, then the second's) and interleaved by one permutation.
[[gnu::target("avx512f,avx512bw,avx512vl,avx512bf16")]] void pack_rounded_rows_panel(const float* b, int64_t k,
                                                                                    int64_t columns, int64_t stride,
                                                                                    uint16_t* panel,
                                                                                    int64_t panel_pairs) {
  static constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                               8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_loadu_si512(kInterleave);
  __mmask16 lanes[3];
  panel_masks(columns, lanes);
  const int64_t pairs = (k + 1) / 2;
  for (int64_t i = 0; i < pairs; ++i) {
    const float* even = b + 2 * i * stride;
    const bool second = 2 * i + 1 < k;
    for (int64_t c0 = 0, block = 0; c0 < 48; c0 += 16, ++block) {
      const __m512 high = second ? _mm512_maskz_loadu_ps(lanes[block], even + stride + c0) : _mm512_setzero_ps();
      const __m512bh rounded = _mm512_cvtne2ps_pbh(high, _mm512_maskz_loadu_ps(lanes[block], even + c0));
      _mm512_storeu_si512(panel + i * 96 + 2 * c0, _mm512_permutexvar_epi16(interleave, reinterpret_cast<__m512i>(rounded)));
    }
  }
  std::fill(panel + pairs * 96, panel + panel_pairs * 96, uint16_t{0});
}

}  // namespace luong::models::panels
#endif
