#pragma once
// Small-row float32 matrix products against a right operand laid out once in column panels: the
// fused kernels' per-step products ([rows of one thread's block, K] x [K, N], the same weight at
// every step). LibTorch's libraries lay the weight out again at every call, which at these shapes
// costs more than the arithmetic (bench/panel_rate.cpp, docs/PERFORMANCE.md). Raw pointers, no
// LibTorch; AVX-512 and AVX2 + FMA kernels, chosen at run time.
//
// Panel layout: b [K, N] in panels of `panel_width` columns, panel j holding b[k, j w .. j w + w - 1]
// for k = 0 .. K - 1 contiguously (w floats per k); the last panel's missing columns are zero.
#include <cstdint>

namespace luong::models {

enum class PanelIsa { kNone, kAvx2, kAvx512 };

/// The widest kernel this processor runs (kNone: neither AVX2 + FMA nor AVX-512F).
PanelIsa panel_isa_here();
/// Columns per panel: 48 for AVX-512 (three zmm), 24 for AVX2 (three ymm).
int64_t panel_width(PanelIsa isa);
/// Floats the panels of a [k, n] operand take.
int64_t panel_floats(PanelIsa isa, int64_t k, int64_t n);

/// Lays panels [first_panel, last_panel) of b out into `panels` (panel_floats(isa, k, n) floats for
/// all of them): b[i, j] is b[i * row_stride + j * column_stride], so a weight w [n, k] read as its
/// transpose has row_stride 1 and column_stride k.
void pack_panels(PanelIsa isa, const float* b, int64_t k, int64_t n, int64_t row_stride, int64_t column_stride,
                 float* panels, int64_t first_panel, int64_t last_panel);

/// c [m, n] (row stride ldc) = init + a [m, k] (row stride lda) b, b in panels. init: nullptr for
/// none; else row i of init starts at init + i * init_ld (init_ld 0: one row, a bias broadcast over
/// the rows; init == c with init_ld == ldc: c += a b). Sums in k order, one float32 accumulator
/// per output, with fused multiply-adds.
void panel_product(PanelIsa isa, const float* a, int64_t m, int64_t k, int64_t lda, const float* panels, int64_t n,
                   float* c, int64_t ldc, const float* init, int64_t init_ld);

// ---- bf16 panels (AMX or AVX512-BF16) --------------------------------------------------------------
// The per-step products under bf16 precision: operands rounded to bf16, each product of a pair of k
// summed into float32 accumulators, the result left in float32. Two kernels take the same panels:
// AMX tiles (tdpbf16ps: 16 rows x 48 columns a tile set, k 32 at a time) where the processor has
// AMX-BF16 and the kernel grants this process its tiles, else AVX512-BF16 (vdpbf16ps: 8 rows x 48
// columns). Panels of 48 columns, k in pairs: for pair p, the 48 columns' (b[2p, c], b[2p + 1, c])
// side by side (an odd k's last pair padded with zero), the pairs padded with zeros to a multiple of
// 16 (an AMX tile's rows). bf16 values travel as their bits (uint16_t).

enum class Bf16PanelKernel { kNone, kAvx512Bf16, kAmx };

/// The fastest bf16 panel kernel this processor (and kernel) runs.
Bf16PanelKernel bf16_panel_kernel_here();
/// Whether this processor has a bf16 panel kernel.
bool bf16_panels_here();
const char* bf16_panel_kernel_name(Bf16PanelKernel kernel);
/// uint16_t elements the bf16 panels of a [k, n] operand take.
int64_t bf16_panel_elements(int64_t k, int64_t n);
/// Panels [first_panel, last_panel) of the bf16 operand b (strides as pack_panels').
void pack_bf16_panels(const uint16_t* b, int64_t k, int64_t n, int64_t row_stride, int64_t column_stride,
                      uint16_t* panels, int64_t first_panel, int64_t last_panel);
/// The same panels of a float32 b, rounded to bf16 (to nearest even, as LibTorch's conversion) as
/// they are laid out, where converting the whole of b first went through memory twice: straight into
/// the panels for a weight's transpose (row stride 1) and for rows of unit column stride, through a
/// buffer of a panel's columns for other strides. Needs a bf16 panel kernel here (its rounding).
void pack_bf16_panels_rounding(const float* b, int64_t k, int64_t n, int64_t row_stride, int64_t column_stride,
                               uint16_t* panels, int64_t first_panel, int64_t last_panel);
/// c = init + bf16(a) b, as panel_product (a float32, rounded to bf16 to nearest even on the way), by
/// `kernel` (one this processor runs: at most bf16_panel_kernel_here()). a[r, p] is a[r lda + p
/// a_column_stride]: rows of any stride (a transposed matrix's too, gathered as they are rounded).
void bf16_panel_product(Bf16PanelKernel kernel, const float* a, int64_t m, int64_t k, int64_t lda,
                        const uint16_t* panels, int64_t n, float* c, int64_t ldc, const float* init, int64_t init_ld,
                        int64_t a_column_stride = 1);

/// One row block's share of a product two threads make together: a [m, k] (unit column stride, row
/// stride lda), c [m, n] (row stride ldc), init undefined, a row (init_ld 0) or a matrix.
struct Bf16RowBlock {
  const float* a;
  int64_t m, lda;
  float* c;
  int64_t ldc;
  const float* init;
  int64_t init_ld;
};
/// c = init + bf16(a) b for both blocks' rows, over panels [first_panel, last_panel) of b's only:
/// the two a's rounded into one operand of up to 32 rows, so that b's panels, which a step's
/// product reads from L3, are read once for both blocks (AMX only). The sums are
/// those of bf16_panel_product to the bit.
void amx_panel_product_of_two_blocks(const Bf16RowBlock (&blocks)[2], int64_t k, const uint16_t* panels, int64_t n,
                                     int64_t first_panel, int64_t last_panel);

}  // namespace luong::models
