#include "luong/models/linear_cross_entropy.h"

#include "luong/models/matrix_products.h"
#include "luong/models/row_exponentials.h"
#include "luong/util/side_tasks.h"
#include "luong/util/path_counts.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

namespace luong::models {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Slice {
  int64_t begin, end;
};

std::vector<Slice> vocabulary_slices(int64_t vocab) {
  const int64_t count = std::max<int64_t>(1, std::min<int64_t>(task_threads(), vocab));
  std::vector<Slice> slices;
  for (int64_t i = 0; i < count; ++i) slices.push_back({vocab * i / count, vocab * (i + 1) / count});
  return slices;
}

// Rows of logits to compute and exponentiate at a time. Where the slice's weights take at most half
// of a core's L2 (a narrow hidden layer), blocks of about 512 KB, which stay cached beside them until
// they are exponentiated: such a logit costs little arithmetic, and a pass of its own over logits
// that outgrow the caches runs at memory speed (docs/PERFORMANCE.md). Wider layers spend enough arithmetic on each logit
// that the pass is cheap, and blocks would only share the cache with their weights: all rows at once.
int64_t logit_block_rows(int64_t rows, int64_t hidden, int64_t width, int64_t element_bytes) {
  constexpr int64_t kHalfL2 = 1 << 20, kBlockBytes = 512 << 10;
  if (hidden * width * element_bytes > kHalfL2) return std::max<int64_t>(rows, 1);
  return std::max<int64_t>(8, kBlockBytes / std::max<int64_t>(1, width * element_bytes) / 8 * 8);
}

// Each row's target as a column of the slice [begin, end), or -1 where the target lies outside it.
std::vector<int64_t> slice_target_columns(const int64_t* targets, int64_t rows, int64_t begin, int64_t end) {
  std::vector<int64_t> columns(static_cast<std::size_t>(rows));
  for (int64_t n = 0; n < rows; ++n) columns[n] = targets[n] >= begin && targets[n] < end ? targets[n] - begin : -1;
  return columns;
}

// Where a backward pass runs with side threads (util/side_tasks.h), the weight's gradient, which
// nothing later in the backward pass needs, is left to them, in this many pieces per thread so
// that the thread that runs the backward pass can share the last of it: the gradient is added to
// the weight's .grad once every piece is done, as autograd would have added it.
constexpr int64_t kDeferredPiecesPerThread = 4;

void defer_weight_gradient(const torch::Tensor& weight_leaf, const std::vector<torch::Tensor>& dlogits,
                           const std::vector<int64_t>& bounds, const torch::Tensor& x_scaled,
                           const MatrixProducts& products) {
  const int64_t V = bounds.back();
  torch::Tensor dweight = torch::empty({V, x_scaled.size(1)}, weight_leaf.options());
  const int64_t pieces = std::min<int64_t>(V, kDeferredPiecesPerThread * task_threads());
  path_counts::add(path_counts::Path::kDeferredWeightGradients);
  const bool deferred = defer_tasks(
      pieces,
      [=](int64_t piece) {
        const int64_t begin = V * piece / pieces, end = V * (piece + 1) / pieces;
        // The piece's rows, slice by slice (pieces and slices need not line up).
        for (std::size_t s = 0; s + 1 < bounds.size(); ++s) {
          const int64_t from = std::max(begin, bounds[s]), to = std::min(end, bounds[s + 1]);
          if (from >= to) continue;
          torch::Tensor dw = dweight.narrow(0, from, to - from);
          products.mm_out(dw, dlogits[s].narrow(1, from - bounds[s], to - from).t(), x_scaled);
        }
      },
      [weight_leaf, dweight] {
        const torch::NoGradGuard no_grad;
        torch::Tensor& grad = weight_leaf.mutable_grad();
        if (grad.defined()) {
          grad.add_(dweight);
        } else {
          grad = dweight;
        }
      });
  TORCH_INTERNAL_ASSERT(deferred, "linear_cross_entropy: a weight gradient deferred outside run_with_side_tasks");
}

// Pass 1, one vocabulary slice a thread: each slice's exponentials exp(logit - the row's maximum in
// the slice), their row maxima and sums, the rows' target logits and, for label smoothing, each
// row's sum of logits. The lambdas see only detached tensors.
struct SliceStatistics {
  std::vector<torch::Tensor> exponentials, maxima, sums, logit_sums;  // a tensor a slice
  torch::Tensor target_logit;                                         // [N]
};

SliceStatistics slice_statistics(const MatrixProducts& products, const torch::Tensor& x, const torch::Tensor& weight,
                                 const torch::Tensor& bias, const int64_t* tgt, const std::vector<Slice>& slices,
                                 double smoothing) {
  const int64_t N = x.size(0);
  const std::size_t count = slices.size();
  SliceStatistics out{std::vector<torch::Tensor>(count), std::vector<torch::Tensor>(count),
                      std::vector<torch::Tensor>(count), std::vector<torch::Tensor>(count),
                      torch::zeros({N}, x.options())};  // the softmax and loss in x's dtype
  run_tasks(static_cast<int64_t>(count), [&](int64_t task) {
    const auto s = static_cast<std::size_t>(task);
    const Slice slice = slices[s];
    const int64_t width = slice.end - slice.begin;
    const PanelOperand weight_t = products.panel_operand(weight.narrow(0, slice.begin, width).t());
    const torch::Tensor slice_bias = bias.narrow(0, slice.begin, width);
    // (a slice of 32 MiB or more, at batch 512, reuses a block the allocator kept: large_block_cache.h)
    torch::Tensor logits = torch::empty({N, width}, x.options());
    const std::vector<int64_t> target_columns = slice_target_columns(tgt, N, slice.begin, slice.end);
    if (smoothing > 0) out.logit_sums[s] = torch::empty({N}, x.options());  // for the smoothed term's mean logit
    out.maxima[s] = torch::empty({N}, logits.options());
    out.sums[s] = torch::empty({N}, logits.options());
    const int64_t block_rows = logit_block_rows(N, x.size(1), width, static_cast<int64_t>(x.element_size()));
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "linear_cross_entropy_exp", [&] {
      for (int64_t first = 0; first < N; first += block_rows) {
        const int64_t rows = std::min(block_rows, N - first);
        torch::Tensor block = logits.narrow(0, first, rows);
        // (the bias starts the panels' sums: no copy of it into the logits first, as the libraries' addmm)
        products.addmm_out(block, slice_bias, x.narrow(0, first, rows), weight_t);
        if (smoothing > 0) {
          torch::Tensor block_sums = out.logit_sums[s].narrow(0, first, rows);
          at::sum_out(block_sums, block, 1);
        }
        scalar_t* l = block.data_ptr<scalar_t>();
        scalar_t* target = out.target_logit.data_ptr<scalar_t>() + first;
        for (int64_t n = 0; n < rows; ++n) {
          if (target_columns[first + n] >= 0) target[n] = l[n * width + target_columns[first + n]];
        }
        exponentiate_rows(l, rows, width, width, out.maxima[s].data_ptr<scalar_t>() + first,
                          out.sums[s].data_ptr<scalar_t>() + first, nullptr);
      }
    });
    out.exponentials[s] = logits;
  });
  return out;
}

// Combines the slices' statistics row by row (a dozen LibTorch ops on [N] vectors cost more than
// this loop): log sum exp = M + log sum_s sums_s exp(maxima_s - M), the loss
// (1 - eps) (lse - l_target) + eps (lse - mean_v l_v), and, where `row_scales` are given, each
// slice's factor from its exponentials to probabilities, exp(maxima_s - M) / sum.
torch::Tensor combine_slices(const SliceStatistics& statistics, int64_t V, double smoothing,
                             const std::vector<torch::Tensor>& row_scales) {
  const torch::Tensor& target_logit = statistics.target_logit;
  const int64_t N = target_logit.size(0);
  const std::size_t count = statistics.maxima.size();
  torch::Tensor losses = torch::empty({N}, target_logit.options());
  AT_DISPATCH_FLOATING_TYPES(target_logit.scalar_type(), "linear_cross_entropy_combine", [&] {
    const auto pointers = [](const std::vector<torch::Tensor>& tensors) {
      std::vector<scalar_t*> out;
      for (const torch::Tensor& t : tensors) out.push_back(t.defined() ? t.data_ptr<scalar_t>() : nullptr);
      return out;
    };
    const std::vector<scalar_t*> slice_maxima = pointers(statistics.maxima), slice_sums = pointers(statistics.sums),
                                 slice_logit_sums = pointers(statistics.logit_sums), scales = pointers(row_scales);
    const scalar_t* target_logits = target_logit.data_ptr<scalar_t>();
    scalar_t* loss = losses.data_ptr<scalar_t>();
    const auto eps = static_cast<scalar_t>(smoothing);
    const auto vocab = static_cast<scalar_t>(V);
    for (int64_t n = 0; n < N; ++n) {
      scalar_t top = slice_maxima[0][n];
      for (std::size_t s = 1; s < count; ++s) top = std::max(top, slice_maxima[s][n]);
      scalar_t total = 0, logit_sum = 0;
      for (std::size_t s = 0; s < count; ++s) {
        total += slice_sums[s][n] * std::exp(slice_maxima[s][n] - top);
        if (smoothing > 0) logit_sum += slice_logit_sums[s][n];
      }
      const scalar_t lse = top + std::log(total);
      loss[n] = smoothing > 0 ? lse - (scalar_t(1) - eps) * target_logits[n] - eps * logit_sum / vocab
                              : lse - target_logits[n];
      for (std::size_t s = 0; s < scales.size(); ++s) scales[s][n] = std::exp(slice_maxima[s][n] - top) / total;
    }
  });
  return losses;
}

struct LinearCrossEntropyFunction : torch::autograd::Function<LinearCrossEntropyFunction> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& weight_in,
                               const torch::Tensor& bias_in, const torch::Tensor& targets_in, double smoothing,
                               bool bf16, bool needs_grad) {
    RECORD_FUNCTION("luong::LinearCrossEntropyFunction::forward", std::vector<c10::IValue>());
    const MatrixProducts products{bf16};
    const torch::Tensor x = x_in.detach().contiguous(), bias = bias_in.detach();
    const torch::Tensor weight = products.operand(weight_in.detach());
    const torch::Tensor targets = targets_in.to(torch::kLong).contiguous();
    const int64_t N = x.size(0), V = weight.size(0);
    TORCH_CHECK(targets.dim() == 1 && targets.size(0) == N, "linear_cross_entropy: targets must be [N]");
    if (N > 0) {
      const auto [lowest, highest] = torch::aminmax(targets);
      TORCH_CHECK(lowest.item<int64_t>() >= 0 && highest.item<int64_t>() < V,
                  "linear_cross_entropy: a target is outside the vocabulary");
    }
    const std::vector<Slice> slices = vocabulary_slices(V);
    const SliceStatistics statistics =
        slice_statistics(products, x, weight, bias, targets.data_ptr<int64_t>(), slices, smoothing);
    std::vector<torch::Tensor> row_scales;
    for (std::size_t s = 0; s < slices.size() && needs_grad; ++s) row_scales.push_back(torch::empty({N}, x.options()));
    const torch::Tensor losses = combine_slices(statistics, V, smoothing, row_scales);
    if (!needs_grad) return {losses};
    ctx->saved_data["x"] = x;
    ctx->saved_data["weight"] = weight;
    ctx->saved_data["exponentials"] = statistics.exponentials;
    ctx->saved_data["row_scales"] = row_scales;
    ctx->saved_data["targets"] = targets;
    ctx->saved_data["smoothing"] = smoothing;
    ctx->saved_data["gradient_formed"] = false;
    std::vector<int64_t> bounds;
    for (const Slice& slice : slices) bounds.push_back(slice.begin);
    bounds.push_back(V);
    ctx->saved_data["bounds"] = bounds;
    ctx->saved_data["bf16"] = bf16;
    // The weight itself where its gradient may be left to side threads (defer_weight_gradient): a
    // leaf, so that adding to its .grad is all that autograd would do with the gradient.
    if (weight_in.is_leaf() && weight_in.requires_grad() && weight_in.scalar_type() == x.scalar_type()) {
      ctx->saved_data["weight_leaf"] = weight_in;
    }
    return {losses};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const torch::Tensor x = ctx->saved_data["x"].toTensor();
    const torch::Tensor weight = ctx->saved_data["weight"].toTensor();
    const std::vector<torch::Tensor> dlogits = ctx->saved_data["exponentials"].toTensorVector();
    const std::vector<torch::Tensor> row_scales = ctx->saved_data["row_scales"].toTensorVector();
    const torch::Tensor targets = ctx->saved_data["targets"].toTensor();
    const double smoothing = ctx->saved_data["smoothing"].toDouble();
    const std::vector<int64_t> bounds = ctx->saved_data["bounds"].toIntVector();
    // The first backward turns the exponentials into the gradient in place; a second one (a retained
    // graph) finds it formed.
    const bool formed = ctx->saved_data["gradient_formed"].toBool();
    ctx->saved_data["gradient_formed"] = true;
    const torch::Tensor g = grads[0].detach().contiguous();  // [N]
    const int64_t N = x.size(0), V = weight.size(0);
    const MatrixProducts products{ctx->saved_data["bf16"].toBool()};
    const bool defer_weight = !formed && side_tasks_active() && ctx->saved_data.count("weight_leaf") > 0;
    // d loss_n / d logits_n = g_n (p_n - onehot_n): scale x's rows by g instead of dlogits' rows.
    const torch::Tensor x_scaled = products.operand(x * g.unsqueeze(1));
    // float32 (weight may be bf16); undefined where its gradient is deferred
    torch::Tensor dweight = defer_weight ? torch::Tensor() : torch::empty(weight.sizes(), x.options());
    torch::Tensor dbias = formed ? torch::empty({V}, x.options()) : torch::zeros({V}, x.options());
    std::vector<torch::Tensor> dx_parts(dlogits.size());
    run_tasks(static_cast<int64_t>(dlogits.size()), [&](int64_t task) {  // one slice a thread
      const auto s = static_cast<std::size_t>(task);
      const int64_t begin = bounds[s], width = bounds[s + 1] - bounds[s];
      torch::Tensor db = dbias.narrow(0, begin, width);
      if (formed) {
        torch::mv_out(db, dlogits[s].t(), g);
      } else {
        // p - (1 - eps) onehot - eps / V, and the bias's gradient in the same pass.
        const std::vector<int64_t> target_columns =
            slice_target_columns(targets.data_ptr<int64_t>(), N, begin, begin + width);
        AT_DISPATCH_FLOATING_TYPES(dlogits[s].scalar_type(), "linear_cross_entropy_gradient", [&] {
          softmax_gradient_rows(dlogits[s].data_ptr<scalar_t>(), N, width, width, row_scales[s].data_ptr<scalar_t>(),
                                static_cast<scalar_t>(smoothing / static_cast<double>(V)), target_columns.data(),
                                static_cast<scalar_t>(1 - smoothing), g.data_ptr<scalar_t>(), db.data_ptr<scalar_t>());
        });
      }
      if (!defer_weight) {
        torch::Tensor dw = dweight.narrow(0, begin, width);
        products.mm_out(dw, dlogits[s].t(), x_scaled);
      }
      dx_parts[s] = products.mm(dlogits[s], weight.narrow(0, begin, width));
    });
    if (defer_weight) {
      defer_weight_gradient(ctx->saved_data["weight_leaf"].toTensor(), dlogits, bounds, x_scaled, products);
    }
    torch::Tensor dx = dx_parts[0];
    for (std::size_t s = 1; s < dx_parts.size(); ++s) dx += dx_parts[s];
    dx.mul_(g.unsqueeze(1));
    return {dx, dweight, dbias, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor linear_cross_entropy(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                   const torch::Tensor& targets, double label_smoothing) {
  TORCH_CHECK(x.device().is_cpu(), "linear_cross_entropy runs on the CPU");
  TORCH_CHECK(label_smoothing >= 0 && label_smoothing < 1, "linear_cross_entropy: label smoothing outside [0, 1)");
  const FusedKernelCall call(weight);
  const bool needs_grad =
      torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad() || bias.requires_grad());
  return LinearCrossEntropyFunction::apply(call.input(x), weight, bias, targets, label_smoothing, call.bf16,
                                           needs_grad)[0];
}


}  // namespace luong::models
