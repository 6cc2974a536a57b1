#include "luong/models/panel_products.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace luong::models {
namespace {

// A tile of MR rows by one panel (3 vectors) keeps its 3 MR sums in registers across all of k: AVX-512
// has 32 registers (24 sums, 3 panel vectors, 1 broadcast), AVX2 16 (12, 3, 1).
constexpr int kAvx512Rows = 8;
constexpr int kAvx2Rows = 4;

#if defined(__x86_64__) && defined(__GNUC__)
#define LUONG_PANEL_KERNELS 1

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

// ---- bf16, AVX512-BF16: 8 rows x 48 columns, k in pairs --------------------------------------
struct Bf16Kernel : Operands<uint16_t, uint16_t> {
  static constexpr int kWidth = 48, kRows = kAvx512Rows;

  template <int MR>
  [[gnu::target("avx512f,avx512bw,avx512vl,avx512bf16")]] void tile(int64_t r, int64_t j, int64_t width) const {
    __mmask16 mask[3];
    panel_masks(width, mask);
    const uint16_t* ar = a + r * lda;
    const uint16_t* panel = panels + j * 2 * panel_rows;
    __m512 sum[MR][3];
    start_sums<MR>(*this, r, j, mask, sum);
    for (int64_t p = 0; p < panel_k; ++p) {
      const uint16_t* b = panel + p * 96;
      const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b));
      const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + 32));
      const __m512bh b2 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + 64));
      for (int i = 0; i < MR; ++i) {
        int32_t pair;
        std::memcpy(&pair, ar + i * lda + 2 * p, sizeof pair);
        const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
        sum[i][0] = _mm512_dpbf16_ps(sum[i][0], x, b0);
        sum[i][1] = _mm512_dpbf16_ps(sum[i][1], x, b1);
        sum[i][2] = _mm512_dpbf16_ps(sum[i][2], x, b2);
      }
    }
    store_sums<MR>(*this, r, j, mask, sum);
  }
};

// ---- bf16, AMX: 32 rows x 32 columns, k 32 at a time ----------------------------------------------
// Tiles 0-3: the sums of 16 rows x 16 columns each (row block i, column tile q in tile 2i + q); 4-5:
// a's two 16 rows x 32 k (16 pairs); 6-7: two 16-column tiles of the panels, 16 pairs x 16 columns
// each, read in place with the panels' 192-byte row stride (a 48-column panel holds three such
// column tiles; a pair of them may straddle two panels). Each tile of b serves both row blocks and
// each tile of a both column tiles: 4 loads a k step for 4 products, where 16 rows x 48 columns
// took 4 for 3 and loaded b again for every 16 rows. Every call configures the tiles (oneDNN
// configures its own between) and releases them.
struct TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Column tile t of the panels (16 columns from 16 t), at its first pair.
inline const uint16_t* amx_column_tile(const Operands<uint16_t, uint16_t>& o, int64_t t) {
  return o.panels + t / 3 * 48 * 2 * o.panel_rows + t % 3 * 32;
}

// c[r .. r + 16 RB, 16 t .. 16 (t + CB)] = init + a b, clipped to m rows and n columns.
template <int RB, int CB>
[[gnu::target("amx-tile,amx-bf16,avx512f")]] inline void amx_block(const Operands<uint16_t, uint16_t>& o, int64_t r,
                                                                  int64_t t, int64_t m, int64_t n) {
  const int64_t a_bytes = 2 * o.lda;
  const uint16_t* a0 = o.a + r * o.lda;
  const uint16_t* a1 = a0 + 16 * o.lda;
  const uint16_t* b0 = amx_column_tile(o, t);
  const uint16_t* b1 = CB == 2 ? amx_column_tile(o, t + 1) : b0;
  _tile_zero(0);
  if constexpr (CB == 2) _tile_zero(1);
  if constexpr (RB == 2) _tile_zero(2);
  if constexpr (RB == 2 && CB == 2) _tile_zero(3);
  for (int64_t p = 0; p < o.panel_rows; p += 16) {
    _tile_loadd(6, b0 + p * 96, 192);
    _tile_loadd(4, a0 + 2 * p, a_bytes);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (CB == 2) {
      _tile_loadd(7, b1 + p * 96, 192);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (RB == 2) {
      _tile_loadd(5, a1 + 2 * p, a_bytes);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (CB == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  alignas(64) float sums[32 * 32];  // [row][column], 128 bytes a row
  _tile_stored(0, sums, 128);
  if constexpr (CB == 2) _tile_stored(1, sums + 16, 128);
  if constexpr (RB == 2) _tile_stored(2, sums + 16 * 32, 128);
  if constexpr (RB == 2 && CB == 2) _tile_stored(3, sums + 16 * 32 + 16, 128);
  const __mmask16 mask[2] = {first_lanes(n - 16 * t), first_lanes(n - 16 * (t + 1))};
  for (int64_t i = 0; i < std::min<int64_t>(16 * RB, m - r); ++i) {
    const int64_t row = r + i;
    const bool second = row >= o.split;
    float* c = second ? o.c2 + (row - o.split) * o.ldc2 : o.c + row * o.ldc;
    const float* init = second ? (o.init2 == nullptr ? nullptr : o.init2 + (row - o.split) * o.init_ld2)
                               : (o.init == nullptr ? nullptr : o.init + row * o.init_ld);
    for (int q = 0; q < CB; ++q) {
      const int64_t j = 16 * (t + q);
      __m512 sum = _mm512_load_ps(sums + i * 32 + 16 * q);
      if (init != nullptr) sum = _mm512_add_ps(_mm512_maskz_loadu_ps(mask[q], init + j), sum);
      _mm512_mask_storeu_ps(c + j, mask[q], sum);
    }
  }
}

// c = init + a b over rows [0, m): a bf16 [round_up(m, 16), 2 panel_pairs] (row stride lda, zeros
// past k and past m), the sums added to init after the tiles.
[[gnu::target("amx-tile,amx-bf16,avx512f")]] void amx_product(const Operands<uint16_t, uint16_t>& o, int64_t m,
                                                              int64_t n) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) config.rows[t] = 16, config.bytes_per_row[t] = 64;
  _tile_loadconfig(&config);
  const int64_t tiles = (n + 15) / 16;
  // 32 rows at a time over every column: their a (32 KB at k 512) stays in L1 while b streams
  // from L2 (column tiles outermost streamed a instead: weight gradients 10-30% slower). a's rows
  // are padded to 16: two row blocks wherever more than 16 rows are left.
  for (int64_t r = 0; r < m; r += 32) {
    const bool two = m - r > 16;
    for (int64_t t = 0; t < tiles; t += 2) {
      const bool pair = t + 1 < tiles;
      if (two) {
        pair ? amx_block<2, 2>(o, r, t, m, n) : amx_block<2, 1>(o, r, t, m, n);
      } else {
        pair ? amx_block<1, 2>(o, r, t, m, n) : amx_block<1, 1>(o, r, t, m, n);
      }
    }
  }
  _tile_release();
}

// CPUID leaf 7's AMX-TILE and AMX-BF16 bits (EDX 24 and 22): asked directly, as clang 14's
// __builtin_cpu_supports knows no "amx-bf16".
bool amx_bf16_in_cpuid() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (edx >> 24 & 1) != 0 && (edx >> 22 & 1) != 0;
}

// Whether this process may use AMX tiles: Linux grants them on request (arch_prctl), once per process.
bool amx_tiles_granted() {
  constexpr long kRequestPermission = 0x1023, kTileData = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
  return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
}

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
// tensor it transposes): 16 x 16 blocks loaded as those rows and transposed in registers, 2.5x the
// rate of gathering a's rows ([1536, 480]: 0.17 against 0.42 ns a value).
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
// turn's gathers read the same 16 cache lines and pages (row by row over the whole k, a gradient of
// 1,300 tokens ran at a third of the library's rate: each row's gathers went through 8 MB).
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
// buffer out went through the values three times (8% of a bf16 hidden-512 step, perf).

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

// This thread's buffer for a's rows in bf16 (a step's rows: reused across steps), `rows` rows of
// `ld` values, those from `filled` on zero (the AMX tiles read whole 16-row blocks).
uint16_t* bf16_rows_buffer(int64_t rows, int64_t ld, int64_t filled) {
  thread_local std::vector<uint16_t> rounded;
  rounded.resize(static_cast<std::size_t>(rows * ld));
  std::fill(rounded.begin() + filled * ld, rounded.end(), uint16_t{0});
  return rounded.data();
}
#endif

}  // namespace

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

namespace {

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

// k's pairs, padded to an AMX tile's 16 rows.
int64_t bf16_panel_pairs(int64_t k) { return ((k + 1) / 2 + 15) / 16 * 16; }


}  // namespace

void pack_panels(PanelIsa isa, const float* b, int64_t k, int64_t n, int64_t row_stride, int64_t column_stride,
                 float* panels, int64_t first_panel, int64_t last_panel) {
  pack_float_panels(panel_width(isa), b, k, k, n, row_stride, column_stride, panels, first_panel, last_panel);
}

Bf16PanelKernel bf16_panel_kernel_here() {
#ifdef LUONG_PANEL_KERNELS
  static const Bf16PanelKernel kernel = [] {
    if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16"))) {
      return Bf16PanelKernel::kNone;
    }
    // (the AMX kernel rounds a and adds the sums with AVX-512)
    return amx_bf16_in_cpuid() && amx_tiles_granted() ? Bf16PanelKernel::kAmx : Bf16PanelKernel::kAvx512Bf16;
  }();
  return kernel;
#else
  return Bf16PanelKernel::kNone;
#endif
}

bool bf16_panels_here() { return bf16_panel_kernel_here() != Bf16PanelKernel::kNone; }

const char* bf16_panel_kernel_name(Bf16PanelKernel kernel) {
  switch (kernel) {
    case Bf16PanelKernel::kAmx: return "AMX";
    case Bf16PanelKernel::kAvx512Bf16: return "AVX512-BF16";
    case Bf16PanelKernel::kNone: break;
  }
  return "none";
}

int64_t bf16_panel_elements(int64_t k, int64_t n) { return (n + 47) / 48 * 48 * 2 * bf16_panel_pairs(k); }

void pack_bf16_panels(const uint16_t* b, int64_t k, int64_t n, int64_t row_stride, int64_t column_stride,
                      uint16_t* panels, int64_t first_panel, int64_t last_panel) {
  const int64_t pairs = (k + 1) / 2, panel_pairs = bf16_panel_pairs(k);
#ifdef LUONG_PANEL_KERNELS
  if (row_stride == 1 && k % 2 == 0 && column_stride % 2 == 0 && reinterpret_cast<std::uintptr_t>(b) % 4 == 0) {
    // A weight read as its transpose: each column's pair is one 32-bit word, so the panels are the
    // float32 ones of b's pairs seen as words.
    pack_float_panels(48, reinterpret_cast<const float*>(b), pairs, panel_pairs, n, 1, column_stride / 2,
                      reinterpret_cast<float*>(panels), first_panel, last_panel);
    return;
  }
#endif
  for (int64_t p = first_panel; p < last_panel; ++p) {
    const int64_t j = p * 48, columns = std::min<int64_t>(48, n - j);
    uint16_t* panel = panels + j * 2 * panel_pairs;
    for (int64_t i = 0; i < pairs; ++i) {
      uint16_t* out = panel + i * 96;
      const bool second = 2 * i + 1 < k;
#ifdef LUONG_PANEL_KERNELS
      if (column_stride == 1 && second) {
        interleave_rows_avx2(b + 2 * i * row_stride + j, b + (2 * i + 1) * row_stride + j, columns, out);
      } else
#endif
      {
        for (int64_t c = 0; c < columns; ++c) {
          out[2 * c] = b[2 * i * row_stride + (j + c) * column_stride];
          out[2 * c + 1] = second ? b[(2 * i + 1) * row_stride + (j + c) * column_stride] : uint16_t{0};
        }
      }
      std::fill(out + 2 * columns, out + 96, uint16_t{0});
    }
    std::fill(panel + pairs * 96, panel + panel_pairs * 96, uint16_t{0});
  }
}

void pack_bf16_panels_rounding(const float* b, int64_t k, int64_t n, int64_t row_stride, int64_t column_stride,
                               uint16_t* panels, int64_t first_panel, int64_t last_panel) {
#ifdef LUONG_PANEL_KERNELS
  if (bf16_panel_kernel_here() != Bf16PanelKernel::kNone) {
    // (the rows of a strided b are gathered: 32-bit offsets)
    if (row_stride != 1 && column_stride * 15 > INT32_MAX) {
      throw std::invalid_argument("pack_bf16_panels_rounding: b's column stride is too large");
    }
    const int64_t panel_pairs = bf16_panel_pairs(k);
    thread_local std::vector<uint16_t> rounded;
    for (int64_t p = first_panel; p < last_panel; ++p) {
      const int64_t j = p * 48, columns = std::min<int64_t>(48, n - j);
      uint16_t* panel = panels + j * 2 * panel_pairs;
      if (row_stride == 1) {  // a weight read as its transpose
        pack_rounded_transposed_panel(b + j * column_stride, k, columns, column_stride, panel, panel_pairs);
      } else if (column_stride == 1) {
        pack_rounded_rows_panel(b + j, k, columns, row_stride, panel, panel_pairs);
      } else {
        rounded.resize(static_cast<std::size_t>(k * 48));
        round_rows_bf16(b + j * column_stride, k, columns, row_stride, column_stride, rounded.data(), 48);
        pack_bf16_panels(rounded.data(), k, columns, 48, 1, panel, 0, 1);
      }
    }
    return;
  }
#endif
  (void)b, (void)k, (void)n, (void)row_stride, (void)column_stride, (void)panels, (void)first_panel, (void)last_panel;
  throw std::invalid_argument("pack_bf16_panels_rounding: this processor has no bf16 panel kernel");
}

void bf16_panel_product(Bf16PanelKernel kernel, const float* a, int64_t m, int64_t k, int64_t lda,
                        const uint16_t* panels, int64_t n, float* c, int64_t ldc, const float* init, int64_t init_ld,
                        int64_t a_column_stride) {
#ifdef LUONG_PANEL_KERNELS
  const Bf16PanelKernel here = bf16_panel_kernel_here();
  if (kernel != Bf16PanelKernel::kNone && (kernel == here || kernel == Bf16PanelKernel::kAvx512Bf16) &&
      here != Bf16PanelKernel::kNone) {
    const int64_t pairs = (k + 1) / 2, panel_pairs = bf16_panel_pairs(k);
    // a in bf16, its rows padded to the panels' pairs (and, for AMX, to a multiple of 16 rows with
    // zeros): a step's rows, the buffer reused across steps
    const int64_t rows = kernel == Bf16PanelKernel::kAmx ? (m + 15) / 16 * 16 : m;
    const int64_t column_stride = k == 1 ? 1 : a_column_stride;
    if (column_stride * 15 > INT32_MAX) throw std::invalid_argument("bf16_panel_product: a's stride is too large");
    uint16_t* rounded = bf16_rows_buffer(rows, 2 * panel_pairs, m);
    round_rows_bf16(a, m, k, lda, column_stride, rounded, 2 * panel_pairs);
    const Operands<uint16_t, uint16_t> operands{rounded, 2 * panel_pairs, panels, pairs, panel_pairs,
                                                c,       ldc,             init,   init_ld};
    if (kernel == Bf16PanelKernel::kAmx) return amx_product(operands, m, n);
    return walk_panels(Bf16Kernel{operands}, m, n);
  }
#endif
  (void)kernel, (void)a, (void)m, (void)k, (void)lda, (void)panels, (void)n, (void)c, (void)ldc, (void)init,
      (void)init_ld, (void)a_column_stride;
  throw std::invalid_argument(std::string("bf16_panel_product: this processor has no ") +
                              bf16_panel_kernel_name(kernel) + " kernel");
}

void amx_panel_product_of_two_blocks(const Bf16RowBlock (&blocks)[2], int64_t k, const uint16_t* panels, int64_t n,
                                     int64_t first_panel, int64_t last_panel) {
#ifdef LUONG_PANEL_KERNELS
  if (bf16_panel_kernel_here() == Bf16PanelKernel::kAmx) {
    const int64_t pairs = (k + 1) / 2, panel_pairs = bf16_panel_pairs(k), ld = 2 * panel_pairs;
    const int64_t m = blocks[0].m + blocks[1].m, j = first_panel * 48, columns = std::min(n, last_panel * 48) - j;
    if (m == 0 || columns <= 0) return;
    uint16_t* rounded = bf16_rows_buffer((m + 15) / 16 * 16, ld, m);
    round_rows_bf16(blocks[0].a, blocks[0].m, k, blocks[0].lda, 1, rounded, ld);
    round_rows_bf16(blocks[1].a, blocks[1].m, k, blocks[1].lda, 1, rounded + blocks[0].m * ld, ld);
    const auto shifted = [&](const float* init) { return init == nullptr ? nullptr : init + j; };
    Operands<uint16_t, uint16_t> operands{rounded,            ld, panels + j * 2 * panel_pairs, pairs, panel_pairs,
                                          blocks[0].c + j,    blocks[0].ldc, shifted(blocks[0].init), blocks[0].init_ld};
    operands.split = blocks[0].m;
    operands.c2 = blocks[1].c + j, operands.ldc2 = blocks[1].ldc;
    operands.init2 = shifted(blocks[1].init), operands.init_ld2 = blocks[1].init_ld;
    return amx_product(operands, m, columns);
  }
#endif
  (void)blocks, (void)k, (void)panels, (void)n, (void)first_panel, (void)last_panel;
  throw std::invalid_argument("amx_panel_product_of_two_blocks: this processor has no AMX kernel");
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
