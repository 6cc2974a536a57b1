#pragma once
// What luong's panel kernels share: panel_products.cpp (float32, AVX-512 and AVX2 + FMA),
// bf16_panel_products.cpp (bf16: AVX512-BF16 and AMX) and bf16_rounding.cpp (float32 operands rounded
// to bf16 as they are laid out). No LibTorch here.
#include <algorithm>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace luong::models::panels {

// Panels [first_panel, last_panel) of `width` columns, each holding panel_rows rows: b's k, then zeros.
void pack_float_panels(int64_t width, const float* b, int64_t k, int64_t panel_rows, int64_t n, int64_t row_stride,
                       int64_t column_stride, float* panels, int64_t first_panel, int64_t last_panel);

// k's pairs, padded to an AMX tile's 16 rows.
inline int64_t bf16_panel_pairs(int64_t k) { return ((k + 1) / 2 + 15) / 16 * 16; }

#if defined(__x86_64__) && defined(__GNUC__)
#define LUONG_PANEL_KERNELS 1

// A tile of MR rows by one panel (3 vectors) keeps its 3 MR sums in registers across all of k: AVX-512
// has 32 registers (24 sums, 3 panel vectors, 1 broadcast), AVX2 16 (12, 3, 1).
constexpr int kAvx512Rows = 8;
constexpr int kAvx2Rows = 4;

// ---- the walk every kernel shares ----------------------------------------------------------------
// A kernel's operands and its tile: Kernel::tile<MR>(r, j, width) computes rows [r, r + MR) of c
// against the panel at column j (width of its columns real). Its sums stay in registers across all of k.
// Panels one after the other, tiles of up to Kernel::kRows rows inside each: the panel comes from
// memory for the first tile, from cache after.
template <int MR, typename Kernel>
void run_tile(const Kernel& kernel, int64_t rows, int64_t r, int64_t j, int64_t width) {
  if constexpr (MR > 1) {
    if (rows < MR) return run_tile<MR - 1>(kernel, rows, r, j, width);
  }
  kernel.template tile<MR>(r, j, width);
}

template <typename Kernel>
void walk_panels(const Kernel& kernel, int64_t m, int64_t n) {
  for (int64_t j = 0; j < n; j += Kernel::kWidth) {
    const int64_t width = std::min<int64_t>(Kernel::kWidth, n - j);
    for (int64_t r = 0; r < m; r += Kernel::kRows) {
      run_tile<Kernel::kRows>(kernel, std::min<int64_t>(Kernel::kRows, m - r), r, j, width);
    }
  }
}

// What every kernel multiplies: a's rows (A: float, or bf16 bits) against panels (P), into c, the sums
// starting from init (see panel_product).
template <typename A, typename P>
struct Operands {
  const A* a;
  int64_t lda;
  const P* panels;
  int64_t panel_k;     // the k a tile sums over: k, or k's pairs for bf16
  int64_t panel_rows;  // the k rows a panel holds: panel_k, or the pairs padded to 16 for bf16
  float* c;
  int64_t ldc;
  const float* init;
  int64_t init_ld;
  // (AMX only) rows from `split` on go to c2 and start from init2, counted from split: a second
  // row block's, whose a follows the first's
  int64_t split = INT64_MAX;
  float* c2 = nullptr;
  int64_t ldc2 = 0;
  const float* init2 = nullptr;
  int64_t init_ld2 = 0;
};

// The first min(count, 16) lanes of a 16-lane mask (none for a count of 0 or less).
inline __mmask16 first_lanes(int64_t count) {
  return static_cast<__mmask16>(count >= 16 ? 0xFFFF : count <= 0 ? 0 : (1u << count) - 1);
}

// The lanes of a 48-column panel's three vectors that hold its `width` columns.
inline void panel_masks(int64_t width, __mmask16 (&mask)[3]) {
  for (int q = 0; q < 3; ++q) mask[q] = first_lanes(width - 16 * q);
}

// A 48-column tile's sums at rows [r, r + MR), column j, in AVX-512 registers: started from init (or
// zero), stored into c, both masked to the panel's real columns. (The AVX-512 and bf16 kernels.)
template <int MR, typename A, typename P>
[[gnu::target("avx512f"), gnu::always_inline]] inline void start_sums(const Operands<A, P>& o, int64_t r, int64_t j,
                                                                      const __mmask16 (&mask)[3], __m512 (&sum)[MR][3]) {
  for (int i = 0; i < MR; ++i) {
    for (int q = 0; q < 3; ++q) {
      sum[i][q] = o.init == nullptr ? _mm512_setzero_ps()
                                    : _mm512_maskz_loadu_ps(mask[q], o.init + (r + i) * o.init_ld + j + 16 * q);
    }
  }
}
template <int MR, typename A, typename P>
[[gnu::target("avx512f"), gnu::always_inline]] inline void store_sums(const Operands<A, P>& o, int64_t r, int64_t j,
                                                                      const __mmask16 (&mask)[3], __m512 (&sum)[MR][3]) {
  for (int i = 0; i < MR; ++i) {
    for (int q = 0; q < 3; ++q) _mm512_mask_storeu_ps(o.c + (r + i) * o.ldc + j + 16 * q, mask[q], sum[i][q]);
  }
}

// ---- bf16_rounding.cpp --------------------------------------------------------------------------
// a [m, k] (a[r, p] at a[r lda + p column_stride]) rounded to bf16 (to nearest even) into rows [0, m)
// of out (row stride out_ld, each row padded with zeros from k to out_ld), by whichever kernel its
// strides suit.
void round_rows_bf16(const float* a, int64_t m, int64_t k, int64_t lda, int64_t column_stride, uint16_t* out,
                     int64_t out_ld);
// Rows 2p and 2p + 1 of a row-major bf16 b interleaved: (b[2p, c], b[2p + 1, c]).
[[gnu::target("avx2")]] void interleave_rows_avx2(const uint16_t* even, const uint16_t* odd, int64_t columns,
                                                  uint16_t* out);
// A whole panel of `panel_pairs` pairs from a float32 b, rounded as it is laid out: from a weight
// w [columns, k] read as its transpose (row stride `stride`), or from b [k, columns]'s rows.
[[gnu::target("avx512f,avx512bw,avx512vl,avx512bf16")]] void pack_rounded_transposed_panel(
    const float* w, int64_t k, int64_t columns, int64_t stride, uint16_t* panel, int64_t panel_pairs);
[[gnu::target("avx512f,avx512bw,avx512vl,avx512bf16")]] void pack_rounded_rows_panel(
    const float* b, int64_t k, int64_t columns, int64_t stride, uint16_t* panel, int64_t panel_pairs);
#endif

}  // namespace luong::models::panels
