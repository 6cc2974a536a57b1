#include "luong/models/panel_products.h"

#include <cstring>
#include <stdexcept>

#include "panel_kernels.h"

namespace luong::models {
namespace panels {
namespace {

#ifdef LUONG_PANEL_KERNELS
// ---- AVX-512: 8 rows x 48 columns -------------------------------------------------------------
struct Avx512Kernel : Operands<float, float> {
  static constexpr int kWidth = 48, kRows = kAvx512Rows;

  template <int MR>
  [[gnu::target("avx512f")]] void tile(int64_t r, int64_t j, int64_t width) const {
    __mmask16 mask[3];
    panel_masks(width, mask);
    const float* ar = a + r * lda;
    const float* panel = panels + j * panel_rows;
    __m512 sum[MR][3];
    start_sums<MR>(*this, r, j, mask, sum);
    for (int64_t p = 0; p < panel_k; ++p) {
      const float* b = panel + p * 48;
      const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), b2 = _mm512_loadu_ps(b + 32);
      for (int i = 0; i < MR; ++i) {
        const __m512 x = _mm512_set1_ps(ar[i * lda + p]);
        sum[i][0] = _mm512_fmadd_ps(x, b0, sum[i][0]);
        sum[i][1] = _mm512_fmadd_ps(x, b1, sum[i][1]);
        sum[i][2] = _mm512_fmadd_ps(x, b2, sum[i][2]);
      }
    }
    store_sums<MR>(*this, r, j, mask, sum);
  }
};

// ---- AVX2 + FMA: 4 rows x 24 columns ----------------------------------------------------------
struct Avx2Kernel : Operands<float, float> {
  static constexpr int kWidth = 24, kRows = kAvx2Rows;

  template <int MR>
  [[gnu::target("avx2,fma")]] void tile(int64_t r, int64_t j, int64_t width) const {
    __m256i mask[3];
    for (int q = 0; q < 3; ++q) {
      const int lanes = static_cast<int>(std::clamp<int64_t>(width - 8 * q, 0, 8));
      mask[q] = _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }
    const float* ar = a + r * lda;
    const float* panel = panels + j * panel_rows;
    __m256 sum[MR][3];
    for (int i = 0; i < MR; ++i) {
      for (int q = 0; q < 3; ++q) {
        sum[i][q] = init == nullptr ? _mm256_setzero_ps()
                                    : _mm256_maskload_ps(init + (r + i) * init_ld + j + 8 * q, mask[q]);
      }
    }
    for (int64_t p = 0; p < panel_k; ++p) {
      const float* b = panel + p * 24;
      const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), b2 = _mm256_loadu_ps(b + 16);
      for (int i = 0; i < MR; ++i) {
        const __m256 x = _mm256_broadcast_ss(ar + i * lda + p);
        sum[i][0] = _mm256_fmadd_ps(x, b0, sum[i][0]);
        sum[i][1] = _mm256_fmadd_ps(x, b1, sum[i][1]);
        sum[i][2] = _mm256_fmadd_ps(x, b2, sum[i][2]);
      }
    }
    for (int i = 0; i < MR; ++i) {
      for (int q = 0; q < 3; ++q) _mm256_maskstore_ps(c + (r + i) * ldc + j + 8 * q, mask[q], sum[i][q]);
    }
  }
};

// ---- laying out a transposed weight ------------------------------------------------------------
// The eight rows r[0..7] of an 8 x 8 block become its eight columns.
[[gnu::target("avx2,fma"), gnu::always_inline]] inline void transpose_8x8(__m256 (&r)[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20), r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20), r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31), r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31), r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Columns [0, columns) (a multiple of 8) of a panel from w's rows (w [columns, k], row stride
// `stride`): panel[i * width + c] = w[c * stride + i]. Twice as fast as the element loop.
[[gnu::target("avx2,fma")]] void pack_transposed_avx2(const float* w, int64_t k, int64_t columns, int64_t stride,
                                                      float* panel, int64_t width) {
  for (int64_t c = 0; c < columns; c += 8) {
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
      __m256 r[8];
      for (int q = 0; q < 8; ++q) r[q] = _mm256_loadu_ps(w + (c + q) * stride + i);
      transpose_8x8(r);
      for (int q = 0; q < 8; ++q) _mm256_storeu_ps(panel + (i + q) * width + c, r[q]);
    }
    for (; i < k; ++i) {
      for (int q = 0; q < 8; ++q) panel[i * width + c + q] = w[(c + q) * stride + i];
    }
  }
}
#endif

}  // namespace

// Panels [first_panel, last_panel) of `width` columns, each holding panel_rows rows: b's k, then zeros.
void pack_float_panels(int64_t width, const float* b, int64_t k, int64_t panel_rows, int64_t n, int64_t row_stride,
                       int64_t column_stride, float* panels, int64_t first_panel, int64_t last_panel) {
  for (int64_t p = first_panel; p < last_panel; ++p) {
    const int64_t j = p * width, columns = std::min(width, n - j);
    float* panel = panels + j * panel_rows;
    int64_t done = 0;  // columns laid out
    if (column_stride == 1) {  // rows of b are contiguous: a copy per k
      for (int64_t i = 0; i < k; ++i) {
        std::memcpy(panel + i * width, b + i * row_stride + j, sizeof(float) * static_cast<std::size_t>(columns));
      }
      done = columns;
    }
#ifdef LUONG_PANEL_KERNELS
    else if (row_stride == 1) {  // a weight read as its transpose: 8 x 8 blocks transposed in registers
      done = columns / 8 * 8;
      pack_transposed_avx2(b + j * column_stride, k, done, column_stride, panel, width);
    }
#endif
    for (int64_t c = done; c < columns; ++c) {
      for (int64_t i = 0; i < k; ++i) panel[i * width + c] = b[i * row_stride + (j + c) * column_stride];
    }
    for (int64_t i = 0; i < k; ++i) std::fill(panel + i * width + columns, panel + (i + 1) * width, 0.0f);
    std::fill(panel + k * width, panel + panel_rows * width, 0.0f);
  }
}

}  // namespace panels

using namespace panels;

PanelIsa panel_isa_here() {
#ifdef LUONG_PANEL_KERNELS
  static const PanelIsa isa = __builtin_cpu_supports("avx512f")                                     ? PanelIsa::kAvx512
                              : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? PanelIsa::kAvx2
                                                                                                  : PanelIsa::kNone;
  return isa;
#else
  return PanelIsa::kNone;
#endif
}

int64_t panel_width(PanelIsa isa) { return isa == PanelIsa::kAvx512 ? 48 : isa == PanelIsa::kAvx2 ? 24 : 0; }

int64_t panel_floats(PanelIsa isa, int64_t k, int64_t n) {
  const int64_t width = panel_width(isa);
  return width == 0 ? 0 : (n + width - 1) / width * width * k;
}

void pack_panels(PanelIsa isa, const float* b, int64_t k, int64_t n, int64_t row_stride, int64_t column_stride,
                 float* panels, int64_t first_panel, int64_t last_panel) {
  pack_float_panels(panel_width(isa), b, k, k, n, row_stride, column_stride, panels, first_panel, last_panel);
}

void panel_product(PanelIsa isa, const float* a, int64_t m, int64_t k, int64_t lda, const float* panels, int64_t n,
                   float* c, int64_t ldc, const float* init, int64_t init_ld) {
#ifdef LUONG_PANEL_KERNELS
  const Operands<float, float> operands{a, lda, panels, k, k, c, ldc, init, init_ld};
  if (isa == PanelIsa::kAvx512) return walk_panels(Avx512Kernel{operands}, m, n);
  if (isa == PanelIsa::kAvx2) return walk_panels(Avx2Kernel{operands}, m, n);
#endif
  (void)a, (void)m, (void)k, (void)lda, (void)panels, (void)n, (void)c, (void)ldc, (void)init, (void)init_ld;
  throw std::invalid_argument("panel_product: no panel kernel for this processor");
}


}  // namespace luong::models
