// The hand-differentiated recurrences (models/fused_recurrence.cpp) and loss
// (models/linear_cross_entropy.cpp) against the module path they replace, in double precision: same loss, same gradient for every parameter; and against finite
// differences. Source and target padding vary within each batch.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>

#include "gradient_check.h"
#include "product_operations.h"
#include "luong/models/fused_recurrence.h"
#include "luong/models/gather_rows.h"
#include "luong/models/global_attention.h"
#include "luong/models/luong_decoder.h"
#include "luong/models/matrix_products.h"
#include "luong/models/precision.h"
#include "luong/models/predictive_alignment_attention.h"
#include "luong/models/seq2seq.h"
#include "luong/util/path_counts.h"

namespace luong::models {
namespace {

struct Batch {
  torch::Tensor src, lengths, dec_in, dec_tgt;
};

// Four sentences with different source lengths (2..6) and target lengths (2..5).
Batch padded_batch() {
  return {torch::tensor({{4, 5, 6, 7, 8, 2}, {7, 2, 0, 0, 0, 0}, {9, 4, 2, 0, 0, 0}, {5, 5, 6, 7, 2, 0}}, torch::kLong),
          torch::tensor({6, 2, 3, 5}, torch::kLong),
          torch::tensor({{1, 4, 5, 6, 7}, {1, 6, 0, 0, 0}, {1, 3, 3, 0, 0}, {1, 7, 5, 4, 0}}, torch::kLong),
          torch::tensor({{4, 5, 6, 7, 2}, {6, 2, 0, 0, 0}, {3, 3, 2, 0, 0}, {7, 5, 4, 2, 0}}, torch::kLong)};
}

// A batch of `rows` random sentences: source lengths 1..9, target lengths 1..7, in random order.
Batch random_batch(int64_t rows) {
  const torch::Tensor src_lengths = torch::randint(1, 10, {rows}, torch::kLong);
  const torch::Tensor tgt_lengths = torch::randint(1, 8, {rows}, torch::kLong);
  const auto padded = [](const torch::Tensor& lengths, int64_t width, int64_t low, int64_t high) {
    const torch::Tensor tokens = torch::randint(low, high, {lengths.size(0), width}, torch::kLong);
    return tokens * (torch::arange(width, torch::kLong).unsqueeze(0) < lengths.unsqueeze(1));
  };
  const torch::Tensor words = padded(tgt_lengths - 1, 7, 3, 10);  // the target's words, EOS appended below
  const torch::Tensor positions = torch::arange(7, torch::kLong).unsqueeze(0);
  const torch::Tensor dec_tgt = words + 2 * (positions == (tgt_lengths - 1).unsqueeze(1));
  const torch::Tensor dec_in =
      torch::cat({torch::ones({rows, 1}, torch::kLong), words.narrow(1, 0, 6)}, 1) * (positions < tgt_lengths.unsqueeze(1));
  return {padded(src_lengths, 9, 3, 12), src_lengths, dec_in, dec_tgt};
}

struct Case {
  std::string name;
  ScoreKind score;
  bool scale;
  CellKind cell = CellKind::kGru;
  int64_t layers = 1;
  bool bidirectional = false;
  DecoderKind decoder = DecoderKind::kLuong;
  AttentionKind attention = AttentionKind::kGlobal;
  int64_t window = 1;
  bool renormalize = false;
  int64_t positions = 64;  ///< the location score's W_a rows (below the source length: unscored positions)
};

// A local or location case: `base` (score, cell, layers, decoder) with the attention's own settings.
Case attention_case(std::string name, AttentionKind kind, Case base, int64_t window = 1, bool renormalize = false,
                    int64_t positions = 64) {
  base.name = std::move(name);
  base.attention = kind;
  base.window = window;
  base.renormalize = renormalize;
  base.positions = positions;
  return base;
}
void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

Seq2Seq make_model(const Case& c, torch::ScalarType dtype) {
  torch::manual_seed(11);
  AttentionConfig attention;
  attention.kind = c.attention;
  attention.score = c.score;
  attention.scale = c.scale;
  attention.window = c.window;
  attention.renormalize = c.renormalize;
  attention.positions = c.positions;
  Seq2Seq model(Seq2SeqOptions(12, 10).embed_size(5).hidden_size(6).attention(attention).cell(c.cell).layers(c.layers)
                    .bidirectional(c.bidirectional).decoder(c.decoder));
  model->to(dtype);
  return model;
}

struct LossAndGradients {
  double loss;
  std::vector<std::pair<std::string, torch::Tensor>> gradients;
};

// The names of every autograd node behind `root`.
std::set<std::string> graph_nodes(const torch::Tensor& root) {
  std::set<std::string> names;
  std::vector<torch::autograd::Node*> pending = {root.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  while (!pending.empty()) {
    torch::autograd::Node* node = pending.back();
    pending.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    names.insert(node->name());
    for (const auto& edge : node->next_edges()) pending.push_back(edge.function.get());
  }
  return names;
}

bool has_node(const std::set<std::string>& names, const std::string& part) {
  for (const auto& name : names) {
    if (name.find(part) != std::string::npos) return true;
  }
  return false;
}

// The forward under `precision` (as training runs it), the backward after it.
LossAndGradients run(Seq2Seq& model, bool fused, const Batch& b, Precision precision = Precision::kFloat32) {
  model->set_fused(fused);
  model->zero_grad();
  const LossOutput out = [&] {
    const PrecisionGuard guard(torch::kCPU, precision);
    return model->loss(b.src, b.lengths, b.dec_in, b.dec_tgt, LossAverage::kStep);
  }();
  // The test proves which path ran: the fused kernels are autograd nodes of their own.
  const std::set<std::string> nodes = graph_nodes(out.loss);
  const bool luong = dynamic_cast<const LuongDecoderImpl*>(model->decoder.get()) != nullptr;
  // Every attention, score, cell and depth has its fused decoder now.
  EXPECT_EQ(model->decoder->uses_fused_kernel(torch::kCPU), fused);
  const std::pair<const char*, bool> kernels[] = {{"RecurrentLayerFunction", fused},
                                                  {"LuongTeacherForcedFunction", fused && luong},
                                                  {"BahdanauTeacherForcedFunction", fused && !luong},
                                                  {"LinearCrossEntropyFunction", fused}};
  for (const auto& [kernel, expected] : kernels) {
    EXPECT_EQ(has_node(nodes, kernel), expected) << kernel << (expected ? " did not run" : " ran where it should not");
  }
  out.loss.backward();
  LossAndGradients result{out.loss.item<double>(), {}};
  for (const auto& p : model->named_parameters()) result.gradients.emplace_back(p.key(), p.value().grad().clone());
  return result;
}

class FusedRecurrenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(FusedRecurrenceTest, MatchesTheModulePathInDouble) {
  Seq2Seq model = make_model(GetParam(), torch::kDouble);
  const Batch batch = padded_batch();
  const LossAndGradients fused = run(model, true, batch);
  const LossAndGradients modules = run(model, false, batch);
  std::printf("  %-12s loss fused %.17g modules %.17g\n", GetParam().name.c_str(), fused.loss, modules.loss);
  EXPECT_NEAR(fused.loss, modules.loss, 1e-13 * std::abs(modules.loss));
  ASSERT_EQ(fused.gradients.size(), modules.gradients.size());
  for (std::size_t i = 0; i < fused.gradients.size(); ++i) {
    const torch::Tensor& a = fused.gradients[i].second;
    const torch::Tensor& m = modules.gradients[i].second;
    const double diff = (a - m).abs().max().item<double>();
    const double scale = m.abs().max().item<double>();
    std::printf("  %-12s %-36s max|diff| %.3e  (max|grad| %.3e)\n", GetParam().name.c_str(),
                fused.gradients[i].first.c_str(), diff, scale);
    EXPECT_GT(scale, 0.0) << fused.gradients[i].first << " receives no gradient";
    EXPECT_LE(diff, 1e-12 * scale) << fused.gradients[i].first;
  }
}

// The fused kernels allocate their buffers uninitialised (the packed gate gradients, say) and must
// write every element they read: with LibTorch's deterministic mode filling each new tensor with
// NaN, the fused loss and gradients are still the module path's.
TEST_P(FusedRecurrenceTest, ReadsNoUninitialisedMemory) {
  Seq2Seq model = make_model(GetParam(), torch::kDouble);
  const Batch batch = padded_batch();
  const LossAndGradients modules = run(model, false, batch);
  struct PoisonEmptyTensors {
    PoisonEmptyTensors() {
      at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
      at::globalContext().setDeterministicFillUninitializedMemory(true);
    }
    ~PoisonEmptyTensors() { at::globalContext().setDeterministicAlgorithms(false, false); }
  };
  LossAndGradients fused;
  {
    const PoisonEmptyTensors poison;
    ASSERT_TRUE(torch::empty({4}, torch::kDouble).isnan().all().item<bool>()) << "new tensors are not poisoned";
    fused = run(model, true, batch);
  }
  EXPECT_NEAR(fused.loss, modules.loss, 1e-13 * std::abs(modules.loss));
  ASSERT_EQ(fused.gradients.size(), modules.gradients.size());
  for (std::size_t i = 0; i < fused.gradients.size(); ++i) {
    const torch::Tensor& m = modules.gradients[i].second;
    EXPECT_LE((fused.gradients[i].second - m).abs().max().item<double>(), 1e-12 * m.abs().max().item<double>())
        << fused.gradients[i].first;
  }
}

TEST_P(FusedRecurrenceTest, MatchesFiniteDifferences) {
  Seq2Seq model = make_model(GetParam(), torch::kDouble);
  const Batch b = padded_batch();
  std::vector<std::pair<std::string, torch::Tensor>> params;
  for (const auto& p : model->named_parameters()) params.emplace_back(p.key(), p.value());
  const auto loss = [&] { return model->loss(b.src, b.lengths, b.dec_in, b.dec_tgt).loss; };
  // The stacked variants have ~10x the parameters; a strided sample of 24 entries each keeps them
  // inside the suite's time (every entry of the one-layer ones is checked).
  const int64_t max_entries = GetParam().layers > 1 ? 24 : 0;
  for (const auto& r : test::check_gradients(params, loss, 1e-3, max_entries)) {
    std::printf("  %-12s %-36s max|diff| %.3e  rel %.3e\n", GetParam().name.c_str(), r.name.c_str(), r.max_abs_diff,
                r.max_rel_diff);
    EXPECT_LE(r.max_rel_diff, 1e-6) << r.name;
  }
}

// Float32: the loss and every gradient within 1e-5 of the module path's (relative to its largest).
void expect_within_float_rounding(const LossAndGradients& fused, const LossAndGradients& modules) {
  EXPECT_NEAR(fused.loss, modules.loss, 1e-5 * std::abs(modules.loss));
  for (std::size_t i = 0; i < fused.gradients.size(); ++i) {
    const torch::Tensor& m = modules.gradients[i].second;
    EXPECT_LE((fused.gradients[i].second - m).abs().max().item<double>(), 1e-5 * m.abs().max().item<double>())
        << fused.gradients[i].first;
  }
}

TEST_P(FusedRecurrenceTest, MatchesTheModulePathInFloat) {
  Seq2Seq model = make_model(GetParam(), torch::kFloat);
  const Batch batch = padded_batch();
  const LossAndGradients fused = run(model, true, batch);
  const LossAndGradients modules = run(model, false, batch);
  expect_within_float_rounding(fused, modules);
}

// Counts LibTorch's float32 matrix products (MKL's) with an operand that is neither dense nor a
// transposed dense tensor, such as a column slice of a weight, on every thread.
std::atomic<int> strided_float32_products{0};

bool dense_or_transposed(const torch::Tensor& t) {
  return t.dim() == 2 && (t.is_contiguous() || (t.stride(0) == 1 && t.stride(1) == t.size(0)));
}

// oneDNN for every float32 product of the fused kernels (--float32-products onednn; `auto` gives
// it the large ones on AMD processors with AVX-512): the module path's loss and gradients, which MKL
// computes, and the products really ran in oneDNN.
TEST_P(FusedRecurrenceTest, OneDnnFloat32ProductsMatchTheModulePath) {
  if (!onednn_float32_available()) GTEST_SKIP() << "LibTorch's oneDNN product needs AVX-512 BW, VL and DQ here";
  Seq2Seq model = make_model(GetParam(), torch::kFloat);
  const Batch batch = padded_batch();
  const LossAndGradients modules = run(model, false, batch);
  const Float32Products before = float32_products();
  set_float32_products(Float32Products::kOneDnn);
  const int64_t products_before = path_counts::read(path_counts::Path::kOneDnnFloat32Products);
  strided_float32_products = 0;
  const auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        const std::string name = fn.name();
        const std::size_t first = name == "aten::mm" ? 0 : name == "aten::addmm" ? 1 : 2;  // the two factors
        const auto inputs = fn.inputs();
        if (first < 2 && inputs.size() >= first + 2 && inputs[first].isTensor() && inputs[first + 1].isTensor() &&
            inputs[first].toTensor().scalar_type() == torch::kFloat &&
            (!dense_or_transposed(inputs[first].toTensor()) || !dense_or_transposed(inputs[first + 1].toTensor()))) {
          ++strided_float32_products;
        }
        return nullptr;
      }).needsInputs(true));
  const LossAndGradients fused = run(model, true, batch);
  at::removeCallback(handle);
  const int64_t products = path_counts::read(path_counts::Path::kOneDnnFloat32Products) - products_before;
  set_float32_products(before);
  EXPECT_GT(products, 0) << "no product ran in oneDNN";
  // oneDNN would copy such an operand per product, so MatrixProducts leaves it to MKL; the Luong
  // decoder's kernel hands its products dense or transposed operands (layer 0's input-weight slices
  // and concat's query half of W_a are copied once per call), and the module-side key projection on
  // W_a's other half makes its slice dense (linear_through_products). Not counted here: the
  // Bahdanau-style decoder, whose per-step context is a column block of its [context; h] buffer.
  if (GetParam().decoder == DecoderKind::kLuong) {
    EXPECT_EQ(strided_float32_products.load(), 0) << "products with a strided operand ran in MKL";
  }
  expect_within_float_rounding(fused, modules);
}

// The per-step products in panels (models/panel_products.h, on by default where the processor has a
// kernel) against the module path, and against the same kernels with the panels off: the products
// really ran in panels, and none did with them off.
TEST_P(FusedRecurrenceTest, PanelProductsMatchTheModulePathAndTheLibraries) {
  if (panel_isa_here() == PanelIsa::kNone) GTEST_SKIP() << "this processor has no panel kernel";
  Seq2Seq model = make_model(GetParam(), torch::kFloat);
  const Batch batch = padded_batch();
  const LossAndGradients modules = run(model, false, batch);
  const bool before = panel_products_enabled();
  set_panel_products_enabled(false);
  const int64_t off_before = path_counts::read(path_counts::Path::kPanelProducts);
  const LossAndGradients library = run(model, true, batch);
  EXPECT_EQ(path_counts::read(path_counts::Path::kPanelProducts), off_before) << "a product ran in panels with the panels off";
  set_panel_products_enabled(true);
  const int64_t on_before = path_counts::read(path_counts::Path::kPanelProducts);
  const LossAndGradients panels = run(model, true, batch);
  const int64_t products = path_counts::read(path_counts::Path::kPanelProducts) - on_before;
  set_panel_products_enabled(before);
  EXPECT_GT(products, 0) << "no product ran in panels";
  expect_within_float_rounding(panels, modules);
  expect_within_float_rounding(panels, library);
}

// Every MatrixProducts operation through oneDNN equals MKL's: into a block of rows of a wider buffer,
// with a transposed weight, accumulating; and `auto` sends a shape below a million multiply-adds to MKL.
TEST(MatrixProductsTest, OneDnnEqualsMklForEveryOperation) {
  if (!onednn_float32_available()) GTEST_SKIP() << "LibTorch's oneDNN product needs AVX-512 BW, VL and DQ here";
  torch::manual_seed(5);
  const torch::Tensor a = torch::randn({48, 160}), weight = torch::randn({96, 160}), bias = torch::randn({96});
  const torch::Tensor b = weight.t();  // [160, 96], as the kernels pass nn.Linear's weights
  const torch::Tensor start = torch::randn({48, 96});
  const auto all = [&](Float32Products choice) {
    set_float32_products(choice);
    const MatrixProducts products;
    std::vector<torch::Tensor> out;
    out.push_back(products.mm(a, b));
    out.push_back(products.addmm(bias, a, b));
    for (const torch::Tensor& t : test::in_place_operations(products, a, b, bias, start)) out.push_back(t);
    return out;
  };
  const Float32Products before = float32_products();
  const std::vector<torch::Tensor> mkl = all(Float32Products::kMkl);
  const int64_t products_before = path_counts::read(path_counts::Path::kOneDnnFloat32Products);
  const std::vector<torch::Tensor> onednn = all(Float32Products::kOneDnn);
  EXPECT_EQ(path_counts::read(path_counts::Path::kOneDnnFloat32Products) - products_before, 6);
  set_float32_products(Float32Products::kAuto);
  const int64_t auto_before = path_counts::read(path_counts::Path::kOneDnnFloat32Products);
  const torch::Tensor small = MatrixProducts{}.mm(a, b);  // 48 x 160 x 96: 0.7 million multiply-adds
  EXPECT_EQ(path_counts::read(path_counts::Path::kOneDnnFloat32Products), auto_before);
  EXPECT_TRUE(torch::equal(small, mkl[0]));
  set_float32_products(before);
  for (std::size_t i = 0; i < mkl.size(); ++i) {
    EXPECT_TRUE(torch::allclose(onednn[i], mkl[i], 1e-5, 1e-4)) << "operation " << i;
  }
  EXPECT_TRUE(torch::allclose(onednn[2].narrow(1, 0, 16), torch::zeros({48, 16}))) << "wrote outside its block";
}

// linear_through_products is nn::Linear's function: with oneDNN chosen, its forward and both
// backward products run there (3 oneDNN products a call), also for a column slice of a wider weight
// (concat's key projection), whose gradient lands in the slice alone; with MKL chosen it is
// torch::linear itself (no oneDNN product).
TEST(MatrixProductsTest, LinearThroughProductsEqualsTorchLinear) {
  if (!onednn_float32_available()) GTEST_SKIP() << "LibTorch's oneDNN product needs AVX-512 BW, VL and DQ here";
  torch::manual_seed(9);
  const torch::Tensor x0 = torch::randn({4, 7, 160}), wide0 = torch::randn({96, 320}), bias0 = torch::randn({96});
  const torch::Tensor weights = torch::randn({4, 7, 96});  // the loss's weights on the outputs
  struct Result {
    torch::Tensor y, dx, dwide, dbias;
  };
  const auto run = [&](Float32Products choice, bool with_bias) {
    set_float32_products(choice);
    const torch::Tensor x = x0.clone().requires_grad_(), wide = wide0.clone().requires_grad_();
    const torch::Tensor bias = bias0.clone().requires_grad_();
    const torch::Tensor y = linear_through_products(x, wide.narrow(1, 100, 160), with_bias ? bias : torch::Tensor());
    (y * weights).sum().backward();
    return Result{y.detach(), x.grad(), wide.grad(), with_bias ? bias.grad() : torch::Tensor()};
  };
  const Float32Products before = float32_products();
  for (const bool with_bias : {true, false}) {
    const int64_t start = path_counts::read(path_counts::Path::kOneDnnFloat32Products);
    const Result mkl = run(Float32Products::kMkl, with_bias);
    EXPECT_EQ(path_counts::read(path_counts::Path::kOneDnnFloat32Products), start) << "MKL's choice ran a oneDNN product";
    const Result onednn = run(Float32Products::kOneDnn, with_bias);
    EXPECT_EQ(path_counts::read(path_counts::Path::kOneDnnFloat32Products) - start, 3) << "forward and both backward products in oneDNN";
    ASSERT_EQ(onednn.y.sizes(), torch::IntArrayRef({4, 7, 96}));
    EXPECT_TRUE(torch::allclose(onednn.y, mkl.y, 1e-5, 1e-4));
    EXPECT_TRUE(torch::allclose(onednn.dx, mkl.dx, 1e-5, 1e-4));
    EXPECT_TRUE(torch::allclose(onednn.dwide, mkl.dwide, 1e-5, 1e-4));
    EXPECT_TRUE(torch::equal(onednn.dwide.narrow(1, 0, 100), torch::zeros({96, 100}))) << "gradient outside the slice";
    EXPECT_GT(onednn.dwide.narrow(1, 100, 160).abs().max().item<float>(), 0.0f);
    if (with_bias) {
      EXPECT_TRUE(torch::allclose(onednn.dbias, mkl.dbias, 1e-5, 1e-4));
    }
    // The same function as the reference nn::Linear computes, in double.
    const torch::Tensor reference = torch::linear(x0.to(torch::kDouble), wide0.narrow(1, 100, 160).to(torch::kDouble),
                                                  with_bias ? bias0.to(torch::kDouble) : torch::Tensor());
    EXPECT_TRUE(torch::allclose(onednn.y.to(torch::kDouble), reference, 1e-5, 1e-4));
  }
  set_float32_products(before);
}

// Counts LibTorch's matrix products with bf16 operands, on every thread (the kernels' products run on
// the intra-op pool's threads), the module ops' under autocast among them.
std::atomic<int> bf16_products_seen{0};

double relative_difference(const torch::Tensor& a, const torch::Tensor& reference) {
  return (a - reference).norm().item<double>() / reference.norm().item<double>();
}

// bf16 precision: the fused kernels' products in bf16 (in bf16 panels where the processor has
// AVX512-BF16, every one of them; elsewhere in LibTorch's bf16 product, which the observer sees), the loss and every
// gradient within bf16's rounding of the float32 module path, and so are the modules under LibTorch's
// autocast; and bf16 is really what the result came from (it differs from float32's).
TEST_P(FusedRecurrenceTest, Bf16StaysCloseToFloat32AndTheModulePath) {
  Seq2Seq model = make_model(GetParam(), torch::kFloat);
  const Batch batch = padded_batch();
  const LossAndGradients reference = run(model, false, batch);
  const LossAndGradients fused32 = run(model, true, batch);
  bf16_products_seen = 0;
  const auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        const auto inputs = fn.inputs();
        if (std::string(fn.name()) == "aten::mm" && !inputs.empty() && inputs[0].isTensor() &&
            inputs[0].toTensor().scalar_type() == torch::kBFloat16) {
          ++bf16_products_seen;
        }
        return nullptr;
      }).needsInputs(true));
  const int64_t panels_before = path_counts::read(path_counts::Path::kPanelProducts), library_before = path_counts::read(path_counts::Path::kBf16LibraryProducts);
  const LossAndGradients fused16 = run(model, true, batch, Precision::kBFloat16);
  const int64_t bf16_panel_products = path_counts::read(path_counts::Path::kPanelProducts) - panels_before;
  const int64_t library_products = path_counts::read(path_counts::Path::kBf16LibraryProducts) - library_before;
  const int fused_products = bf16_products_seen.exchange(0);
  const LossAndGradients modules16 = run(model, false, batch, Precision::kBFloat16);
  at::removeCallback(handle);
  // Where the processor has AVX512-BF16, every product of the fused kernels runs in bf16 panels, the
  // whole batch's too (their float32 a operands rounded as the kernels go); elsewhere in LibTorch's
  // bf16 product.
  if (bf16_panels_here() && panel_products_enabled()) {
    EXPECT_GT(bf16_panel_products, 0) << "no bf16 panel product ran";
    EXPECT_EQ(library_products, 0) << "a product left the bf16 panels for LibTorch's bf16 product";
  } else {
    EXPECT_GT(fused_products, 0) << "the fused kernels multiplied nothing in bf16";
    EXPECT_GT(library_products, 0);
  }
  const double loss_change = std::abs(fused16.loss - fused32.loss) / std::abs(reference.loss);
  std::printf("  %-12s loss float32 %.6f, bf16 fused %.6f / modules %.6f; bf16 products: %lld in panels, %lld in LibTorch\n",
              GetParam().name.c_str(), reference.loss, fused16.loss, modules16.loss,
              static_cast<long long>(bf16_panel_products), static_cast<long long>(library_products));
  EXPECT_GT(loss_change, 1e-6) << "bf16 changed nothing: the products ran in float32";
  EXPECT_LE(loss_change, 1e-2);
  EXPECT_NEAR(modules16.loss, reference.loss, 1e-2 * std::abs(reference.loss));
  double worst_fused = 0, worst_modules = 0;
  for (std::size_t i = 0; i < reference.gradients.size(); ++i) {
    const std::string& name = reference.gradients[i].first;
    const torch::Tensor& g = reference.gradients[i].second;
    const double fused_error = relative_difference(fused16.gradients[i].second, g);
    const double module_error = relative_difference(modules16.gradients[i].second, g);
    worst_fused = std::max(worst_fused, fused_error);
    worst_modules = std::max(worst_modules, module_error);
    EXPECT_LE(fused_error, 5e-2) << name << " (fused)";
    // Autocast runs local-p's position predictor (v_p . tanh(W_p h), a [1, H] Linear) in bf16 too; its
    // rounding, times (S - 1) sigmoid' into p_t and through the Gaussian, puts the module path's
    // predictor gradients up to 7.4e-2 from float32 (measured). The fused kernel keeps that dot
    // product in float32 and is held to 5e-2 like every other gradient.
    const bool autocast_predictor = name.find("position_") != std::string::npos;
    EXPECT_LE(module_error, autocast_predictor ? 1e-1 : 5e-2) << name << " (modules under autocast)";
  }
  std::printf("  %-12s worst relative gradient difference from float32: fused %.3e, modules %.3e\n",
              GetParam().name.c_str(), worst_fused, worst_modules);
}

// Twenty rows, so that the fused kernels split the batch into blocks over the intra-op threads (one
// block per thread, eight rows at least): 1, 2 and 3 threads each equal the module path.
// On 2 threads a batch of 20 rows runs in two row blocks side by side; under bf16 in AMX panels the
// Luong decoder's blocks make each step's products together (StepTeam: both blocks' rows, half the
// columns each). The loss and every gradient are those of each block on its own, to the bit, and the
// teams really ran (none for Bahdanau's decoder, whose steps keep their own products).
TEST_P(FusedRecurrenceTest, Bf16StepTeamsEqualEachBlockAlone) {
  if (bf16_panel_kernel() != Bf16PanelKernel::kAmx || !panel_products_enabled()) {
    GTEST_SKIP() << "step teams need AMX panels";
  }
  Seq2Seq model = make_model(GetParam(), torch::kFloat);
  torch::manual_seed(4);
  const Batch batch = random_batch(20);  // two row blocks on 2 threads
  const int threads_before = torch::get_num_threads();
  torch::set_num_threads(2);
  const bool teams_before = step_teams_enabled();
  set_step_teams_enabled(false);
  const int64_t before_alone = path_counts::read(path_counts::Path::kStepTeamProducts);
  const LossAndGradients alone = run(model, true, batch, Precision::kBFloat16);
  const int64_t during_alone = path_counts::read(path_counts::Path::kStepTeamProducts) - before_alone;
  set_step_teams_enabled(true);
  const int64_t before_teams = path_counts::read(path_counts::Path::kStepTeamProducts);
  const LossAndGradients teams = run(model, true, batch, Precision::kBFloat16);
  const int64_t during_teams = path_counts::read(path_counts::Path::kStepTeamProducts) - before_teams;
  set_step_teams_enabled(teams_before);
  torch::set_num_threads(threads_before);
  EXPECT_EQ(during_alone, 0);
  if (GetParam().decoder == DecoderKind::kLuong) {
    EXPECT_GT(during_teams, 0) << "no step product ran in a team";
  } else {
    EXPECT_EQ(during_teams, 0);
  }
  EXPECT_EQ(teams.loss, alone.loss);
  ASSERT_EQ(teams.gradients.size(), alone.gradients.size());
  for (std::size_t i = 0; i < teams.gradients.size(); ++i) {
    EXPECT_TRUE(torch::equal(teams.gradients[i].second, alone.gradients[i].second)) << teams.gradients[i].first;
  }
}

TEST_P(FusedRecurrenceTest, MatchesTheModulePathOnEveryThreadCount) {
  Seq2Seq model = make_model(GetParam(), torch::kDouble);
  torch::manual_seed(3);
  const Batch batch = random_batch(20);
  const int threads_before = torch::get_num_threads();
  const LossAndGradients modules = run(model, false, batch);
  for (int threads : {1, 2, 3}) {
    torch::set_num_threads(threads);
    const LossAndGradients fused = run(model, true, batch);
    EXPECT_NEAR(fused.loss, modules.loss, 1e-13 * std::abs(modules.loss)) << threads << " threads";
    for (std::size_t i = 0; i < fused.gradients.size(); ++i) {
      const torch::Tensor& m = modules.gradients[i].second;
      EXPECT_LE((fused.gradients[i].second - m).abs().max().item<double>(), 1e-12 * m.abs().max().item<double>())
          << fused.gradients[i].first << ", " << threads << " threads";
    }
  }
  torch::set_num_threads(threads_before);
}

INSTANTIATE_TEST_SUITE_P(Scores, FusedRecurrenceTest,
                         ::testing::Values(Case{"dot", ScoreKind::kDot, true}, Case{"general", ScoreKind::kGeneral, true},
                                           Case{"dot_unscaled", ScoreKind::kDot, false},
                                           Case{"lstm", ScoreKind::kDot, true, CellKind::kLstm},
                                           Case{"gru_2layer_bidirectional", ScoreKind::kGeneral, true, CellKind::kGru, 2, true},
                                           Case{"lstm_3layer_bidirectional", ScoreKind::kDot, true, CellKind::kLstm, 3, true},
                                           Case{"bahdanau_general", ScoreKind::kGeneral, true, CellKind::kGru, 1, false,
                                                DecoderKind::kBahdanau},
                                           Case{"bahdanau_lstm_2layer_bidirectional", ScoreKind::kDot, true,
                                                CellKind::kLstm, 2, true, DecoderKind::kBahdanau},
                                           Case{"concat", ScoreKind::kConcat, true},
                                           attention_case("location", AttentionKind::kGlobal,
                                                          Case{"", ScoreKind::kLocation, true}, 1, false, 4),
                                           attention_case("local_m_dot", AttentionKind::kLocalMonotonic,
                                                          Case{"", ScoreKind::kDot, true}),
                                           attention_case("local_m_general_lstm", AttentionKind::kLocalMonotonic,
                                                          Case{"", ScoreKind::kGeneral, false, CellKind::kLstm}),
                                           // Late steps' windows lie past W_a's 2 positions: weights 1/S there.
                                           attention_case("local_m_location_unscored", AttentionKind::kLocalMonotonic,
                                                          Case{"", ScoreKind::kLocation, true}, 1, false, 2),
                                           attention_case("local_p_general", AttentionKind::kLocalPredictive,
                                                          Case{"", ScoreKind::kGeneral, true}),
                                           attention_case("local_p_concat_renormalized", AttentionKind::kLocalPredictive,
                                                          Case{"", ScoreKind::kConcat, true}, 2, true),
                                           attention_case("local_p_location_lstm_2layer_bidirectional",
                                                          AttentionKind::kLocalPredictive,
                                                          Case{"", ScoreKind::kLocation, true, CellKind::kLstm, 2, true},
                                                          1, false, 4),
                                           Case{"bahdanau_concat", ScoreKind::kConcat, true, CellKind::kGru, 1, false,
                                                DecoderKind::kBahdanau},
                                           attention_case("bahdanau_local_p_dot", AttentionKind::kLocalPredictive,
                                                          Case{"", ScoreKind::kDot, true, CellKind::kGru, 1, false,
                                                               DecoderKind::kBahdanau}),
                                           attention_case("bahdanau_local_m_location_lstm", AttentionKind::kLocalMonotonic,
                                                          Case{"", ScoreKind::kLocation, true, CellKind::kLstm, 1, false,
                                                               DecoderKind::kBahdanau},
                                                          2, false, 3)),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });


// Many rows on 3 threads: the kernels deal the rows over 3 blocks by length and compute the real
// tokens alone (the encoder's per source length, the decoder's per target length), and the loss and
// every gradient equal the module path's in double.
TEST(FusedPaddingTest, ManyRowsOnThreeThreadsSkipThePaddingAndMatchTheModulePath) {
  const int threads_before = torch::get_num_threads();
  torch::set_num_threads(3);
  const Case cases[] = {
      Case{"luong_lstm_2_layers", ScoreKind::kGeneral, true, CellKind::kLstm, 2, true},
      attention_case("bahdanau_local_p_concat", AttentionKind::kLocalPredictive,
                     Case{"", ScoreKind::kConcat, false, CellKind::kGru, 1, true, DecoderKind::kBahdanau}, 2, true),
      attention_case("luong_local_m_location", AttentionKind::kLocalMonotonic,
                     Case{"", ScoreKind::kLocation, false, CellKind::kGru, 2, false}, 1, false, 5)};
  for (const Case& c : cases) {
    Seq2Seq model = make_model(c, torch::kDouble);
    torch::manual_seed(30);
    const Batch b = random_batch(26);
    const int64_t before = path_counts::read(path_counts::Path::kFusedRecurrentRows);
    const LossAndGradients fused = run(model, true, b);
    const int64_t encoder_runs = c.layers * (c.bidirectional ? 2 : 1);
    const int64_t target_tokens = b.dec_tgt.ne(0).sum().item<int64_t>();
    EXPECT_EQ(path_counts::read(path_counts::Path::kFusedRecurrentRows) - before,
              2 * (encoder_runs * b.lengths.sum().item<int64_t>() + target_tokens))
        << c.name << ": of " << 2 * (encoder_runs * 26 * 9 + 26 * 7) << " padded";
    const LossAndGradients modules = run(model, false, b);
    EXPECT_NEAR(fused.loss, modules.loss, 1e-13 * std::abs(modules.loss)) << c.name;
    for (std::size_t i = 0; i < fused.gradients.size(); ++i) {
      const torch::Tensor& m = modules.gradients[i].second;
      const double scale = m.abs().max().item<double>();
      EXPECT_LE((fused.gradients[i].second - m).abs().max().item<double>(), 1e-12 * std::max(1.0, scale))
          << c.name << " " << fused.gradients[i].first;
    }
  }
  torch::set_num_threads(threads_before);
}

// A diverged run (NaN weights) through local-p: p_t is NaN, which the kernel must not turn into a
// window (an integer conversion of NaN); the loss comes out NaN, as the module path's does.
TEST(FusedAttentionTest, NonFinitePositionGivesANonFiniteLossInBothDecoders) {
  for (const DecoderKind decoder : {DecoderKind::kLuong, DecoderKind::kBahdanau}) {
    Case c = attention_case("local_p", AttentionKind::kLocalPredictive, Case{"", ScoreKind::kGeneral, true}, 1, true);
    c.decoder = decoder;
    Seq2Seq model = make_model(c, torch::kFloat);
    auto& local = dynamic_cast<PredictiveAlignmentAttentionImpl&>(model->decoder->attention());
    {
      const torch::NoGradGuard no_grad;
      local.position_predictor->bias.fill_(std::numeric_limits<float>::quiet_NaN());
    }
    const Batch b = padded_batch();
    for (const bool fused : {true, false}) {
      model->set_fused(fused);
      const LossOutput out = model->loss(b.src, b.lengths, b.dec_in, b.dec_tgt, LossAverage::kStep);
      EXPECT_FALSE(std::isfinite(out.loss.item<double>())) << options::enum_name(decoder) << (fused ? " fused" : " modules");
      out.loss.backward();
    }
  }
}

TEST(FusedGruSequenceTest, EqualsPackedGru) {
  torch::manual_seed(5);
  torch::nn::GRU gru(torch::nn::GRUOptions(3, 4).batch_first(true));
  gru->to(torch::kDouble);
  const torch::Tensor x = torch::randn({3, 5, 3}, torch::kDouble);
  const torch::Tensor lengths = torch::tensor({5, 1, 3}, torch::kLong);
  namespace rnn = torch::nn::utils::rnn;
  auto [packed, hidden] =
      gru->forward_with_packed_input(rnn::pack_padded_sequence(x, lengths, true, /*enforce_sorted=*/false));
  const torch::Tensor expected = std::get<0>(rnn::pad_packed_sequence(packed, true, 0.0, 5));
  auto [outputs, last] = fused_gru_sequence(x, lengths, GruWeights::of(gru));
  EXPECT_LE((outputs - expected).abs().max().item<double>(), 1e-15);
  EXPECT_LE((last - hidden[0]).abs().max().item<double>(), 1e-15);
  EXPECT_EQ(outputs[1].narrow(0, 1, 4).abs().max().item<double>(), 0.0);  // zero past the length
}

// gather_rows (the CPU's embedding lookups and the loss's real-token rows) against LibTorch's
// embedding and index_select in double: the rows and the table's gradient exactly, with repeated
// rows and a skipped (padding) row, and its own autograd node in the graph.
TEST(GatherRowsTest, EqualsLibTorchsEmbeddingAndIndexSelect) {
  torch::manual_seed(8);
  const torch::Tensor table = torch::randn({7, 5}, torch::kDouble);
  const torch::Tensor rows = torch::tensor({3, 0, 3, 6, 0, 1, 3}, torch::kLong);
  const torch::Tensor upstream = torch::randn({7, 5}, torch::kDouble);
  for (const std::optional<int64_t> skip : {std::optional<int64_t>(), std::optional<int64_t>(0)}) {
    torch::Tensor mine = table.clone().requires_grad_(), theirs = table.clone().requires_grad_();
    const torch::Tensor got = gather_rows(mine, rows, skip);
    EXPECT_TRUE(has_node(graph_nodes(got), "GatherRowsFunction"));
    const torch::Tensor expected = skip ? torch::embedding(theirs, rows, *skip) : theirs.index_select(0, rows);
    EXPECT_TRUE(torch::equal(got, expected));
    (got * upstream).sum().backward();
    (expected * upstream).sum().backward();
    EXPECT_TRUE(torch::equal(mine.grad(), theirs.grad())) << (skip ? "with" : "without") << " a skipped row";
    if (skip) {
      EXPECT_EQ(mine.grad()[0].abs().max().item<double>(), 0.0);
    }
  }
  EXPECT_THROW(gather_rows(table, torch::tensor({7}, torch::kLong)), c10::Error);
}

// A table of thousands of rows (its backward split over the threads), rows gathered many times
// over: each table row's gradient is its rows' added in their order onto zero, as index_add_ adds.
TEST(GatherRowsTest, BackwardOfALargeTableEqualsIndexAdd) {
  torch::manual_seed(9);
  const int64_t height = 3001, width = 64;
  const torch::Tensor table = torch::randn({height, width}, torch::kDouble).requires_grad_();
  const torch::Tensor rows = torch::randint(0, height / 3, {5000}, torch::kLong);  // about 5 uses a row
  const torch::Tensor upstream = torch::randn({5000, width}, torch::kDouble);
  for (const std::optional<int64_t> skip : {std::optional<int64_t>(), std::optional<int64_t>(2)}) {
    table.mutable_grad() = torch::Tensor();
    (gather_rows(table, rows, skip) * upstream).sum().backward();
    const torch::Tensor kept = skip ? rows.ne(*skip).nonzero().squeeze(1) : torch::arange(5000);
    const torch::Tensor expected =
        torch::zeros({height, width}, torch::kDouble).index_add_(0, rows.index_select(0, kept), upstream.index_select(0, kept));
    EXPECT_TRUE(torch::equal(table.grad(), expected)) << (skip ? "with" : "without") << " a skipped row";
    EXPECT_EQ(table.grad().narrow(0, height / 3, height - height / 3).abs().max().item<double>(), 0.0);
  }
}

// The GPU's recurrence (sequence_padded: per layer and direction over the padded rows, reversed
// within each row's length backwards, final states gathered at each row's end; an LSTM stepped)
// against the packed stack, in double on the CPU: outputs, final states and the gradients of the
// input and every weight, to 1e-12, with extra padding steps that must change nothing.
TEST(PaddedSequenceTest, EqualsThePackedStackAndItsGradients) {
  for (const CellKind cell : {CellKind::kGru, CellKind::kLstm}) {
    for (const int64_t layers : {1, 2, 3}) {
      for (const bool bidirectional : {false, true}) {
        const std::string name = std::string(options::enum_name(cell)) + " " + std::to_string(layers) + " layers" +
                                 (bidirectional ? " bidirectional" : "");
        torch::manual_seed(31);
        torch::nn::Module owner;
        RecurrentLayers rnn = register_recurrent(
            owner, RecurrentOptions(3, 4).cell(cell).layers(layers).bidirectional(bidirectional));
        owner.to(torch::kDouble);
        const torch::Tensor lengths = torch::tensor({5, 1, 3, 2}, torch::kLong);
        const torch::Tensor x = torch::randn({4, 5, 3}, torch::kDouble);
        const torch::Tensor extra = torch::randn({4, 3, 3}, torch::kDouble);  // past every row's end
        const auto outputs_and_gradients = [&](bool padded) {
          owner.zero_grad();
          torch::Tensor input = (padded ? torch::cat({x, extra}, 1) : x).clone().requires_grad_();
          auto [out, state] = padded ? rnn.sequence_padded(input, lengths, /*training=*/true) : rnn.sequence(input, lengths);
          out = out.narrow(1, 0, 5);
          torch::Tensor total = (out * torch::linspace(-1, 1, out.numel(), torch::kDouble).view(out.sizes())).sum() +
                                (state.hidden * state.hidden).sum();
          if (state.cell.defined()) total = total + state.cell.sin().sum();
          total.backward();
          std::vector<torch::Tensor> results = {out, state.hidden, input.grad().narrow(1, 0, 5)};
          if (state.cell.defined()) results.push_back(state.cell);
          for (const torch::Tensor& w : rnn.all_weights()) results.push_back(w.grad().clone());
          if (padded) {
            EXPECT_EQ(input.grad().narrow(1, 5, 3).abs().max().item<double>(), 0.0) << name;
          }
          return results;
        };
        const auto expected = outputs_and_gradients(false), got = outputs_and_gradients(true);
        ASSERT_EQ(expected.size(), got.size()) << name;
        for (std::size_t k = 0; k < got.size(); ++k) {
          EXPECT_LE((got[k] - expected[k]).abs().max().item<double>(), 1e-12) << name << ", result " << k;
        }
      }
    }
  }
}

// padded_loss (every position, padding weighted zero; the GPU's and CUDA graphs' loss) equals loss()
// in double, for both averages, with the batch padded by extra source and target steps: the loss,
// the summed loss and every parameter's gradient to 1e-12.
TEST(PaddedLossTest, EqualsTheLossOfTheRealTokensWithExtraPadding) {
  Case bidirectional{"gru bidirectional 2 layers", ScoreKind::kGeneral, false};
  bidirectional.layers = 2;
  bidirectional.bidirectional = true;
  for (const LossAverage average : {LossAverage::kToken, LossAverage::kStep}) {
    Seq2Seq model = make_model(bidirectional, torch::kDouble);
    model->set_fused(false);
    const Batch b = padded_batch();
    const auto gradients = [&] {
      std::vector<torch::Tensor> out;
      for (const torch::Tensor& p : model->parameters()) out.push_back(p.grad().clone());
      model->zero_grad();
      return out;
    };
    model->zero_grad();
    const LossOutput expected = model->loss(b.src, b.lengths, b.dec_in, b.dec_tgt, {average, 0.1});
    expected.loss.backward();
    const auto expected_gradients = gradients();
    const auto pad = [](const torch::Tensor& t, int64_t steps) { return torch::constant_pad_nd(t, {0, steps}, 0); };
    const LossOutput got =
        model->padded_loss(pad(b.src, 3), b.lengths, pad(b.dec_in, 4), pad(b.dec_tgt, 4), {average, 0.1});
    got.loss.backward();
    const auto got_gradients = gradients();
    const std::string name(options::enum_name(average));
    EXPECT_NEAR(got.loss.item<double>(), expected.loss.item<double>(), 1e-12) << name;
    EXPECT_NEAR(got.sum.item<double>(), expected.sum.item<double>(), 1e-12) << name;
    for (std::size_t k = 0; k < got_gradients.size(); ++k) {
      EXPECT_LE((got_gradients[k] - expected_gradients[k]).abs().max().item<double>(), 1e-12) << name << " " << k;
    }
  }
}

// The decoder kernel with dropout masks on h~ and between stacked layers against the same recurrence
// written with LibTorch's ops and the same masks, in double: values and every input's gradient.
TEST(FusedLuongDecoderTest, DropoutMasksMatchTheStepLoop) {
  for (const int64_t L : {1, 2, 3}) {
    for (const CellKind cell : {CellKind::kGru, CellKind::kLstm}) {
      const std::string name = std::string(options::enum_name(cell)) + " " + std::to_string(L) + " layers";
      torch::manual_seed(12);
      const int64_t B = 3, T = 4, S = 5, E = 3, H = 4;
      torch::nn::Module owner;
      RecurrentLayers rnn = register_recurrent(owner, RecurrentOptions(E + H, H).cell(cell).layers(L).dropout(0.3));
      torch::nn::Linear wc(2 * H, H);
      owner.to(torch::kDouble);
      wc->to(torch::kDouble);
      const bool lstm = cell == CellKind::kLstm;
      torch::Tensor emb = torch::randn({B, T, E}, torch::kDouble).requires_grad_();
      torch::Tensor h0 = torch::randn({L, B, H}, torch::kDouble).requires_grad_();
      torch::Tensor c0 = torch::randn({L, B, H}, torch::kDouble).requires_grad_();
      torch::Tensor enc = torch::randn({B, S, H}, torch::kDouble).requires_grad_();
      const torch::Tensor lengths = torch::tensor({5, 2, 4}, torch::kLong);
      const torch::Tensor mask = torch::empty({B, T, H}, torch::kDouble).bernoulli_(0.7).div_(0.7);
      const torch::Tensor between =
          L > 1 ? torch::empty({L - 1, B, T, H}, torch::kDouble).bernoulli_(0.7).div_(0.7) : torch::Tensor();
      const torch::Tensor probe = torch::randn({B, T, H}, torch::kDouble);
      const auto reference = [&] {
        GlobalAttention attention{GlobalAttentionOptions(H)};
        attention->to(torch::kDouble);
        const AttentionMemory memory = attention->prepare(enc, lengths);
        const std::vector<torch::Tensor> w = rnn.all_weights();
        std::vector<torch::Tensor> h, c;
        for (int64_t l = 0; l < L; ++l) {
          h.push_back(h0[l]);
          c.push_back(c0[l]);
        }
        torch::Tensor previous = torch::zeros({B, H}, torch::kDouble);
        std::vector<torch::Tensor> out;
        for (int64_t t = 0; t < T; ++t) {
          torch::Tensor x = torch::cat({emb.select(1, t), previous}, 1);
          for (int64_t l = 0; l < L; ++l) {
            const auto i = static_cast<std::size_t>(4 * l);
            if (lstm) {
              std::tie(h[l], c[l]) = torch::lstm_cell(x, {h[l], c[l]}, w[i], w[i + 1], w[i + 2], w[i + 3]);
            } else {
              h[l] = torch::gru_cell(x, h[l], w[i], w[i + 1], w[i + 2], w[i + 3]);
            }
            x = l + 1 < L ? h[l] * between[l].select(1, t) : h[l];
          }
          const AttentionOutput a = attention->forward(memory, h[L - 1], t);
          previous = torch::tanh(wc(torch::cat({a.context, h[L - 1]}, 1))) * mask.select(1, t);
          out.push_back(previous);
        }
        return torch::stack(out, 1);
      };
      const auto fused = [&] {
        std::vector<CellWeights> cells;
        for (int64_t l = 0; l < L; ++l) cells.push_back(CellWeights::of(rnn, l, 0));
        return fused_luong_teacher_forced(emb, h0, c0, enc, enc, lengths, cells, lstm, wc->weight, wc->bias,
                                          FusedAttentionParameters::global(1.0 / std::sqrt(static_cast<double>(H))),
                                          mask, between);
      };
      const torch::Tensor a = reference(), b = fused();
      EXPECT_LE((a - b).abs().max().item<double>(), 1e-14) << name;
      std::vector<std::pair<std::string, torch::Tensor>> inputs = {{"emb", emb}, {"h0", h0}, {"enc", enc}};
      if (lstm) inputs.emplace_back("c0", c0);
      for (const auto& p : owner.named_parameters()) inputs.emplace_back(p.key(), p.value());
      inputs.emplace_back("Wc", wc->weight);
      inputs.emplace_back("Wc.bias", wc->bias);
      std::vector<torch::Tensor> expected;
      for (auto& [input_name, t] : inputs) {
        if (t.grad().defined()) t.mutable_grad().zero_();
      }
      (reference() * probe).sum().backward();
      for (auto& [input_name, t] : inputs) {
        expected.push_back(t.grad().clone());
        t.mutable_grad().zero_();
      }
      (fused() * probe).sum().backward();
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        const double scale = expected[i].abs().max().item<double>();
        EXPECT_GT(scale, 0.0) << name << " " << inputs[i].first << " receives no gradient";
        EXPECT_LE((inputs[i].second.grad() - expected[i]).abs().max().item<double>(), 1e-12 * std::max(1.0, scale))
            << name << " " << inputs[i].first;
      }
    }
  }
}

// The fused layer against nn::LSTM / nn::GRU over a packed batch, in both directions.
TEST(FusedGruSequenceTest, LayersEqualPackedModulesInBothDirections) {
  namespace rnn = torch::nn::utils::rnn;
  for (const CellKind cell : {CellKind::kGru, CellKind::kLstm}) {
    torch::manual_seed(8);
    torch::nn::Module owner;
    RecurrentLayers layers = register_recurrent(owner, RecurrentOptions(3, 4).cell(cell).bidirectional(true));
    owner.to(torch::kDouble);
    const torch::Tensor x = torch::randn({3, 5, 3}, torch::kDouble);
    const torch::Tensor lengths = torch::tensor({5, 1, 3}, torch::kLong);
    auto [expected, state] = layers.sequence(x, lengths);  // [B, S, 2H], [2, B, H]
    for (int64_t d = 0; d < 2; ++d) {
      const FusedLayerOutput out = fused_recurrent_layer(x, lengths, CellWeights::of(layers, 0, d), cell == CellKind::kLstm, d == 1);
      EXPECT_LE((out.outputs - expected.narrow(2, 4 * d, 4)).abs().max().item<double>(), 1e-14) << d;
      EXPECT_LE((out.hidden - state.hidden[d]).abs().max().item<double>(), 1e-14) << d;
      if (cell == CellKind::kLstm) {
        EXPECT_LE((out.cell - state.cell[d]).abs().max().item<double>(), 1e-14) << d;
      }
    }
    const FusedLayerOutput both = fused_bidirectional_layer(x, lengths, CellWeights::of(layers, 0, 0),
                                                            CellWeights::of(layers, 0, 1), cell == CellKind::kLstm);
    EXPECT_LE((both.outputs - expected).abs().max().item<double>(), 1e-14);
    EXPECT_LE((both.hidden - state.hidden).abs().max().item<double>(), 1e-14);
    if (cell == CellKind::kLstm) {
      EXPECT_LE((both.cell - state.cell).abs().max().item<double>(), 1e-14);
    }
  }
}

// A batch large enough for several row blocks (8 rows each at least) with lengths in random order: the
// kernel reorders the rows so that each block's real tokens at any time are a prefix of it, and
// computes those alone. Each direction as its own node on 3 threads (3 blocks), and both directions
// as one node on 3 threads (a block each, side by side) and on 5 (2 blocks each). Against nn::LSTM /
// nn::GRU over the packed batch in double (outputs, final states and every gradient), and the rows
// computed are the real tokens exactly.
TEST(FusedGruSequenceTest, SkipsPaddingAcrossRowBlocksAndEqualsPackedModules) {
  const int threads_before = torch::get_num_threads();
  struct Run {
    int threads;
    bool one_node;
  };
  for (const Run run : {Run{3, false}, Run{3, true}, Run{5, true}}) {
    for (const CellKind cell : {CellKind::kGru, CellKind::kLstm}) {
      torch::set_num_threads(run.threads);
      torch::manual_seed(21);
      torch::nn::Module owner;
      RecurrentLayers layers = register_recurrent(owner, RecurrentOptions(3, 5).cell(cell).bidirectional(true));
      owner.to(torch::kDouble);
      const int64_t B = 26, S = 9;
      const torch::Tensor x = torch::randn({B, S, 3}, torch::kDouble).requires_grad_();
      const torch::Tensor lengths = torch::randint(1, S + 1, {B}, torch::kLong);
      const torch::Tensor probe = torch::randn({B, S, 10}, torch::kDouble);
      const torch::Tensor state_probe = torch::randn({2, B, 5}, torch::kDouble);
      std::vector<torch::Tensor> inputs = layers.all_weights();
      inputs.push_back(x);
      auto [expected, state] = layers.sequence(x, lengths);
      const std::vector<torch::Tensor> expected_gradients =
          torch::autograd::grad({(expected * probe).sum() + (state.hidden * state_probe).sum()}, inputs);
      const int64_t before = path_counts::read(path_counts::Path::kFusedRecurrentRows);
      torch::Tensor fused, fused_hidden;
      if (run.one_node) {
        const FusedLayerOutput out = fused_bidirectional_layer(x, lengths, CellWeights::of(layers, 0, 0),
                                                               CellWeights::of(layers, 0, 1), cell == CellKind::kLstm);
        fused = out.outputs;
        fused_hidden = out.hidden;
      } else {
        std::vector<torch::Tensor> outputs, hidden;
        for (int64_t d = 0; d < 2; ++d) {
          const FusedLayerOutput out =
              fused_recurrent_layer(x, lengths, CellWeights::of(layers, 0, d), cell == CellKind::kLstm, d == 1);
          outputs.push_back(out.outputs);
          hidden.push_back(out.hidden);
        }
        fused = torch::cat(outputs, 2);
        fused_hidden = torch::stack(hidden);
      }
      const int64_t tokens = lengths.sum().item<int64_t>();
      EXPECT_EQ(path_counts::read(path_counts::Path::kFusedRecurrentRows) - before, 2 * tokens);  // of B * S = 234 rows per direction
      EXPECT_LE((fused - expected).abs().max().item<double>(), 1e-14);
      EXPECT_LE((fused_hidden - state.hidden).abs().max().item<double>(), 1e-14);
      const std::vector<torch::Tensor> fused_gradients =
          torch::autograd::grad({(fused * probe).sum() + (fused_hidden * state_probe).sum()}, inputs);
      EXPECT_EQ(path_counts::read(path_counts::Path::kFusedRecurrentRows) - before, 4 * tokens);
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        const double scale = expected_gradients[i].abs().max().item<double>();
        EXPECT_GT(scale, 0.0) << i;
        EXPECT_LE((fused_gradients[i] - expected_gradients[i]).abs().max().item<double>(), 1e-13 * std::max(1.0, scale))
            << options::enum_name(cell) << " input " << i << " threads " << run.threads << " one node " << run.one_node;
      }
    }
  }
  torch::set_num_threads(threads_before);
}

// A sequence of no tokens: its outputs and state are zero, and nothing is computed for it.
TEST(FusedGruSequenceTest, EmptySequenceStaysZero) {
  torch::manual_seed(4);
  torch::nn::GRU gru(torch::nn::GRUOptions(3, 4).batch_first(true));
  const torch::Tensor x = torch::randn({2, 4, 3});
  const int64_t before = path_counts::read(path_counts::Path::kFusedRecurrentRows);
  auto [outputs, last] = fused_gru_sequence(x, torch::tensor({3, 0}, torch::kLong), GruWeights::of(gru));
  EXPECT_EQ(path_counts::read(path_counts::Path::kFusedRecurrentRows) - before, 3);
  EXPECT_EQ(outputs[1].abs().max().item<float>(), 0.0F);
  EXPECT_EQ(last[1].abs().max().item<float>(), 0.0F);
  EXPECT_GT(last[0].abs().max().item<float>(), 0.0F);
}

TEST(FusedGruSequenceTest, RejectsLengthsOutsideTheBatch) {
  torch::nn::GRU gru(torch::nn::GRUOptions(3, 4).batch_first(true));
  const torch::Tensor x = torch::randn({2, 4, 3});
  EXPECT_THROW(fused_gru_sequence(x, torch::tensor({4, 5}, torch::kLong), GruWeights::of(gru)), c10::Error);
  EXPECT_THROW(fused_gru_sequence(x, torch::tensor({4}, torch::kLong), GruWeights::of(gru)), c10::Error);
}

// Both decoders check that layer 0's weights take [embedding; fed input] before they multiply: a
// one-line error naming the input each feeds, not a product's shape mismatch.
TEST(FusedDecoderTest, RejectsEmbeddingsItsWeightsDoNotTake) {
  torch::manual_seed(5);
  const int64_t B = 2, T = 3, S = 4, E = 3, H = 4;
  torch::nn::Module owner;
  RecurrentLayers rnn = register_recurrent(owner, RecurrentOptions(E + H, H));
  torch::nn::Linear wc(2 * H, H);
  const std::vector<CellWeights> cells = {CellWeights::of(rnn, 0, 0)};
  const torch::Tensor h0 = torch::randn({1, B, H}), c0 = torch::empty({0});
  const torch::Tensor enc = torch::randn({B, S, H}), lengths = torch::tensor({4, 2}, torch::kLong);
  const FusedAttentionParameters attention = FusedAttentionParameters::global(0.5);
  const auto message = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const c10::Error& e) {
      return std::string(e.what_without_backtrace());
    }
    return std::string("no error");
  };
  for (const int64_t width : {E - 1, E + 1}) {
    const torch::Tensor emb = torch::randn({B, T, width});
    EXPECT_NE(message([&] {
                fused_luong_teacher_forced(emb, h0, c0, enc, enc, lengths, cells, false, wc->weight, wc->bias, attention);
              }).find("the recurrent input must be [embedding; h~]"),
              std::string::npos)
        << width;
    EXPECT_NE(message([&] {
                fused_bahdanau_teacher_forced(emb, h0, c0, enc, enc, lengths, cells, false, attention);
              }).find("the recurrent input must be [embedding; context]"),
              std::string::npos)
        << width;
  }
}

}  // namespace
}  // namespace luong::models
