#include "luong/models/fused_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "luong/models/predictive_alignment_attention.h"
#include "luong/models/step_buffers.h"
#include "luong/util/target_clones.h"
#include "luong/util/vector_math.h"

namespace luong::models {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

FusedAttentionParameters FusedAttentionParameters::of(AttentionImpl& attention, const AttentionConfig& config,
                                                      int64_t hidden_size) {
  FusedAttentionParameters p = global(config.scale ? 1.0 / std::sqrt(static_cast<double>(hidden_size)) : 1.0);
  p.config = config;
  AlignmentScore& score = attention.score();
  // W_a's query half, copied (a differentiable copy) so that the per-step products get a dense
  // operand, which oneDNN takes without copying it on every call.
  if (config.score == ScoreKind::kConcat) {
    p.tensors = {score->Wa->weight.narrow(1, 0, hidden_size).contiguous(), score->va->weight};
  }
  if (config.score == ScoreKind::kLocation) p.tensors = {score->Wa->weight};
  if (config.kind == AttentionKind::kLocalPredictive) {
    auto* local = dynamic_cast<PredictiveAlignmentAttentionImpl*>(&attention);
    TORCH_CHECK(local != nullptr, "fused attention: local-p needs a PredictiveAlignmentAttention module");
    p.tensors.insert(p.tensors.end(), {local->position_weights->weight, local->position_weights->bias,
                                       local->position_predictor->weight, local->position_predictor->bias});
  }
  return p;
}

FusedAttentionParameters FusedAttentionParameters::global(double scale) {
  FusedAttentionParameters p;
  p.scale = scale;
  return p;
}

namespace {

// The location score's fill for positions W_a does not score, as AlignmentScore and masked_softmax
// write it (a finite value, so that a window of such positions stays finite).
constexpr double kUnscored = -1e30;

// ---- the concat score of one key: sum_i v_i tanh(k_i + q_i), forward and backward ----------------
// The tanh terms go through a buffer so that the loop vectorises (the sum does not, in order).
#define LUONG_CONCAT_KERNELS(T)                                                                             \
  LUONG_X86_CLONES T concat_score(const T* key, const T* query_part, const T* vector, T* terms, int64_t H) { \
    for (int64_t i = 0; i < H; ++i) terms[i] = vector[i] * vector_tanh(key[i] + query_part[i]);           \
    T sum = 0;                                                                                              \
    for (int64_t i = 0; i < H; ++i) sum += terms[i];                                                        \
    return sum;                                                                                             \
  }                                                                                                         \
  /* ds: the score's gradient -> dkey, dquery_part, dvector accumulated */                                  \
  LUONG_X86_CLONES void concat_score_backward(const T* key, const T* query_part, const T* vector, T ds,     \
                                              T* dkey, T* dquery_part, T* dvector, int64_t H) {             \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < H; ++i) {                                                  \
      const T u = vector_tanh(key[i] + query_part[i]);                                                      \
      const T g = ds * vector[i] * (T(1) - u * u);                                                          \
      dkey[i] += g;                                                                                         \
      dquery_part[i] += g;                                                                                  \
      dvector[i] += ds * u;                                                                                 \
    }                                                                                                       \
  }
LUONG_CONCAT_KERNELS(float)
LUONG_CONCAT_KERNELS(double)

template <typename T>
T dot(const T* a, const T* b, int64_t n) {
  T sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// local-p's p_t = (S_b - 1) sigmoid(...) of batch row `row` at step t, from the recorded gates [T, B].
template <typename scalar_t>
scalar_t predicted_position(const torch::Tensor& gates, const torch::Tensor& lengths, int64_t t, int64_t row) {
  const auto last = static_cast<scalar_t>(lengths.data_ptr<int64_t>()[row] - 1);
  return step_ptr<scalar_t>(gates, t)[row] * last;
}

// Eq. (10)'s Gaussian at source position j around p_t: exp(-(j - p)^2 / spread), spread = 2 sigma^2.
template <typename scalar_t>
scalar_t gaussian(int64_t j, scalar_t p, scalar_t spread) {
  const scalar_t offset = static_cast<scalar_t>(j) - p;
  return std::exp(-(offset * offset) / spread);
}

torch::Tensor or_empty(const torch::Tensor& t, const torch::TensorOptions& options) {
  return t.defined() ? t : torch::empty({0}, options);
}

}  // namespace

StepAttention::StepAttention(const AttentionConfig& config, double scale, at::TensorList parameters,
                             torch::Tensor keys, torch::Tensor values, torch::Tensor lengths, int64_t steps,
                             const MatrixProducts& products)
    : config_(config),
      scale_(scale),
      products_(products),
      keys_(std::move(keys)),
      values_(std::move(values)),
      lengths_(std::move(lengths)) {
  T_ = steps, B_ = keys_.size(0), S_ = keys_.size(1), H_ = keys_.size(2);
  std::size_t i = 0;
  const auto next = [&](bool product_operand) {
    TORCH_CHECK(i < parameters.size(), "fused attention: missing parameters for ", options::enum_name(config.score),
                " / ", options::enum_name(config.kind));
    const torch::Tensor p = parameters[i++].detach();
    return product_operand ? products_.operand(p) : p;
  };
  if (concat()) query_weight_ = next(true), score_vector_ = next(false).reshape({H_});
  if (location()) query_weight_ = next(true), P_ = query_weight_.size(0);
  if (predictive()) {
    position_weight_ = next(true), position_bias_ = next(false);
    position_vector_ = next(false).reshape({H_}), position_offset_ = next(false);
  }
  TORCH_CHECK(i == parameters.size(), "fused attention: ", parameters.size(), " parameters, ", i, " expected");
  if (query_weight_.defined()) query_step_ = products_.panel_operand(query_weight_.t());
  if (position_weight_.defined()) position_step_ = products_.panel_operand(position_weight_.t());
  // Zero where the decoder skips a row's steps past its target's end: the parameters' gradients are
  // products over all steps.
  const torch::TensorOptions opts = keys_.options();
  contexts_ = torch::zeros({T_, B_, 2 * H_}, opts);
  weights_ = torch::zeros({T_, B_, S_}, opts);
  if (concat()) query_part_ = torch::zeros({T_, B_, H_}, opts);
  if (predictive()) {
    align_ = torch::empty({T_, B_, S_}, opts);
    position_hidden_ = torch::zeros({T_, B_, H_}, opts);
    position_gate_ = torch::zeros({T_, B_}, opts);
  }
}

void StepAttention::save(AutogradContext* ctx) const {
  const torch::TensorOptions opts = keys_.options();
  // By name, the matrices as the products took them, so that the backward pass neither converts
  // them again nor repeats the list's order.
  ctx->saved_data["attention_parameters"] =
      std::vector<torch::Tensor>{or_empty(query_weight_, opts),    or_empty(score_vector_, opts),
                                 or_empty(position_weight_, opts), or_empty(position_bias_, opts),
                                 or_empty(position_vector_, opts), or_empty(position_offset_, opts)};
  ctx->saved_data["attention_records"] =
      std::vector<torch::Tensor>{keys_, values_, lengths_, contexts_, weights_, or_empty(align_, opts),
                                 or_empty(query_part_, opts), or_empty(position_hidden_, opts),
                                 or_empty(position_gate_, opts)};
  ctx->saved_data["attention_kind"] = static_cast<int64_t>(config_.kind);
  ctx->saved_data["attention_score"] = static_cast<int64_t>(config_.score);
  ctx->saved_data["attention_window"] = config_.window;
  ctx->saved_data["attention_renormalize"] = config_.renormalize;
  ctx->saved_data["attention_scale"] = scale_;
  ctx->saved_data["attention_bf16"] = products_.bf16;
}

StepAttention::StepAttention(AutogradContext* ctx) {
  config_.kind = static_cast<AttentionKind>(ctx->saved_data["attention_kind"].toInt());
  config_.score = static_cast<ScoreKind>(ctx->saved_data["attention_score"].toInt());
  config_.window = ctx->saved_data["attention_window"].toInt();
  config_.renormalize = ctx->saved_data["attention_renormalize"].toBool();
  scale_ = ctx->saved_data["attention_scale"].toDouble();
  products_.bf16 = ctx->saved_data["attention_bf16"].toBool();
  const std::vector<torch::Tensor> records = ctx->saved_data["attention_records"].toTensorVector();
  keys_ = records[0], values_ = records[1], lengths_ = records[2], contexts_ = records[3], weights_ = records[4];
  align_ = records[5], query_part_ = records[6], position_hidden_ = records[7], position_gate_ = records[8];
  T_ = weights_.size(0), B_ = keys_.size(0), S_ = keys_.size(1), H_ = keys_.size(2);
  const std::vector<torch::Tensor> parameters = ctx->saved_data["attention_parameters"].toTensorVector();
  query_weight_ = parameters[0], score_vector_ = parameters[1], position_weight_ = parameters[2];
  position_bias_ = parameters[3], position_vector_ = parameters[4], position_offset_ = parameters[5];
  P_ = location() ? query_weight_.size(0) : 0;
  if (concat() || location()) query_step_ = products_.panel_operand(query_weight_);
  if (predictive()) position_step_ = products_.panel_operand(position_weight_);
  const torch::TensorOptions opts = keys_.options();
  dkeys_ = torch::zeros_like(keys_), dvalues_ = torch::zeros_like(values_);
  if (concat()) d_query_part_ = torch::zeros({T_, B_, H_}, opts), d_score_vector_ = torch::zeros({T_, B_, H_}, opts);
  if (location()) d_scores_ = torch::zeros({T_, B_, P_}, opts);
  if (predictive()) d_position_hidden_ = torch::zeros({T_, B_, H_}, opts), d_position_gate_ = torch::zeros({T_, B_}, opts);
}

StepAttention::Workspace StepAttention::workspace(int64_t rows) const {
  const torch::TensorOptions opts = keys_.options();
  return {location() ? torch::empty({rows, P_}, opts) : torch::Tensor(), torch::empty({S_}, opts),
          torch::empty({H_}, opts)};
}

// global: the sentence; local-m: [p - D, p + D] around p = min(t, S_b - 1); local-p: around
// round(p_t), p_t = (S_b - 1) sigmoid(...) as recorded (clamped to [D, max(D, S_b - 1 - D)] where the
// weights are renormalised); always inside the sentence.
template <typename scalar_t>
StepAttention::Window StepAttention::window(int64_t t, int64_t row) const {
  const int64_t length = lengths_.data_ptr<int64_t>()[row], D = config_.window;
  int64_t centre = 0;
  switch (config_.kind) {
    case AttentionKind::kGlobal: return {0, length};
    case AttentionKind::kLocalMonotonic: centre = std::min<int64_t>(t, length - 1); break;
    case AttentionKind::kLocalPredictive: {
      const auto last = static_cast<scalar_t>(length - 1);
      // Rounded half to even, as torch.round.
      scalar_t rounded = std::nearbyint(predicted_position<scalar_t>(position_gate_, lengths_, t, row));
      if (!std::isfinite(rounded)) return {0, 0};  // no integer window (forward_step makes the weights NaN)
      if (config_.renormalize) {
        const auto d = static_cast<scalar_t>(D);
        rounded = std::max(std::min(rounded, std::max(last - d, d)), d);
      }
      centre = static_cast<int64_t>(rounded);
      break;
    }
  }
  return {std::max<int64_t>(0, centre - D), std::min(length, centre + D + 1)};
}

// local-p's position predictor for the block: tanh(W_p h + b_p) and the gate sigmoid(v_p . that + b_v).
template <typename scalar_t>
void StepAttention::position_forward(int64_t t, int64_t first, int64_t rows, const torch::Tensor& query) const {
  torch::Tensor hidden = step_rows(position_hidden_, t, B_, first, rows);
  products_.addmm_out(hidden, position_bias_, query, position_step_);
  hidden.tanh_();
  const scalar_t* z = hidden.data_ptr<scalar_t>();
  const scalar_t* v = position_vector_.data_ptr<scalar_t>();
  const scalar_t offset = position_offset_.data_ptr<scalar_t>()[0];
  scalar_t* gate = step_ptr<scalar_t>(position_gate_, t) + first;
  for (int64_t r = 0; r < rows; ++r) {
    const scalar_t e = dot(v, z + r * H_, H_) + offset;
    gate[r] = static_cast<scalar_t>(1.0 / (1.0 + std::exp(-static_cast<double>(e))));
  }
}

template <typename scalar_t>
void StepAttention::forward_step(int64_t t, int64_t first, int64_t rows, const torch::Tensor& query,
                                 Workspace& workspace) const {
  const int64_t S = S_, H = H_;
  if (concat()) {
    torch::Tensor part = step_rows(query_part_, t, B_, first, rows);
    products_.mm_out(part, query, query_step_);
  }
  torch::Tensor scores = location() ? workspace.scores.narrow(0, 0, rows) : torch::Tensor();
  if (location()) products_.mm_out(scores, query, query_step_);
  if (predictive()) position_forward<scalar_t>(t, first, rows, query);
  const scalar_t* queries = query.data_ptr<scalar_t>();
  const auto scale = static_cast<scalar_t>(scale_);
  const double sigma = static_cast<double>(config_.window) / 2.0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = first + r;
    const scalar_t* q = queries + r * H;
    const scalar_t* k = keys_.data_ptr<scalar_t>() + b * S * H;
    const scalar_t* v = values_.data_ptr<scalar_t>() + b * S * H;
    scalar_t* a = step_ptr<scalar_t>(weights_, t) + b * S;
    scalar_t* c = step_ptr<scalar_t>(contexts_, t) + b * 2 * H;
    if (predictive() && !std::isfinite(predicted_position<scalar_t>(position_gate_, lengths_, t, b))) {
      // A diverged predictor: the module's Gaussian is NaN at every position, and so are its weights
      // and context; the loss must show it.
      std::fill_n(a, S, std::numeric_limits<scalar_t>::quiet_NaN());
      std::fill_n(c, H, std::numeric_limits<scalar_t>::quiet_NaN());
      std::memcpy(c + H, q, sizeof(scalar_t) * H);
      continue;
    }
    const Window w = window<scalar_t>(t, b);
    std::fill_n(a, S, scalar_t(0));
    for (int64_t j = w.lo; j < w.hi; ++j) {
      switch (config_.score) {
        case ScoreKind::kDot:
        case ScoreKind::kGeneral: a[j] = dot(k + j * H, q, H) * scale; break;
        case ScoreKind::kConcat:
          a[j] = concat_score(k + j * H, step_ptr<scalar_t>(query_part_, t) + b * H, score_vector_.data_ptr<scalar_t>(),
                              workspace.terms.data_ptr<scalar_t>(), H);
          break;
        case ScoreKind::kLocation:
          a[j] = j < P_ ? workspace.scores.data_ptr<scalar_t>()[r * P_ + j] : static_cast<scalar_t>(kUnscored);
          break;
      }
    }
    // The softmax over the window, as masked_softmax's over all S positions with the positions
    // outside it at -1e30: those add exp(-1e30 - top), which is 0 unless every score in the window
    // is the location score's own -1e30 fill (then the window's weights are 1/S each, as there).
    scalar_t top = -std::numeric_limits<scalar_t>::infinity();
    for (int64_t j = w.lo; j < w.hi; ++j) top = std::max(top, a[j]);
    scalar_t sum = 0;
    for (int64_t j = w.lo; j < w.hi; ++j) {
      sum += (a[j] = static_cast<scalar_t>(vector_exp(static_cast<double>(a[j] - top))));
    }
    const int64_t outside = S - std::max<int64_t>(0, w.hi - w.lo);
    if (outside > 0 && w.hi > w.lo) {
      const auto fill = static_cast<double>(static_cast<scalar_t>(kUnscored));  // in the scores' own dtype
      sum += static_cast<scalar_t>(outside) * static_cast<scalar_t>(std::exp(fill - static_cast<double>(top)));
    }
    for (int64_t j = w.lo; j < w.hi; ++j) a[j] /= sum;
    if (predictive()) {
      // Eq. (10): the window's softmax times a Gaussian around the real-valued p_t.
      std::memcpy(step_ptr<scalar_t>(align_, t) + b * S, a, sizeof(scalar_t) * S);
      const scalar_t p = predicted_position<scalar_t>(position_gate_, lengths_, t, b);
      const auto spread = static_cast<scalar_t>(2.0 * sigma * sigma);
      scalar_t total = 0;
      for (int64_t j = w.lo; j < w.hi; ++j) total += (a[j] *= gaussian(j, p, spread));
      if (config_.renormalize) {
        const scalar_t divisor = std::max(total, static_cast<scalar_t>(1e-30));
        for (int64_t j = w.lo; j < w.hi; ++j) a[j] /= divisor;
      }
    }
    std::fill_n(c, H, scalar_t(0));
    for (int64_t j = w.lo; j < w.hi; ++j) {
      for (int64_t i = 0; i < H; ++i) c[i] += a[j] * v[j * H + i];
    }
    std::memcpy(c + H, q, sizeof(scalar_t) * H);
  }
}

// local-p, row b at step t: the weights' gradient dw back through the renormalisation and the
// Gaussian (rewritten in place to the window's softmax's), and p_t's gradient through the
// predictor's gate and tanh into its records. Returns the window's softmax.
template <typename scalar_t>
const scalar_t* StepAttention::position_backward(int64_t t, int64_t b, const Window& w, const scalar_t* a, scalar_t* dw) {
  const int64_t H = H_;
  const double sigma = static_cast<double>(config_.window) / 2.0;
  const scalar_t* softmax = step_ptr<scalar_t>(align_, t) + b * S_;
  const auto last = static_cast<scalar_t>(lengths_.data_ptr<int64_t>()[b] - 1);
  const scalar_t gate = step_ptr<scalar_t>(position_gate_, t)[b];
  const scalar_t p = predicted_position<scalar_t>(position_gate_, lengths_, t, b);
  const auto spread = static_cast<scalar_t>(2.0 * sigma * sigma);
  const auto variance = static_cast<scalar_t>(sigma * sigma);
  if (config_.renormalize) {
    scalar_t total = 0, weighted = 0;
    for (int64_t j = w.lo; j < w.hi; ++j) {
      total += softmax[j] * gaussian(j, p, spread);
      weighted += a[j] * dw[j];
    }
    // clamp_min(1e-30)'s gradient reaches the total only where the total is at least 1e-30.
    const bool clamped = total < static_cast<scalar_t>(1e-30);
    const scalar_t divisor = clamped ? static_cast<scalar_t>(1e-30) : total;
    for (int64_t j = w.lo; j < w.hi; ++j) dw[j] = (dw[j] - (clamped ? scalar_t(0) : weighted)) / divisor;
  }
  scalar_t dp = 0;
  for (int64_t j = w.lo; j < w.hi; ++j) {
    const scalar_t g = gaussian(j, p, spread);
    dp += dw[j] * softmax[j] * g * (static_cast<scalar_t>(j) - p) / variance;
    dw[j] *= g;
  }
  // p_t = (S_b - 1) sigmoid(e): the gradient of e, and through tanh that of W_p h + b_p.
  const scalar_t de = dp * last * gate * (scalar_t(1) - gate);
  step_ptr<scalar_t>(d_position_gate_, t)[b] = de;
  const scalar_t* z = step_ptr<scalar_t>(position_hidden_, t) + b * H;
  const scalar_t* vp = position_vector_.data_ptr<scalar_t>();
  scalar_t* dpre = step_ptr<scalar_t>(d_position_hidden_, t) + b * H;
  for (int64_t i = 0; i < H; ++i) dpre[i] = de * vp[i] * (scalar_t(1) - z[i] * z[i]);
  return softmax;
}

template <typename scalar_t>
void StepAttention::backward_step(int64_t t, int64_t first, int64_t rows, const torch::Tensor& query,
                                  const scalar_t* dch, torch::Tensor& dquery, Workspace& workspace) {
  const int64_t S = S_, H = H_;
  const scalar_t* queries = query.data_ptr<scalar_t>();
  scalar_t* dq_rows = dquery.data_ptr<scalar_t>();
  scalar_t* dw = workspace.row.data_ptr<scalar_t>();
  const auto scale = static_cast<scalar_t>(scale_);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = first + r;
    const scalar_t* dc = dch + r * 2 * H;
    const scalar_t* q = queries + r * H;
    scalar_t* dq = dq_rows + r * H;
    std::memcpy(dq, dc + H, sizeof(scalar_t) * H);
    const scalar_t* k = keys_.data_ptr<scalar_t>() + b * S * H;
    const scalar_t* v = values_.data_ptr<scalar_t>() + b * S * H;
    scalar_t* dk = dkeys_.data_ptr<scalar_t>() + b * S * H;
    scalar_t* dv = dvalues_.data_ptr<scalar_t>() + b * S * H;
    const scalar_t* a = step_ptr<scalar_t>(weights_, t) + b * S;
    const Window w = window<scalar_t>(t, b);
    // The context's gradient to the weights and the values.
    for (int64_t j = w.lo; j < w.hi; ++j) {
      dw[j] = dot(dc, v + j * H, H);
      for (int64_t i = 0; i < H; ++i) dv[j * H + i] += a[j] * dc[i];
    }
    // local-p: back through the renormalisation and the Gaussian, to the softmax and to p_t.
    const scalar_t* softmax = predictive() ? position_backward<scalar_t>(t, b, w, a, dw) : a;
    // The softmax's gradient: ds_j = a_j (dw_j - sum_k a_k dw_k) over the window.
    scalar_t weighted = 0;
    for (int64_t j = w.lo; j < w.hi; ++j) weighted += softmax[j] * dw[j];
    for (int64_t j = w.lo; j < w.hi; ++j) {
      const scalar_t ds = softmax[j] * (dw[j] - weighted);
      switch (config_.score) {
        case ScoreKind::kDot:
        case ScoreKind::kGeneral:
          for (int64_t i = 0; i < H; ++i) {
            dq[i] += ds * scale * k[j * H + i];
            dk[j * H + i] += ds * scale * q[i];
          }
          break;
        case ScoreKind::kConcat:
          concat_score_backward(k + j * H, step_ptr<scalar_t>(query_part_, t) + b * H,
                                score_vector_.data_ptr<scalar_t>(), ds, dk + j * H,
                                step_ptr<scalar_t>(d_query_part_, t) + b * H,
                                step_ptr<scalar_t>(d_score_vector_, t) + b * H, H);
          break;
        case ScoreKind::kLocation:
          if (j < P_) step_ptr<scalar_t>(d_scores_, t)[b * P_ + j] = ds;
          break;
      }
    }
  }
  // The query-side products' gradients, for the block at once.
  if (concat()) products_.add_mm_(dquery, step_rows(d_query_part_, t, B_, first, rows), query_step_);
  if (location()) products_.add_mm_(dquery, step_rows(d_scores_, t, B_, first, rows), query_step_);
  if (predictive()) products_.add_mm_(dquery, step_rows(d_position_hidden_, t, B_, first, rows), position_step_);
}

void StepAttention::append_input_gradients(variable_list& out) const {
  out.push_back(dkeys_);
  out.push_back(dvalues_);
}

void StepAttention::append_parameter_gradients(variable_list& out, const torch::Tensor& queries,
                                               const torch::Tensor& tokens) const {
  const auto real = [&](const torch::Tensor& buffer) { return buffer.reshape({T_ * B_, -1}).index_select(0, tokens); };
  const torch::Tensor q = real(queries);
  if (concat()) {
    out.push_back(products_.mm(real(d_query_part_).t(), q));
    out.push_back(real(d_score_vector_).sum(0).unsqueeze(0));
  }
  if (location()) out.push_back(products_.mm(real(d_scores_).t(), q));
  if (predictive()) {
    const torch::Tensor dpre = real(d_position_hidden_);
    const torch::Tensor de = real(d_position_gate_);
    out.push_back(products_.mm(dpre.t(), q));
    out.push_back(dpre.sum(0));
    out.push_back(de.t().mm(real(position_hidden_)));
    out.push_back(de.sum(0));
  }
}

template void StepAttention::forward_step<float>(int64_t, int64_t, int64_t, const torch::Tensor&, Workspace&) const;
template void StepAttention::forward_step<double>(int64_t, int64_t, int64_t, const torch::Tensor&, Workspace&) const;
template void StepAttention::backward_step<float>(int64_t, int64_t, int64_t, const torch::Tensor&, const float*,
                                                  torch::Tensor&, Workspace&);
template void StepAttention::backward_step<double>(int64_t, int64_t, int64_t, const torch::Tensor&, const double*,
                                                   torch::Tensor&, Workspace&);

}  // namespace luong::models
