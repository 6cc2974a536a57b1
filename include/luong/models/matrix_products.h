#pragma once
// The matrix products of the fused CPU kernels: in the operands' own dtype, or under bf16 precision
// (models/precision.h) with bf16 operands. LibTorch runs bf16 products through oneDNN, which
// accumulates in float32; the kernels take each result back to float32 for the gate, softmax and
// loss arithmetic, which never leaves float32. Float32 products run through MKL (LibTorch's mm) or
// oneDNN, whichever Float32Products says.
#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <utility>
#include <vector>

#include "luong/models/panel_products.h"
#include "luong/models/precision.h"
#include "luong/util/options.h"

namespace luong::models {

/// Which library multiplies the fused kernels' float32 matrices on the CPU.
///   kAuto    oneDNN on AMD processors with AVX-512, for the shapes that pay for its per-call cost
///            (MKL runs its AVX2 kernels there, slower than oneDNN's AVX-512 ones),
///            MKL elsewhere and for the small per-step products;
///   kMkl     always MKL, as LibTorch's own mm;
///   kOneDnn  oneDNN for every product it can take, whatever its size (the tests use it).
/// The runtime option --float32-products (run/runtime_options.h) sets it; kAuto until then. Products
/// in double, on CUDA or with bf16 operands never change library.
enum class Float32Products { kAuto, kMkl, kOneDnn };
Float32Products float32_products();
void set_float32_products(Float32Products choice);
/// Whether `auto` would choose oneDNN on this processor.
bool onednn_float32_is_faster_here();
/// Whether LibTorch's oneDNN product runs here at all: its matmul helper refuses processors without
/// AVX-512 BW, VL and DQ (an AVX2-only one), whatever the dtype. `onednn` then falls back to MKL.
bool onednn_float32_available();

namespace detail {
/// Whether the current choice sends a float32 [m, k] x [k, n] product to oneDNN.
bool onednn_chosen_for(int64_t m, int64_t k, int64_t n);
/// Whether a b (into `out`, when given: its rows must have unit column stride) goes to oneDNN under
/// the current choice.
bool use_onednn(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& out = {});
/// out = a b, or out += a b when `accumulate`, by oneDNN (out: rows of unit column stride).
void onednn_mm(const torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b, bool accumulate);
/// a b by LibTorch's bf16 product (oneDNN; the result rounded to bf16), the operands converted where
/// they are not bf16: where no bf16 panel kernel takes a product.
torch::Tensor library_bf16_mm(const torch::Tensor& a, const torch::Tensor& b);
inline torch::Tensor to_bf16(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? t : t.to(torch::kBFloat16);
}
}  // namespace detail

/// Whether the fused kernels' per-step products (and the loss's logits) run in panels
/// (panel_products.h) where this processor has a panel kernel: the runtime option --panel-products
/// (on, off, or no-amx: on, the bf16 panels by AVX512-BF16 even where AMX is here), on until it is
/// applied. Off, they go to the library Float32Products chooses, or LibTorch's bf16 product (the
/// tests hold the two against each other).
enum class PanelProducts { kOn, kOff, kNoAmx };
void set_panel_products(PanelProducts choice);
bool panel_products_enabled();
void set_panel_products_enabled(bool enabled);
/// The kernel of the bf16 panels: bf16_panel_kernel_here(), but AVX512-BF16 for AMX where AMX
/// panels are turned off (--panel-products no-amx, or set_amx_panels_enabled(false)).
Bf16PanelKernel bf16_panel_kernel();
void set_amx_panels_enabled(bool enabled);
// Where a bf16 panel kernel is here, a training step leaves no bf16 product to the libraries (the
// fused kernels hand the products float32 a operands, which the panels round as they go): the tests
// read path_counts' kBf16LibraryProducts.

/// The right operand b [K, N] of a fused kernel's products against one weight (each step's, or the
/// loss's output projection with its bias as the sums' start): laid out in panels once per kernel
/// call where a panel kernel takes it (on the CPU, panels enabled: float32
/// on a processor with AVX2 or AVX-512; under bf16 on one with AMX or AVX512-BF16, b rounded to bf16 and the
/// products' sums left in float32 where the library's bf16 product rounds them to bf16), else b
/// itself, for MatrixProducts' libraries.
class PanelOperand {
 public:
  PanelOperand() = default;
  PanelOperand(const torch::Tensor& b, bool bf16);

  const torch::Tensor& matrix() const { return matrix_; }
  bool in_panels() const { return panels_.defined(); }
  /// The kernel of bf16 panels (kNone for float32 panels or none).
  Bf16PanelKernel bf16_kernel() const { return bf16_kernel_; }
  /// out = init + a b in panels, init undefined, a row to broadcast or a matrix of out's shape; false
  /// (nothing done) where an operand's layout does not suit the kernel (rows of unit column stride).
  /// On the calling thread (a step's rows), or over LibTorch's threads in blocks of rows (`parallel`:
  /// a whole batch's).
  bool multiply(const torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& init, bool parallel = false) const;
  /// The AMX panels (null unless bf16_kernel() is kAmx) and their columns.
  const uint16_t* amx_panels() const;
  int64_t columns() const { return matrix_.size(1); }

 private:
  torch::Tensor matrix_, panels_;
  PanelIsa isa_ = PanelIsa::kNone;                          // float32 panels' kernel
  Bf16PanelKernel bf16_kernel_ = Bf16PanelKernel::kNone;  // bf16 panels' kernel
};

struct MatrixProducts;

/// Two threads, each running the time loop of one row block of a recurrence, that make each of a
/// step's products together: both blocks' rows against half of b's columns each, where each block
/// alone read all of b for its 16 rows (b comes from L3 at every step: a decoder step's weights do
/// not fit in L2). Both members must call product() for the same products in the same order, with
/// no rows where a block has finished, and only for b in AMX panels (PanelOperand::amx_panels():
/// elsewhere each member multiplies its own rows); the sums are the same to the bit.
class StepTeam {
 public:
  static constexpr int kMembers = 2;
  /// Whether row blocks that run side by side (PackedRows::for_blocks_side_by_side) make `products`'
  /// step products in a team: under bf16 in AMX panels, teams enabled.
  static bool takes(const MatrixProducts& products);
  /// Held by each member for its time loop: a member that leaves by an exception abandons the team,
  /// and the other's next product throws instead of waiting for it forever.
  class Member {
   public:
    explicit Member(StepTeam* team) : team_(team), exceptions_(std::uncaught_exceptions()) {}
    ~Member() {
      if (team_ != nullptr && std::uncaught_exceptions() > exceptions_) team_->abandoned_.store(true);
    }
    Member(const Member&) = delete;
    Member& operator=(const Member&) = delete;

   private:
    StepTeam* team_;
    int exceptions_;
  };

  /// out = init + a b (init undefined, a row to broadcast or out itself to accumulate) for member
  /// `member`'s rows, a [n, K] and out [n, N] of unit column stride, n possibly 0, b in AMX panels.
  /// Returns once both members' rows are written.
  void product(int member, const torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& init,
               const PanelOperand& b);

 private:
  void meet(int member);
  Bf16RowBlock blocks_[kMembers] = {};
  std::atomic<int64_t> arrivals_{0};
  std::atomic<bool> abandoned_{false};
  int64_t passed_[kMembers] = {};
};
/// Whether decoders' steps make their products in StepTeams where they can (the runtime option
/// --no-step-teams turns them off; the tests compare both ways).
bool step_teams_enabled();
void set_step_teams_enabled(bool enabled);

/// The two factors of a product a b.
using Factors = std::pair<torch::Tensor, torch::Tensor>;

struct MatrixProducts {
  bool bf16 = false;

  /// a b for each pair (as mm). Where there are several and each is small (a backward's weight
  /// gradients at the notebook's sizes, a few million multiply-adds), each runs whole on one of
  /// LibTorch's threads, dealt largest first to the least loaded: the libraries ran such a product on
  /// one thread while the others waited. Larger products run one after another, each over all threads.
  /// `outs`, where given, holds for each product a tensor to write it into (or an undefined one): a
  /// gradient's column slices, which two products fill where a concatenation copied them after.
  std::vector<torch::Tensor> mm_each(const std::vector<Factors>& factors, const std::vector<torch::Tensor>& outs = {}) const;

  /// A weight's transpose or itself (b) as the panel products take it: once per kernel call.
  PanelOperand panel_operand(const torch::Tensor& b) const { return PanelOperand(b, bf16); }

  /// A right operand b as the products take it, once per kernel call: under bf16 rounded to bf16 for
  /// LibTorch's bf16 product, which would convert it at every call; left in float32 where the bf16
  /// panels take the products (they round b as they lay it out, and a's rows as they go: a left
  /// operand a is never converted, the panels decline an a that is bf16 already).
  torch::Tensor operand(const torch::Tensor& weight) const {
    return bf16 && !bf16_panels_take_products() ? detail::to_bf16(weight) : weight;
  }
  /// Whether bf16 products go to the bf16 panels (enabled, and a kernel here).
  static bool bf16_panels_take_products() {
    return panel_products_enabled() && bf16_panel_kernel() != Bf16PanelKernel::kNone;
  }

  /// a b, in float32 under bf16.
  torch::Tensor mm(const torch::Tensor& a, const torch::Tensor& b) const {
    if (bf16) {
      const torch::Tensor out = bf16_in_panels({}, a, b, {});
      return out.defined() ? out : detail::library_bf16_mm(a, b).to(torch::kFloat);
    }
    if (!detail::use_onednn(a, b)) return a.mm(b);
    torch::Tensor out = torch::empty({a.size(0), b.size(1)}, a.options());
    detail::onednn_mm(out, a, b, false);
    return out;
  }
  /// bias + a b (bias broadcast over the rows, or a matrix of a's shape).
  torch::Tensor addmm(const torch::Tensor& bias, const torch::Tensor& a, const torch::Tensor& b) const {
    if (bf16) {
      const torch::Tensor out = bf16_in_panels({}, a, b, bias);
      return out.defined() ? out : torch::add(bias, detail::library_bf16_mm(a, b));
    }
    if (!detail::use_onednn(a, b)) return torch::addmm(bias, a, b);
    torch::Tensor out = bias.expand({a.size(0), b.size(1)}).contiguous();
    detail::onednn_mm(out, a, b, true);
    return out;
  }
  void addmm_out(torch::Tensor& out, const torch::Tensor& bias, const torch::Tensor& a, const torch::Tensor& b) const {
    if (bf16) {
      if (!bf16_in_panels(out, a, b, bias).defined()) torch::add_out(out, bias, detail::library_bf16_mm(a, b));
    } else if (detail::use_onednn(a, b, out)) {
      out.copy_(bias.expand_as(out));
      detail::onednn_mm(out, a, b, true);
    } else {
      torch::addmm_out(out, bias, a, b);
    }
  }
  void mm_out(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b) const {
    if (bf16) {
      if (!bf16_in_panels(out, a, b, {}).defined()) out.copy_(detail::library_bf16_mm(a, b));
    } else if (detail::use_onednn(a, b, out)) {
      detail::onednn_mm(out, a, b, false);
    } else {
      torch::mm_out(out, a, b);
    }
  }
  // In panels where `b` is laid out in them, else the library's.
  void addmm_out(torch::Tensor& out, const torch::Tensor& bias, const torch::Tensor& a, const PanelOperand& b) const {
    if (!b.in_panels() || !b.multiply(out, a, bias)) addmm_out(out, bias, a, b.matrix());
  }
  void mm_out(torch::Tensor& out, const torch::Tensor& a, const PanelOperand& b) const {
    if (!b.in_panels() || !b.multiply(out, a, {})) mm_out(out, a, b.matrix());
  }
  void add_mm_(torch::Tensor& out, const torch::Tensor& a, const PanelOperand& b) const {
    if (!b.in_panels() || !b.multiply(out, a, out)) add_mm_(out, a, b.matrix());
  }

  /// out += a b
  void add_mm_(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b) const {
    if (bf16) {
      if (!bf16_in_panels(out, a, b, out).defined()) out.add_(detail::library_bf16_mm(a, b));
    } else if (detail::use_onednn(a, b, out)) {
      detail::onednn_mm(out, a, b, true);
    } else {
      out.addmm_(a, b);
    }
  }

 private:
  // out = init + a b (init as PanelOperand::multiply takes it; out allocated where undefined) in
  // bf16 panels, over the threads: a whole batch's product, where the kernel rounds a's rows as it
  // goes and writes float32 sums (LibTorch's bf16 product needs a and b converted and its bf16 result
  // converted back); a's rows may have any stride (a weight gradient's transposed a). Returns out, or
  // an undefined tensor, with nothing done, where no bf16 panel kernel takes the operands.
  static torch::Tensor bf16_in_panels(torch::Tensor out, const torch::Tensor& a, const torch::Tensor& b,
                                      const torch::Tensor& init) {
    if (a.dim() != 2 || a.scalar_type() != torch::kFloat || !a.device().is_cpu()) return {};
    const PanelOperand panels(b, true);
    if (panels.bf16_kernel() == Bf16PanelKernel::kNone) return {};
    if (!out.defined()) out = torch::empty({a.size(0), b.size(1)}, a.options());
    return panels.multiply(out, a, init, /*parallel=*/true) ? out : torch::Tensor();
  }
};

/// The float32 and bf16 panel products' rates at one [rows, k] x [k, n] shape, GFLOP/s on the
/// calling thread.
struct PanelProductRates {
  double float32 = 0, bf16 = 0;
  /// Whether bf16 runs under nine tenths of float32's rate, so that bf16 precision trains slower than
  /// float32: on Intel processors with AVX512-BF16 but no AMX, vdpbf16ps (32 multiply-adds, one a
  /// cycle) matches float32's two FMA units, and rounding the rows to bf16 costs more.
  bool bf16_slower() const { return bf16 < 0.9 * float32; }
};
/// Times both kernels, about `seconds` each, where this processor has float32 and bf16 panels and
/// panels are enabled; nullopt elsewhere. Touches no random generator.
std::optional<PanelProductRates> measure_panel_product_rates(int64_t rows, int64_t k, int64_t n,
                                                             double seconds = 0.02);

/// nn::Linear's function, differentiable: x [..., I], weight [O, I] (any strides), bias [O] or
/// undefined -> [..., O]. Where the forward product goes to oneDNN (float32 on the CPU, autocast off,
/// by Float32Products' choice and the product's size), one autograd node whose forward and backward
/// products all go through MatrixProducts, with the weight made dense once per call: autograd's
/// Linear multiplies in MKL (LibTorch's mm), at half oneDNN's rate on Zen 5 for the encoder's bridge.
/// Elsewhere torch::linear itself. No double backward through the node.
torch::Tensor linear_through_products(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {});

/// How a fused kernel is called: its products in bf16 under bf16 precision for a float32 model, and
/// then its inputs in float32 whatever dtype autocast gave the module ops before it. The kernel runs
/// with autocast off for the call's scope: its products are explicit (MatrixProducts), and the ops
/// around them must stay in float32.
struct FusedKernelCall {
  bool bf16 = false;
  c10::impl::ExcludeDispatchKeyGuard no_autocast{c10::DispatchKey::AutocastCPU};

  /// `weight`: one of the kernel's parameters (its dtype and device are the model's).
  explicit FusedKernelCall(const torch::Tensor& weight)
      : bf16(weight.scalar_type() == torch::kFloat && bf16_products(weight.device())) {}
  torch::Tensor input(const torch::Tensor& t) const {
    return bf16 && t.defined() && t.scalar_type() == torch::kBFloat16 ? t.to(torch::kFloat) : t;
  }
};

}  // namespace luong::models

template <>
struct luong::options::EnumNames<luong::models::Float32Products> {
  static constexpr std::pair<luong::models::Float32Products, const char*> values[] = {
      {luong::models::Float32Products::kAuto, "auto"},
      {luong::models::Float32Products::kMkl, "mkl"},
      {luong::models::Float32Products::kOneDnn, "onednn"}};
};

template <>
struct luong::options::EnumNames<luong::models::PanelProducts> {
  static constexpr std::pair<luong::models::PanelProducts, const char*> values[] = {
      {luong::models::PanelProducts::kOn, "on"},
      {luong::models::PanelProducts::kOff, "off"},
      {luong::models::PanelProducts::kNoAmx, "no-amx"}};
};
