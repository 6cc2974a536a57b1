// The panel kernels (models/panel_products.cpp) against a double-precision product, for every kernel
// this processor runs: every row count up to two tiles and a tail, panels cut short, each way of
// starting the sums, operands inside wider buffers, both ways of laying a weight out; and
// MatrixProducts' per-step operations in panels against the libraries'.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <vector>

#include "luong/models/matrix_products.h"
#include "luong/models/panel_products.h"
#include "luong/util/path_counts.h"
#include "product_operations.h"

namespace luong::models {
namespace {

std::vector<PanelIsa> kernels_here() {
  std::vector<PanelIsa> isas;
  if (panel_isa_here() == PanelIsa::kAvx512) isas = {PanelIsa::kAvx2, PanelIsa::kAvx512};
  if (panel_isa_here() == PanelIsa::kAvx2) isas = {PanelIsa::kAvx2};
  return isas;
}

// AVX512-BF16's kernel, and AMX's where the processor has it.
std::vector<Bf16PanelKernel> bf16_kernels_here() {
  std::vector<Bf16PanelKernel> kernels = {Bf16PanelKernel::kAvx512Bf16};
  if (bf16_panel_kernel_here() == Bf16PanelKernel::kAmx) kernels.push_back(Bf16PanelKernel::kAmx);
  return kernels;
}

const char* name(PanelIsa isa) { return isa == PanelIsa::kAvx512 ? "AVX-512" : "AVX2"; }

enum class Init { kNone, kRow, kMatrix, kAccumulate };

// A kernel's product: c [m, n] (row stride ldc) = start + a [m, k] (strides lda, a_column_stride) b.
using Product = std::function<void(const float* a, int64_t lda, int64_t a_column_stride, float* c, int64_t ldc,
                                   const float* start, int64_t start_ld)>;

// One product with a and c inside wider buffers (row strides k + 3, n + 5; a_transposed: a the
// transpose of a [k, m + 3] block), its sums started as `init` says, against the double product of a
// (rounded to a_dtype first) and b: the largest difference. c's margins must stay untouched.
double product_error(int64_t m, int64_t k, int64_t n, Init init, const torch::Tensor& b, torch::ScalarType a_dtype,
                     const Product& product, bool a_transposed = false) {
  const torch::Tensor a = a_transposed ? torch::randn({k, m + 3}).narrow(1, 1, m).t() : torch::randn({m, k + 3}).narrow(1, 1, k);
  const torch::Tensor c_wide = torch::randn({m, n + 5}), c_before = c_wide.clone();
  torch::Tensor c = c_wide.narrow(1, 2, n);
  const torch::Tensor row = torch::randn({n}), matrix = torch::randn({m, n + 4}).narrow(1, 4, n);
  torch::Tensor expected = a.to(a_dtype).to(torch::kDouble).mm(b.to(torch::kDouble));
  const float* start = nullptr;
  int64_t start_ld = 0;
  if (init == Init::kRow) start = row.data_ptr<float>(), expected += row.to(torch::kDouble);
  if (init == Init::kMatrix) {
    start = matrix.data_ptr<float>(), start_ld = matrix.stride(0), expected += matrix.to(torch::kDouble);
  }
  if (init == Init::kAccumulate) start = c.data_ptr<float>(), start_ld = c.stride(0), expected += c.to(torch::kDouble);
  product(a.data_ptr<float>(), a.stride(0), a.stride(1), c.data_ptr<float>(), c.stride(0), start, start_ld);
  EXPECT_TRUE(torch::equal(c_wide.narrow(1, 0, 2), c_before.narrow(1, 0, 2))) << "wrote left of its block";
  EXPECT_TRUE(torch::equal(c_wide.narrow(1, n + 2, 3), c_before.narrow(1, n + 2, 3))) << "wrote right of its block";
  return (c.to(torch::kDouble) - expected).abs().max().item<double>();
}

TEST(PanelProductsTest, EqualADoubleProductForEveryShapeAndStart) {
  const std::vector<PanelIsa> isas = kernels_here();
  if (isas.empty()) GTEST_SKIP() << "this processor has no panel kernel (neither AVX2 + FMA nor AVX-512)";
  torch::manual_seed(3);
  int64_t checked = 0;
  for (const PanelIsa isa : isas) {
    for (const int64_t k : {1, 7, 64, 131}) {
      for (const int64_t n : {1, 5, 8, 16, 23, 24, 47, 48, 49, 100}) {
        // b as a weight's transpose (w [n, k]) and as a dense [k, n]: the two layouts the kernels pass
        const torch::Tensor weight = torch::randn({n, k});
        for (const bool transposed : {true, false}) {
          const torch::Tensor b = transposed ? weight.t() : weight.t().contiguous();
          std::vector<float> panels(static_cast<std::size_t>(panel_floats(isa, k, n)), -7.0f);
          const int64_t width = panel_width(isa);
          pack_panels(isa, b.data_ptr<float>(), k, n, b.stride(0), b.stride(1), panels.data(), 0, (n + width - 1) / width);
          for (const int64_t m : {1, 2, 3, 4, 5, 7, 8, 9, 16, 19}) {
            for (const Init init : {Init::kNone, Init::kRow, Init::kMatrix, Init::kAccumulate}) {
              const double error = product_error(
                  m, k, n, init, b, torch::kFloat,
                  [&](const float* a, int64_t lda, int64_t a_column_stride, float* c, int64_t ldc, const float* start,
                      int64_t start_ld) {
                    ASSERT_EQ(a_column_stride, 1);
                    panel_product(isa, a, m, k, lda, panels.data(), n, c, ldc, start, start_ld);
                  });
              // float32 sums of k products of unit normals: about sqrt(k) 2^-24 each; 1e-5 k is generous
              ASSERT_LT(error, 1e-5 * static_cast<double>(k + 1))
                  << name(isa) << " m " << m << " k " << k << " n " << n << " init " << static_cast<int>(init)
                  << (transposed ? " transposed" : " dense");
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int64_t>(isas.size()) * 4 * 10 * 2 * 10 * 4);
}

// A float32 b laid out in bf16 panels as it is rounded: the panels of b converted by LibTorch first,
// bit for bit (nearest even), for a weight read as its transpose, a dense b and a strided one, odd
// and even k, whole and partial panels, and only the panels asked for.
TEST(PanelProductsTest, Bf16PanelsRoundedAsTheyArePackedEqualThoseOfTheConvertedOperand) {
  if (!bf16_panels_here()) GTEST_SKIP() << "this processor has no AVX512-BF16";
  torch::manual_seed(7);
  int64_t compared = 0;
  for (const int64_t k : {1, 2, 7, 33, 64, 131}) {
    for (const int64_t n : {1, 5, 47, 48, 49, 100, 150}) {
      const torch::Tensor weight = torch::randn({n, k}) * 3;
      const torch::Tensor wide = torch::randn({k, 2 * n});
      for (const torch::Tensor& b : {weight.t(), weight.t().contiguous(), wide.narrow(1, 0, 2 * n).slice(1, 0, 2 * n, 2)}) {
        const torch::Tensor converted = b.to(torch::kBFloat16);
        const int64_t panel_count = (n + 47) / 48, size = bf16_panel_elements(k, n);
        std::vector<uint16_t> expected(static_cast<std::size_t>(size), 0xFFFF), rounded(expected);
        pack_bf16_panels(reinterpret_cast<const uint16_t*>(converted.data_ptr<at::BFloat16>()), k, n,
                         converted.stride(0), converted.stride(1), expected.data(), 0, panel_count);
        // the last panels first, then the rest: each call lays out its panels and no others
        pack_bf16_panels_rounding(b.data_ptr<float>(), k, n, b.stride(0), b.stride(1), rounded.data(), panel_count / 2,
                                  panel_count);
        if (panel_count > 1) {
          const auto untouched = static_cast<std::size_t>(size / panel_count * (panel_count / 2));
          ASSERT_TRUE(std::all_of(rounded.begin(), rounded.begin() + static_cast<std::ptrdiff_t>(untouched),
                                  [](uint16_t v) { return v == 0xFFFF; }))
              << "a panel outside the range was written";
        }
        pack_bf16_panels_rounding(b.data_ptr<float>(), k, n, b.stride(0), b.stride(1), rounded.data(), 0,
                                  panel_count / 2);
        ASSERT_EQ(rounded, expected) << "k " << k << " n " << n << " strides " << b.stride(0) << ", " << b.stride(1);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 6 * 7 * 3);
}

// Every bf16 kernel here (AVX512-BF16, and AMX where the processor has it) against a double product
// of the operands rounded to bf16 (as LibTorch rounds them): odd and even k, k past one AMX tile's 32,
// cut panels, row counts past one AMX tile's 16, the four starts, strided operands, both layouts.
TEST(PanelProductsTest, Bf16KernelsEqualADoubleProductOfTheRoundedOperands) {
  if (!bf16_panels_here()) GTEST_SKIP() << "this processor has no AVX512-BF16";
  const std::vector<Bf16PanelKernel> kernels = bf16_kernels_here();
  torch::manual_seed(6);
  int64_t checked = 0;
  for (const int64_t k : {1, 2, 7, 33, 64, 131}) {
    for (const int64_t n : {1, 5, 16, 47, 48, 49, 100}) {
      const torch::Tensor weight = torch::randn({n, k}).to(torch::kBFloat16);
      for (const bool transposed : {true, false}) {
        const torch::Tensor b = transposed ? weight.t() : weight.t().contiguous();
        std::vector<uint16_t> panels(static_cast<std::size_t>(bf16_panel_elements(k, n)), 0xFFFF);
        pack_bf16_panels(reinterpret_cast<const uint16_t*>(b.data_ptr<at::BFloat16>()), k, n, b.stride(0), b.stride(1),
                         panels.data(), 0, (n + 47) / 48);
        for (const Bf16PanelKernel kernel : kernels) {
          // (AMX: one or two 16-row blocks and one or two 16-column tiles a turn, in every combination)
          for (const int64_t m : {1, 3, 8, 9, 16, 19, 32, 33, 48, 64}) {
            for (const Init init : {Init::kNone, Init::kRow, Init::kMatrix, Init::kAccumulate}) {
              // a's rows contiguous (a step's rows) and strided (a weight gradient's transposed a)
              for (const bool a_transposed : {false, true}) {
                const double error = product_error(
                    m, k, n, init, b, torch::kBFloat16,
                    [&](const float* a, int64_t lda, int64_t a_column_stride, float* c, int64_t ldc, const float* start,
                        int64_t start_ld) {
                      bf16_panel_product(kernel, a, m, k, lda, panels.data(), n, c, ldc, start, start_ld,
                                         a_column_stride);
                    },
                    a_transposed);
                // bf16 x bf16 products are exact in float32: only the float32 sums round
                ASSERT_LT(error, 1e-5 * static_cast<double>(k + 1))
                    << bf16_panel_kernel_name(kernel) << " m " << m << " k " << k << " n " << n << " init "
                    << static_cast<int>(init) << (transposed ? " transposed" : " dense")
                    << (a_transposed ? ", a transposed" : "");
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int64_t>(kernels.size()) * 6 * 7 * 2 * 10 * 4 * 2);
}

// a's three roundings (rows of unit column stride streamed, columns of unit stride transposed in
// 16 x 16 blocks, any other strides gathered) give the same bf16 a, so the same products to the bit:
// the same values in the three layouts, row and value counts on and off the blocks' 16.
TEST(PanelProductsTest, Bf16ProductsOfDenseTransposedAndGatheredAEqualToTheBit) {
  if (!bf16_panels_here()) GTEST_SKIP() << "this processor has no AVX512-BF16";
  const std::vector<Bf16PanelKernel> kernels = bf16_kernels_here();
  torch::manual_seed(8);
  int64_t compared = 0;
  for (const int64_t k : {1, 2, 17, 33, 64, 131}) {
    const int64_t n = 49;
    const torch::Tensor b = torch::randn({n, k}).t();
    std::vector<uint16_t> panels(static_cast<std::size_t>(bf16_panel_elements(k, n)));
    pack_bf16_panels_rounding(b.data_ptr<float>(), k, n, b.stride(0), b.stride(1), panels.data(), 0, (n + 47) / 48);
    for (const int64_t m : {1, 5, 16, 19, 40}) {
      const torch::Tensor values = torch::randn({m, k}) * 5;
      const torch::Tensor dense = torch::zeros({m, k + 3}).narrow(1, 1, k).copy_(values);
      const torch::Tensor transposed = torch::zeros({k, m + 2}).narrow(1, 2, m).t().copy_(values);  // lda 1
      const torch::Tensor gathered = torch::zeros({2 * k, 3 * m}).slice(0, 0, 2 * k, 2).slice(1, 0, 3 * m, 3).t().copy_(values);
      ASSERT_EQ(transposed.stride(0), 1);
      ASSERT_NE(gathered.stride(0), 1);
      ASSERT_NE(gathered.stride(1), 1);
      for (const Bf16PanelKernel kernel : kernels) {
        std::vector<torch::Tensor> products;
        for (const torch::Tensor& a : {dense, transposed, gathered}) {
          torch::Tensor c = torch::full({m, n}, -1.0f);
          bf16_panel_product(kernel, a.data_ptr<float>(), m, k, a.stride(0), panels.data(), n, c.data_ptr<float>(),
                             c.stride(0), nullptr, 0, a.stride(1));
          products.push_back(c);
        }
        const torch::Tensor expected = values.to(torch::kBFloat16).to(torch::kDouble).mm(b.to(torch::kBFloat16).to(torch::kDouble));
        ASSERT_LT((products[0].to(torch::kDouble) - expected).abs().max().item<double>(), 1e-5 * static_cast<double>(k + 1))
            << "m " << m << " k " << k;
        EXPECT_TRUE(torch::equal(products[1], products[0])) << "transposed a, m " << m << " k " << k;
        EXPECT_TRUE(torch::equal(products[2], products[0])) << "gathered a, m " << m << " k " << k;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, static_cast<int64_t>(kernels.size()) * 6 * 5);
}

// The per-step operations (MatrixProducts' overloads for a PanelOperand) in panels equal the
// library's, into a block of a wider buffer too; and a panel product ran for each.
TEST(PanelProductsTest, StepOperationsEqualTheLibrarys) {
  if (panel_isa_here() == PanelIsa::kNone) GTEST_SKIP() << "this processor has no panel kernel";
  torch::manual_seed(4);
  const torch::Tensor a = torch::randn({19, 160}), weight = torch::randn({100, 160}), bias = torch::randn({100});
  const torch::Tensor start = torch::randn({19, 100});
  const auto all = [&](bool panels) {
    set_panel_products_enabled(panels);
    const MatrixProducts products;
    const PanelOperand b = products.panel_operand(weight.t());
    EXPECT_EQ(b.in_panels(), panels);
    return test::in_place_operations(products, a, b, bias, start);
  };
  const bool before = panel_products_enabled();
  const std::vector<torch::Tensor> library = all(false);
  const int64_t run_before = path_counts::read(path_counts::Path::kPanelProducts);
  const std::vector<torch::Tensor> panels = all(true);
  EXPECT_EQ(path_counts::read(path_counts::Path::kPanelProducts) - run_before, 4);
  set_panel_products_enabled(before);
  for (std::size_t i = 0; i < library.size(); ++i) {
    EXPECT_TRUE(torch::allclose(panels[i], library[i], 1e-5, 1e-4)) << "operation " << i;
  }
  EXPECT_TRUE(torch::equal(panels[0].narrow(1, 0, 16), torch::zeros({19, 16}))) << "wrote outside its block";
  EXPECT_TRUE(torch::equal(panels[0].narrow(1, 116, 16), torch::zeros({19, 16}))) << "wrote outside its block";
}

// Under bf16: the per-step operations in bf16 panels are closer to the double product of the rounded
// operands than the library's bf16 product, whose result LibTorch rounds to bf16 (2^-9 relative).
TEST(PanelProductsTest, Bf16StepOperationsBeatTheLibrarysRounding) {
  torch::manual_seed(8);
  const torch::Tensor a = torch::randn({19, 160}), weight = torch::randn({100, 160}).to(torch::kBFloat16);
  const torch::Tensor bias = torch::randn({100});
  const torch::Tensor exact = (a.to(torch::kBFloat16).to(torch::kDouble).mm(weight.t().to(torch::kDouble)) +
                               bias.to(torch::kDouble));
  const bool before = panel_products_enabled();
  const MatrixProducts products{true};
  set_panel_products_enabled(false);
  const PanelOperand library_operand = products.panel_operand(weight.t());
  EXPECT_FALSE(library_operand.in_panels());
  torch::Tensor library = torch::empty({19, 100});
  products.addmm_out(library, bias, a, library_operand);
  set_panel_products_enabled(true);
  const PanelOperand panel_operand = products.panel_operand(weight.t());
  set_panel_products_enabled(before);
  if (!bf16_panels_here()) {
    EXPECT_FALSE(panel_operand.in_panels());
    GTEST_SKIP() << "this processor has no AVX512-BF16";
  }
  ASSERT_TRUE(panel_operand.in_panels());
  torch::Tensor panels = torch::empty({19, 100});
  const int64_t run_before = path_counts::read(path_counts::Path::kPanelProducts);
  products.addmm_out(panels, bias, a, panel_operand);
  EXPECT_EQ(path_counts::read(path_counts::Path::kPanelProducts) - run_before, 1);
  const double panel_error = (panels.to(torch::kDouble) - exact).abs().max().item<double>();
  const double library_error = (library.to(torch::kDouble) - exact).abs().max().item<double>();
  std::printf("  largest error against the double product: bf16 panels %.3e, library %.3e\n", panel_error, library_error);
  EXPECT_LT(panel_error, 1e-4);
  // bf16's rounding of the result: half an ulp, 2^-8 of the value at most
  EXPECT_LE(library_error, exact.abs().max().item<double>() / 256);
  EXPECT_LT(panel_error * 10, library_error);
}

// A whole batch's products under bf16 (MatrixProducts' tensor overloads: the input projections, the
// data gradients, a weight gradient's transposed a) run in bf16 panels over the threads, in blocks of
// 128 rows, where a bf16 panel kernel is here: each equals the double product of the rounded
// operands to float32 sums, where the library's rounds its result to bf16.
TEST(PanelProductsTest, Bf16WholeBatchProductsRunInPanelsOverTheThreads) {
  if (!bf16_panels_here()) GTEST_SKIP() << "this processor has no AVX512-BF16";
  torch::manual_seed(10);
  const torch::Tensor x = torch::randn({300, 160}), weight = torch::randn({100, 160}), bias = torch::randn({100});
  const torch::Tensor dy = torch::randn({300, 100}), start = torch::randn({300, 100});
  const auto rounded = [](const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kDouble); };
  const MatrixProducts products{true};
  const bool before = panel_products_enabled();
  set_panel_products_enabled(true);
  const int threads = torch::get_num_threads();
  torch::set_num_threads(3);
  const int64_t run_before = path_counts::read(path_counts::Path::kPanelProducts);
  torch::Tensor added = start.clone(), into = torch::empty({300, 100}), biased = torch::empty({300, 100});
  products.add_mm_(added, x, weight.t());
  products.mm_out(into, x, weight.t());
  products.addmm_out(biased, bias, x, weight.t());
  const std::vector<std::pair<torch::Tensor, torch::Tensor>> cases = {
      {products.mm(x, weight.t()), rounded(x).mm(rounded(weight).t())},
      {products.addmm(bias, x, weight.t()), rounded(x).mm(rounded(weight).t()) + bias.to(torch::kDouble)},
      {products.mm(dy, weight), rounded(dy).mm(rounded(weight))},
      {products.mm(dy.t(), x), rounded(dy).t().mm(rounded(x))},  // a transposed, 100 rows: one block
      {products.mm(x.t(), dy), rounded(x).t().mm(rounded(dy))},  // a transposed, 160 rows: two blocks
      {added, start.to(torch::kDouble) + rounded(x).mm(rounded(weight).t())},
      {into, rounded(x).mm(rounded(weight).t())},
      {biased, rounded(x).mm(rounded(weight).t()) + bias.to(torch::kDouble)}};
  EXPECT_EQ(path_counts::read(path_counts::Path::kPanelProducts) - run_before, static_cast<int64_t>(cases.size()));
  torch::set_num_threads(threads);
  set_panel_products_enabled(before);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& [got, exact] = cases[i];
    ASSERT_EQ(got.sizes(), exact.sizes()) << "case " << i;
    EXPECT_EQ(got.scalar_type(), torch::kFloat) << "case " << i;
    const int64_t k = i == 3 || i == 4 ? 300 : (i == 2 ? 100 : 160);
    EXPECT_LT((got.to(torch::kDouble) - exact).abs().max().item<double>(), 1e-5 * static_cast<double>(k + 1))
        << "case " << i;
  }
}

// mm_each deals small independent products (a backward's weight gradients at the notebook's sizes)
// out to the threads, each whole on one: every result equals its product alone on one thread, with
// transposed and sliced operands: in double to the bit; in float32 to 1e-5 and under bf16 to 1e-2 of
// its largest value (a library may order a product's sums by the thread count it reads inside a
// parallel region, and LibTorch's bf16 product rounds its result to bf16), where a product dealt to
// the wrong place is off by its whole size. A single product, one thread, or a product too large to
// deal (16.7 million multiply-adds or more) runs as mm does.
TEST(PanelProductsTest, ProductsDealtToThreadsEqualEachProductAlone) {
  torch::manual_seed(11);
  const int threads = torch::get_num_threads();
  for (const bool bf16 : {false, true}) {
    for (const auto dtype : {torch::kDouble, torch::kFloat}) {
      if (bf16 && dtype == torch::kDouble) continue;
      const auto options = torch::TensorOptions().dtype(dtype);
      const torch::Tensor dg = torch::randn({206, 192}, options), x = torch::randn({206, 28}, options);
      const torch::Tensor h = torch::randn({230, 64}, options).narrow(0, 0, 206), w = torch::randn({192, 28}, options);
      const std::vector<Factors> factors = {{dg, w}, {dg.t(), x}, {dg.t(), h}, {x.t(), h}, {h, h.t().narrow(1, 0, 3)}};
      const MatrixProducts products{bf16};
      for (const int t : {3, 2, 1}) {
        torch::set_num_threads(t);
        const int64_t dealt_before = path_counts::read(path_counts::Path::kProductsDealt);
        const std::vector<torch::Tensor> dealt = products.mm_each(factors);
        EXPECT_EQ(path_counts::read(path_counts::Path::kProductsDealt) - dealt_before, t > 1 ? 5 : 0) << t << " threads";
        torch::set_num_threads(1);  // each product alone as the dealt ones ran: on one thread
        // The same products, the second and third written into the two column slices of one tensor
        // (as the decoders' layer-0 input-weight gradient), the others into fresh ones.
        torch::set_num_threads(t);
        const torch::Tensor joined = torch::full({192, 28 + 64}, 7.0, options);
        std::vector<torch::Tensor> outs(factors.size());
        outs[1] = joined.narrow(1, 0, 28), outs[2] = joined.narrow(1, 28, 64);
        const std::vector<torch::Tensor> into = products.mm_each(factors, outs);
        torch::set_num_threads(1);
        ASSERT_EQ(dealt.size(), factors.size());
        ASSERT_EQ(into.size(), factors.size());
        EXPECT_TRUE(into[1].is_same(outs[1]) && into[2].is_same(outs[2])) << "a product left its given output";
        for (std::size_t i = 0; i < factors.size(); ++i) {
          const torch::Tensor alone = products.mm(factors[i].first, factors[i].second);
          ASSERT_EQ(dealt[i].sizes(), alone.sizes()) << "product " << i;
          const double tolerance = dtype == torch::kDouble ? 0.0 : (bf16 ? 1e-2 : 1e-5);
          EXPECT_LE((dealt[i] - alone).abs().max().item<double>(), tolerance * alone.abs().max().item<double>())
              << "product " << i << ", " << t << " threads, bf16 " << bf16;
          EXPECT_LE((into[i] - alone).abs().max().item<double>(), tolerance * alone.abs().max().item<double>())
              << "product " << i << " into its output, " << t << " threads, bf16 " << bf16;
        }
      }
    }
  }
  torch::set_num_threads(2);
  const int64_t before = path_counts::read(path_counts::Path::kProductsDealt);
  const torch::Tensor big = torch::randn({256, 256});
  const std::vector<torch::Tensor> one = MatrixProducts{}.mm_each({{big, big}});
  const std::vector<torch::Tensor> large = MatrixProducts{}.mm_each({{big, big}, {big.narrow(0, 0, 255), big}});
  EXPECT_EQ(path_counts::read(path_counts::Path::kProductsDealt), before);
  EXPECT_TRUE(torch::equal(one[0], MatrixProducts{}.mm(big, big)));
  EXPECT_TRUE(torch::equal(large[1], MatrixProducts{}.mm(big.narrow(0, 0, 255), big)));
  torch::set_num_threads(threads);
}

// Where the processor has AMX, the per-step operations under bf16 run on its tiles (the operand says
// which kernel took it) and equal AVX512-BF16's to float32 rounding: both sum the same exact products.
// Two row blocks' product over a range of panels (a step team's share): each block's rows equal
// bf16_panel_product's for that block alone, to the bit, in the range's columns, and nothing is
// written outside them; for either block empty, every start (none, a bias row, a matrix, the
// output itself) and both halves of the panels.
TEST(PanelProductsTest, AmxProductOfTwoBlocksEqualsEachBlockAlone) {
  if (bf16_panel_kernel_here() != Bf16PanelKernel::kAmx) GTEST_SKIP() << "this processor has no AMX";
  torch::manual_seed(12);
  int64_t checked = 0;
  for (const int64_t k : {7, 64, 131}) {
    for (const int64_t n : {5, 48, 100, 200}) {
      const torch::Tensor b = torch::randn({n, k}).t();  // a weight's transpose
      std::vector<uint16_t> panels(static_cast<std::size_t>(bf16_panel_elements(k, n)));
      pack_bf16_panels_rounding(b.data_ptr<float>(), k, n, b.stride(0), b.stride(1), panels.data(), 0, (n + 47) / 48);
      const int64_t panel_count = (n + 47) / 48, half = (panel_count + 1) / 2;
      for (const auto& [m0, m1] : {std::pair<int64_t, int64_t>{16, 16}, {9, 16}, {16, 3}, {0, 5}, {7, 0}, {1, 1}}) {
        for (const Init init : {Init::kNone, Init::kRow, Init::kMatrix, Init::kAccumulate}) {
          for (const auto& [first, last] : {std::pair<int64_t, int64_t>{0, half}, {half, panel_count}}) {
            const torch::Tensor a[2] = {torch::randn({m0, k + 2}).narrow(1, 0, k), torch::randn({m1, k})};
            const torch::Tensor start[2] = {torch::randn({m0, n}), torch::randn({m1, n})}, row = torch::randn({n});
            torch::Tensor together[2], alone[2];
            Bf16RowBlock blocks[2];
            for (int s = 0; s < 2; ++s) {
              together[s] = init == Init::kAccumulate ? start[s].clone() : torch::full({a[s].size(0), n}, 7.0f);
              alone[s] = together[s].clone();
              const torch::Tensor& from = init == Init::kRow ? row : init == Init::kMatrix ? start[s] : together[s];
              blocks[s] = {a[s].data_ptr<float>(), a[s].size(0), a[s].stride(0), together[s].data_ptr<float>(), n,
                           init == Init::kNone ? nullptr : from.data_ptr<float>(), init == Init::kRow ? 0 : n};
              const float* alone_start = init == Init::kNone           ? nullptr
                                         : init == Init::kAccumulate ? alone[s].data_ptr<float>()
                                                                     : from.data_ptr<float>();
              bf16_panel_product(Bf16PanelKernel::kAmx, a[s].data_ptr<float>(), a[s].size(0), k, a[s].stride(0),
                                 panels.data(), n, alone[s].data_ptr<float>(), n, alone_start, init == Init::kRow ? 0 : n);
            }
            amx_panel_product_of_two_blocks(blocks, k, panels.data(), n, first, last);
            const int64_t j = std::min(n, first * 48), columns = std::min(n, last * 48) - j;
            for (int s = 0; s < 2; ++s) {
              const std::string where = "k " + std::to_string(k) + " n " + std::to_string(n) + " m " +
                                        std::to_string(m0) + "+" + std::to_string(m1) + " init " +
                                        std::to_string(static_cast<int>(init)) + " panels " + std::to_string(first) +
                                        "-" + std::to_string(last) + " block " + std::to_string(s);
              if (columns > 0) {
                EXPECT_TRUE(torch::equal(together[s].narrow(1, j, columns), alone[s].narrow(1, j, columns))) << where;
              }
              const torch::Tensor untouched = init == Init::kAccumulate ? start[s] : torch::full_like(together[s], 7.0f);
              EXPECT_TRUE(torch::equal(together[s].narrow(1, 0, j), untouched.narrow(1, 0, j))) << where;
              EXPECT_TRUE(torch::equal(together[s].narrow(1, j + columns, n - j - columns),
                                       untouched.narrow(1, j + columns, n - j - columns)))
                  << where;
            }
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 3 * 4 * 6 * 4 * 2);
}

TEST(PanelProductsTest, Bf16StepOperationsOnAmxEqualAvx512Bf16s) {
  if (bf16_panel_kernel_here() != Bf16PanelKernel::kAmx) GTEST_SKIP() << "this processor has no AMX-BF16";
  torch::manual_seed(9);
  const torch::Tensor a = torch::randn({37, 512}), weight = torch::randn({1536, 512}).to(torch::kBFloat16);
  const torch::Tensor bias = torch::randn({1536}), start = torch::randn({37, 1536});
  const MatrixProducts products{true};
  const auto all = [&](bool amx) {
    set_amx_panels_enabled(amx);
    const PanelOperand b = products.panel_operand(weight.t());
    EXPECT_EQ(b.bf16_kernel(), amx ? Bf16PanelKernel::kAmx : Bf16PanelKernel::kAvx512Bf16);
    return test::in_place_operations(products, a, b, bias, start);
  };
  const int64_t run_before = path_counts::read(path_counts::Path::kPanelProducts);
  const std::vector<torch::Tensor> avx512 = all(false);
  const std::vector<torch::Tensor> amx = all(true);
  EXPECT_EQ(path_counts::read(path_counts::Path::kPanelProducts) - run_before, 8);
  for (std::size_t i = 0; i < avx512.size(); ++i) {
    const double difference = (amx[i] - avx512[i]).abs().max().item<double>();
    // sums of 512 exact products of magnitude about 1, in float32: a few 2^-24 relative of about 25
    EXPECT_LT(difference, 1e-4) << "operation " << i;
    EXPECT_GT(amx[i].abs().max().item<double>(), 10.0) << "operation " << i;
  }
}

// The rates `luong train` reads to say that --precision bf16 will not pay: both kernels timed, both
// in panels (the counter moves), no random draw taken; none where panels are off.
TEST(PanelProductsTest, ProductRatesTimeBothKernelsInPanels) {
  if (!bf16_panels_here() || panel_isa_here() == PanelIsa::kNone) GTEST_SKIP() << "no float32 and bf16 panels here";
  torch::manual_seed(5);
  const torch::Tensor expected_draw = torch::rand({4});
  torch::manual_seed(5);
  const int64_t run_before = path_counts::read(path_counts::Path::kPanelProducts);
  const std::optional<PanelProductRates> rates = measure_panel_product_rates(16, 64, 192, 0.005);
  ASSERT_TRUE(rates.has_value());
  EXPECT_TRUE(torch::equal(torch::rand({4}), expected_draw)) << "the measurement drew from the generator";
  EXPECT_GE(path_counts::read(path_counts::Path::kPanelProducts) - run_before, 4);  // a first call and at least one timed, each kernel
  std::printf("  [16, 64] x [64, 192]: float32 %.1f, bf16 %.1f GFLOP/s\n", rates->float32, rates->bf16);
  for (const double rate : {rates->float32, rates->bf16}) {
    EXPECT_GT(rate, 0.1);
    EXPECT_LT(rate, 1e5);
  }
  set_panel_products_enabled(false);
  EXPECT_FALSE(measure_panel_product_rates(16, 64, 192, 0.005).has_value());
  set_panel_products_enabled(true);
  EXPECT_TRUE((PanelProductRates{100, 89}.bf16_slower()));
  EXPECT_FALSE((PanelProductRates{100, 91}.bf16_slower()));
}

}  // namespace
}  // namespace luong::models
