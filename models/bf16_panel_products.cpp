#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "luong/models/panel_products.h"
#include "panel_kernels.h"

namespace luong::models {
namespace {

using namespace panels;

#ifdef LUONG_PANEL_KERNELS
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
  // from L2 (column tiles outermost would stream a instead, slower for weight gradients). a's rows
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

}  // namespace luong::models
