// The teacher-forced decoders' fused kernels: LuongDecoder and BahdanauDecoder over the stacked
// cells of decoder_stack.h, each one autograd node.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "decoder_stack.h"
#include "luong/models/fused_attention.h"
#include "luong/models/fused_recurrence.h"
#include "luong/util/path_counts.h"

namespace luong::models {
namespace {

using cells::tanh_backward;
using detail::BlockProducts;
using detail::check_inputs;
using detail::DecoderStack;
using detail::to_lengths;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The decoders' kernels run their rows in PackedRows's order, dealt by target length: a step runs
// each block's rows whose targets are still running, and everything of the others stays zero (their
// features past the target's end are zero and receive no gradient). target_lengths: [B] int64, or
// empty for every row all T steps.
torch::Tensor decoder_lengths(const torch::Tensor& target_lengths, int64_t batch, int64_t steps) {
  if (target_lengths.numel() == 0) return torch::full({batch}, steps, torch::kLong);
  const torch::Tensor lengths = to_lengths(target_lengths);
  check_inputs(lengths, batch, steps);
  return lengths;
}

// A decoder kernel's batch-indexed inputs in the kernel's row order.
struct DecoderInputs {
  torch::Tensor embedded, h0, c0, keys, values, lengths, between;

  DecoderInputs(const PackedRows& rows, const torch::Tensor& embedded_in, const torch::Tensor& h0_in,
                const torch::Tensor& c0_in, const torch::Tensor& keys_in, const torch::Tensor& values_in,
                const torch::Tensor& lengths_in, const torch::Tensor& between_in)
      : embedded(rows.to_kernel(embedded_in)),
        h0(rows.to_kernel(h0_in, 1)),
        c0(c0_in.numel() > 0 ? rows.to_kernel(c0_in, 1) : c0_in),
        keys(rows.to_kernel(keys_in)),
        values(rows.to_kernel(values_in)),
        lengths(to_lengths(lengths_in)),
        between(between_in.numel() > 0 ? rows.to_kernel(between_in, 1) : between_in) {
    check_inputs(lengths, embedded.size(0), keys.size(1));
    lengths = rows.to_kernel(lengths);
  }

  // The gradients of embedded, h0, c0, keys and values (result[0..4]) back in the caller's order.
  static void restore_order(const PackedRows& rows, variable_list& result) {
    result[0] = rows.to_caller(result[0]);
    result[1] = rows.to_caller(result[1], 1);
    if (result[2].defined()) result[2] = rows.to_caller(result[2], 1);
    result[3] = rows.to_caller(result[3]);
    result[4] = rows.to_caller(result[4]);
  }
};

void save_rows(AutogradContext* ctx, const torch::Tensor& target_lengths, const PackedRows& rows) {
  ctx->saved_data["target_lengths"] = target_lengths;
  ctx->saved_data["blocks"] = rows.blocks();
}
PackedRows saved_rows(AutogradContext* ctx, int64_t steps) {
  return {ctx->saved_data["target_lengths"].toTensor(), steps, ctx->saved_data["blocks"].toInt()};
}

// What both decoders' forward passes build before their time loops: the rows in the kernel's order,
// the stacked cells, the attention, the embeddings [T, B, E], and their share of layer 0's gates at
// the real tokens, for all of them at once: [N, G H]. `fed` names the input that layer 0 takes
// beside the embeddings (for the error where its weights do not take it).
struct DecoderForward {
  torch::Tensor target_lengths;
  PackedRows packed;
  DecoderInputs in;
  DecoderStack stack;
  StepAttention attention;
  torch::Tensor emb, ge;

  DecoderForward(const torch::Tensor& embedded, const torch::Tensor& h0, const torch::Tensor& c0,
                 const torch::Tensor& keys, const torch::Tensor& values, const torch::Tensor& lengths,
                 const torch::Tensor& target_lengths_in, at::TensorList cell_weights,
                 at::TensorList attention_parameters, const torch::Tensor& between_mask,
                 const AttentionConfig& attention_config, double scale, bool lstm, bool bf16, const char* fed)
      : target_lengths(decoder_lengths(target_lengths_in, embedded.size(0), embedded.size(1))),
        packed(target_lengths, embedded.size(1)),
        in(packed, embedded, h0, c0, keys, values, lengths, between_mask),
        stack(cell_weights, in.h0, in.c0, in.between, embedded.size(1), lstm, bf16),
        attention(attention_config, scale, attention_parameters, in.keys.contiguous(), in.values.contiguous(),
                  in.lengths, embedded.size(1), stack.products),
        emb(in.embedded.transpose(0, 1).contiguous()) {
    TORCH_CHECK(cell_weights[0].size(1) == embedded.size(2) + stack.H,
                "fused decoder: the recurrent input must be [embedding; ", fed, "]");
    ge = stack.products.addmm(cell_weights[2], packed.real(emb), stack.w_embed.t());
  }

  void save(AutogradContext* ctx) const {
    stack.save(ctx);
    attention.save(ctx);
    save_rows(ctx, target_lengths, packed);
    ctx->saved_data["emb"] = emb;
  }
};

// What both decoders' backward passes share: what DecoderForward saved, the features' gradient in the
// kernel's order [T, B, H], and the gradients the time loop fills: the gates' at the real tokens and
// the initial states' [L, B, H].
struct DecoderBackward {
  DecoderStack stack;
  StepAttention attention;
  torch::Tensor emb;
  PackedRows packed;
  torch::Tensor d_features;
  DecoderStack::RealGateGradients real;
  torch::Tensor dh0, dc0;

  DecoderBackward(AutogradContext* ctx, const torch::Tensor& features_gradient)
      : stack(ctx),
        attention(ctx),
        emb(ctx->saved_data["emb"].toTensor()),
        packed(saved_rows(ctx, stack.T)),
        d_features(packed.to_kernel(features_gradient).transpose(0, 1).contiguous()),
        real(stack.gate_gradients(packed)),
        dh0(torch::empty({stack.L, stack.B, stack.H}, emb.options())),
        dc0(stack.lstm ? torch::empty({stack.L, stack.B, stack.H}, emb.options()) : torch::Tensor()) {}

  // After the time loop, the whole-batch products over the real tokens: the embeddings' gradient,
  // layer 0's w_ih gradient in two parts (the embeddings' columns and those of `fed` [T, B, H], the
  // input fed to layer 0 beside them), the decoder's `extra` products, then the stack's. Returns the
  // gradients of the function's inputs from the embeddings to the attention's parameters, in order,
  // then the extra products. queries [T, B, H]: the top layer's states that queried the attention.
  variable_list gradients(const torch::Tensor& fed, const torch::Tensor& queries,
                          const std::vector<Factors>& extra) const {
    const torch::Tensor& dgi0 = real.dgi[0];
    std::vector<Factors> factors = {{dgi0, stack.w_embed}, {dgi0.t(), packed.real(emb)}, {dgi0.t(), packed.real(fed)}};
    factors.insert(factors.end(), extra.begin(), extra.end());
    stack.add_weight_gradient_factors(factors, real, packed);
    std::vector<torch::Tensor> outs(factors.size());
    const torch::Tensor dw_ih0 = stack.layer0_input_weight_gradient(outs, 1);
    const std::vector<torch::Tensor> product = stack.products.mm_each(factors, outs);
    variable_list result = {packed.unpacked(product[0]).transpose(0, 1), dh0, dc0};
    attention.append_input_gradients(result);
    DecoderInputs::restore_order(packed, result);
    result.emplace_back();  // lengths
    result.emplace_back();  // target lengths
    const auto stack_products = product.begin() + static_cast<std::ptrdiff_t>(3 + extra.size());
    stack.append_weight_gradients(result, real, dw_ih0, stack_products);
    attention.append_parameter_gradients(result, queries, packed.tokens());
    result.insert(result.end(), product.begin() + 3, stack_products);
    return result;
  }
};

// The LuongDecoder: input feeding into the bottom layer, attention from the top one, and an optional
// dropout mask on h~ (the paper's dropout on the attentional vector, which feeds both the output layer
// and the next step): the features are h~ * mask, and the unmasked tanh is kept.
struct LuongTeacherForcedFunction : torch::autograd::Function<LuongTeacherForcedFunction> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& embedded_in, const torch::Tensor& h0,
                               const torch::Tensor& c0, const torch::Tensor& keys, const torch::Tensor& values,
                               const torch::Tensor& lengths_in, const torch::Tensor& target_lengths_in,
                               at::TensorList cell_weights, at::TensorList attention_parameters,
                               const torch::Tensor& wc_weight, const torch::Tensor& wc_bias,
                               const torch::Tensor& mask, const torch::Tensor& between_mask,
                               const AttentionConfig& attention_config, double scale, bool lstm, bool bf16) {
    RECORD_FUNCTION("luong::LuongTeacherForcedFunction::forward", std::vector<c10::IValue>());
    const DecoderForward run(embedded_in, h0, c0, keys, values, lengths_in, target_lengths_in, cell_weights,
                             attention_parameters, between_mask, attention_config, scale, lstm, bf16, "h~");
    const PackedRows& packed = run.packed;
    const DecoderStack& stack = run.stack;
    const StepAttention& attention = run.attention;
    const MatrixProducts& products = stack.products;
    const torch::Tensor &emb = run.emb, &ge = run.ge;
    const int64_t B = stack.B, T = stack.T, H = stack.H, G = stack.G;
    const bool masked = mask.numel() > 0;
    const torch::TensorOptions opts = emb.options();
    torch::Tensor attentional = torch::zeros({T + 1, B, H}, opts);  // h~_0 .. h~_T (masked)
    torch::Tensor unmasked = masked ? torch::empty({T, B, H}, opts) : torch::empty({0}, opts);
    const torch::Tensor drop = masked ? packed.to_kernel(mask).transpose(0, 1).contiguous() : mask;  // [T, B, H]
    const PanelOperand w_feed_t = products.panel_operand(stack.w_feed.t());
    const torch::Tensor wc_operand = products.operand(wc_weight.detach());
    const PanelOperand wc_t = products.panel_operand(wc_operand.t());
    const torch::Tensor bias_c = wc_bias.detach();
    const torch::Tensor& top = stack.states[stack.L - 1];
    const torch::Tensor& ch = attention.contexts();  // [c_t; h_t]
    StepTeam team;
    AT_DISPATCH_FLOATING_TYPES(emb.scalar_type(), "fused_luong_teacher_forced", [&] {
      packed.for_blocks_side_by_side([&](int64_t block, int64_t first, int64_t rows, bool side_by_side) {
        const BlockProducts step{products, side_by_side && StepTeam::takes(products) ? &team : nullptr, block};
        const StepTeam::Member member(step.team);
        torch::Tensor gi_rows = torch::empty({rows, G * H}, opts);
        torch::Tensor gh_rows = torch::empty({rows, G * H}, opts);
        StepAttention::Workspace workspace = attention.workspace(rows);
        int64_t computed = 0;
        for (int64_t t = 0; t < T; ++t) {
          // The block's rows run longest first; in a team it makes the products (of no rows) until
          // the other block is done too.
          if (!step.runs_step(packed, t)) break;
          const int64_t n = packed.active(t, block);
          computed += n;
          torch::Tensor gi = gi_rows.narrow(0, 0, n), gh = gh_rows.narrow(0, 0, n);
          step.addmm_out(gi, ge.narrow(0, packed.offset(t, block), n), step_rows(attentional, t, B, first, n), w_feed_t);
          stack.forward_step<scalar_t>(step, t, first, n, gi, gh);
          if (n > 0) attention.forward_step<scalar_t>(t, first, n, step_rows(top, t + 1, B, first, n), workspace);
          torch::Tensor next = step_rows(attentional, t + 1, B, first, n);
          step.addmm_out(next, bias_c, step_rows(ch, t, B, first, n), wc_t);
          next.tanh_();
          if (masked) {
            step_rows(unmasked, t, B, first, n).copy_(next);
            next.mul_(step_rows(drop, t, B, first, n));
          }
        }
        path_counts::add(path_counts::Path::kFusedRecurrentRows, computed);
      });
    });
    run.save(ctx);
    ctx->saved_data["attentional"] = attentional;
    ctx->saved_data["unmasked"] = unmasked;
    ctx->saved_data["drop"] = drop;
    ctx->saved_data["wc_operand"] = wc_operand;
    return {packed.to_caller(attentional.narrow(0, 1, T).transpose(0, 1))};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    DecoderBackward run(ctx, grads[0]);
    const DecoderStack& stack = run.stack;
    StepAttention& attention = run.attention;
    const PackedRows& packed = run.packed;
    const torch::Tensor attentional = ctx->saved_data["attentional"].toTensor();
    const torch::Tensor unmasked = ctx->saved_data["unmasked"].toTensor();
    const torch::Tensor drop = ctx->saved_data["drop"].toTensor();
    const torch::Tensor wc_operand = ctx->saved_data["wc_operand"].toTensor();
    const bool masked = drop.numel() > 0;
    const int64_t T = stack.T, B = stack.B, H = stack.H;
    const torch::TensorOptions opts = run.emb.options();
    torch::Tensor dpre = torch::empty({packed.tokens().size(0), H}, opts);  // packed, as the gate gradients
    const MatrixProducts& products = stack.products;
    const PanelOperand w_feed = products.panel_operand(stack.w_feed);
    const PanelOperand wc = products.panel_operand(wc_operand);
    const torch::Tensor& top = stack.states[stack.L - 1];
    StepTeam team;
    AT_DISPATCH_FLOATING_TYPES(run.emb.scalar_type(), "fused_luong_teacher_forced_backward", [&] {
      packed.for_blocks_side_by_side([&](int64_t block, int64_t first, int64_t rows, bool side_by_side) {
        const BlockProducts step{products, side_by_side && StepTeam::takes(products) ? &team : nullptr, block};
        const StepTeam::Member member(step.team);
        // From step t+1's input; zero for a row until its last step, where the backward loop reaches it.
        torch::Tensor d_attentional_rows = torch::zeros({rows, H}, opts);
        DecoderStack::Carried carried = stack.carried(run.dh0, run.dc0, first, rows);
        torch::Tensor dh_rows = torch::empty({rows, H}, opts);
        torch::Tensor dch_rows = torch::empty({rows, 2 * H}, opts);
        StepAttention::Workspace workspace = attention.workspace(rows);
        scalar_t* d_att = d_attentional_rows.data_ptr<scalar_t>();
        int64_t computed = 0;
        for (int64_t t = T - 1; t >= 0; --t) {
          if (!step.runs_step(packed, t)) continue;  // (as forward)
          const int64_t n = packed.active(t, block), token = packed.offset(t, block);
          computed += n;
          const scalar_t* d_feat = step_ptr<scalar_t>(run.d_features, t) + first * H;
          for (int64_t i = 0; i < n * H; ++i) d_att[i] += d_feat[i];
          if (masked) {
            const scalar_t* m = step_ptr<scalar_t>(drop, t) + first * H;
            for (int64_t i = 0; i < n * H; ++i) d_att[i] *= m[i];
            tanh_backward(d_att, step_ptr<scalar_t>(unmasked, t) + first * H, dpre.data_ptr<scalar_t>() + token * H,
                          n * H);
          } else {
            tanh_backward(d_att, step_ptr<scalar_t>(attentional, t + 1) + first * H,
                          dpre.data_ptr<scalar_t>() + token * H, n * H);
          }
          torch::Tensor dch = dch_rows.narrow(0, 0, n), dh_step = dh_rows.narrow(0, 0, n);
          step.mm_out(dch, dpre.narrow(0, token, n), wc);
          // dh_step: the query's and Wc's paths to the top layer's h_t.
          if (n > 0) {
            attention.backward_step<scalar_t>(t, first, n, step_rows(top, t + 1, B, first, n), dch.data_ptr<scalar_t>(),
                                              dh_step, workspace);
          }
          DecoderStack::Carried active = DecoderStack::first_rows(carried, n);
          stack.backward_step<scalar_t>(step, t, first, n, token, dh_step, active, run.real.dgi, run.real.dgh);
          torch::Tensor d_attentional = d_attentional_rows.narrow(0, 0, n);
          step.mm_out(d_attentional, run.real.dgi[0].narrow(0, token, n), w_feed);
        }
        path_counts::add(path_counts::Path::kFusedRecurrentRows, computed);
      });
    });
    // W_c's weight gradient among the whole-batch products.
    variable_list result = run.gradients(attentional.narrow(0, 0, T), top.narrow(0, 1, T),
                                         {{dpre.t(), packed.real(attention.contexts())}});
    result.push_back(dpre.sum(0));
    for (int i = 0; i < 6; ++i) result.emplace_back();  // the masks, the attention's configuration, scale, lstm, bf16
    return result;
  }
};

// The notebook's Decoder: attention from the top layer's previous state h_{t-1}, its context fed into
// the bottom layer beside the embedding; the features are the top layer's h_t (their dropout, which
// feeds nothing else, is the caller's).
struct BahdanauTeacherForcedFunction : torch::autograd::Function<BahdanauTeacherForcedFunction> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& embedded_in, const torch::Tensor& h0,
                               const torch::Tensor& c0, const torch::Tensor& keys, const torch::Tensor& values,
                               const torch::Tensor& lengths_in, const torch::Tensor& target_lengths_in,
                               at::TensorList cell_weights, at::TensorList attention_parameters,
                               const torch::Tensor& between_mask, const AttentionConfig& attention_config, double scale,
                               bool lstm, bool bf16) {
    RECORD_FUNCTION("luong::BahdanauTeacherForcedFunction::forward", std::vector<c10::IValue>());
    const DecoderForward run(embedded_in, h0, c0, keys, values, lengths_in, target_lengths_in, cell_weights,
                             attention_parameters, between_mask, attention_config, scale, lstm, bf16, "context");
    const PackedRows& packed = run.packed;
    const DecoderStack& stack = run.stack;
    const StepAttention& attention = run.attention;
    const MatrixProducts& products = stack.products;
    const torch::Tensor &emb = run.emb, &ge = run.ge;
    const int64_t B = stack.B, T = stack.T, H = stack.H, G = stack.G;
    const torch::TensorOptions opts = emb.options();
    const PanelOperand w_context_t = products.panel_operand(stack.w_feed.t());
    const torch::Tensor& top = stack.states[stack.L - 1];
    const torch::Tensor& ch = attention.contexts();  // [c_t; h_{t-1}]
    AT_DISPATCH_FLOATING_TYPES(emb.scalar_type(), "fused_bahdanau_teacher_forced", [&] {
      packed.for_blocks([&](int64_t block, int64_t first, int64_t rows) {
        torch::Tensor gi_rows = torch::empty({rows, G * H}, opts);
        torch::Tensor gh_rows = torch::empty({rows, G * H}, opts);
        StepAttention::Workspace workspace = attention.workspace(rows);
        int64_t computed = 0;
        for (int64_t t = 0; t < T; ++t) {
          const int64_t n = packed.active(t, block);
          if (n == 0) break;  // the block's rows run longest first
          computed += n;
          torch::Tensor gi = gi_rows.narrow(0, 0, n), gh = gh_rows.narrow(0, 0, n);
          attention.forward_step<scalar_t>(t, first, n, step_rows(top, t, B, first, n), workspace);
          products.addmm_out(gi, ge.narrow(0, packed.offset(t, block), n), step_rows(ch, t, B, first, n).narrow(1, 0, H),
                             w_context_t);
          stack.forward_step<scalar_t>({products}, t, first, n, gi, gh);
        }
        path_counts::add(path_counts::Path::kFusedRecurrentRows, computed);
      });
    });
    run.save(ctx);
    return {packed.to_caller(top.narrow(0, 1, T).transpose(0, 1))};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    DecoderBackward run(ctx, grads[0]);
    const DecoderStack& stack = run.stack;
    StepAttention& attention = run.attention;
    const PackedRows& packed = run.packed;
    const int64_t T = stack.T, B = stack.B, H = stack.H;
    const torch::TensorOptions opts = run.emb.options();
    const MatrixProducts& products = stack.products;
    const PanelOperand w_context = products.panel_operand(stack.w_feed);
    const torch::Tensor& top = stack.states[stack.L - 1];
    AT_DISPATCH_FLOATING_TYPES(run.emb.scalar_type(), "fused_bahdanau_teacher_forced_backward", [&] {
      packed.for_blocks([&](int64_t block, int64_t first, int64_t rows) {
        DecoderStack::Carried carried = stack.carried(run.dh0, run.dc0, first, rows);
        torch::Tensor dh_rows = torch::empty({rows, H}, opts);
        torch::Tensor dquery_rows = torch::empty({rows, H}, opts);
        // [d context; 0]: h_{t-1} enters only as the query
        torch::Tensor dch_rows = torch::zeros({rows, 2 * H}, opts);
        StepAttention::Workspace workspace = attention.workspace(rows);
        int64_t computed = 0;
        for (int64_t t = T - 1; t >= 0; --t) {
          const int64_t n = packed.active(t, block), token = packed.offset(t, block);
          if (n == 0) continue;
          computed += n;
          torch::Tensor dh_step = dh_rows.narrow(0, 0, n), dquery = dquery_rows.narrow(0, 0, n);
          dh_step.copy_(step_rows(run.d_features, t, B, first, n));
          DecoderStack::Carried active = DecoderStack::first_rows(carried, n);
          stack.backward_step<scalar_t>({products}, t, first, n, token, dh_step, active, run.real.dgi, run.real.dgh);
          torch::Tensor d_context = dch_rows.narrow(0, 0, n).narrow(1, 0, H);
          products.mm_out(d_context, run.real.dgi[0].narrow(0, token, n), w_context);
          attention.backward_step<scalar_t>(t, first, n, step_rows(top, t, B, first, n), dch_rows.data_ptr<scalar_t>(),
                                            dquery, workspace);
          active.dh[stack.L - 1].add_(dquery);
        }
        path_counts::add(path_counts::Path::kFusedRecurrentRows, computed);
      });
    });
    variable_list result = run.gradients(attention.contexts().narrow(2, 0, H), top.narrow(0, 0, T), {});
    for (int i = 0; i < 5; ++i) result.emplace_back();  // the mask, the attention's configuration, scale, lstm, bf16
    return result;
  }
};

}  // namespace

torch::Tensor fused_luong_teacher_forced(const torch::Tensor& embedded, const torch::Tensor& h0, const torch::Tensor& c0,
                                         const torch::Tensor& keys, const torch::Tensor& values,
                                         const torch::Tensor& src_lengths, const std::vector<CellWeights>& layers,
                                         bool lstm, const torch::Tensor& wc_weight, const torch::Tensor& wc_bias,
                                         const FusedAttentionParameters& attention, const torch::Tensor& dropout_mask,
                                         const torch::Tensor& between_layers_mask, const torch::Tensor& target_lengths) {
  TORCH_CHECK(embedded.device().is_cpu(), "fused_luong_teacher_forced runs on the CPU");
  const FusedKernelCall call(wc_weight);
  const std::vector<torch::Tensor> cell_weights = detail::flat_weights(layers);
  const torch::Tensor empty = torch::empty({0}, wc_weight.options());
  const auto or_empty = [&](const torch::Tensor& t) { return t.defined() ? call.input(t) : empty; };
  return LuongTeacherForcedFunction::apply(call.input(embedded), call.input(h0), lstm ? call.input(c0) : empty,
                                           call.input(keys), call.input(values), src_lengths,
                                           target_lengths.defined() ? target_lengths : detail::empty_lengths(),
                                           at::TensorList(cell_weights), at::TensorList(attention.tensors), wc_weight,
                                           wc_bias, or_empty(dropout_mask), or_empty(between_layers_mask),
                                           attention.config, attention.scale, lstm, call.bf16)[0];
}

torch::Tensor fused_bahdanau_teacher_forced(const torch::Tensor& embedded, const torch::Tensor& h0,
                                            const torch::Tensor& c0, const torch::Tensor& keys,
                                            const torch::Tensor& values, const torch::Tensor& src_lengths,
                                            const std::vector<CellWeights>& layers, bool lstm,
                                            const FusedAttentionParameters& attention,
                                            const torch::Tensor& between_layers_mask,
                                            const torch::Tensor& target_lengths) {
  TORCH_CHECK(embedded.device().is_cpu(), "fused_bahdanau_teacher_forced runs on the CPU");
  const FusedKernelCall call(layers.at(0).w_ih);
  const std::vector<torch::Tensor> cell_weights = detail::flat_weights(layers);
  const torch::Tensor empty = torch::empty({0}, layers[0].w_ih.options());
  return BahdanauTeacherForcedFunction::apply(
      call.input(embedded), call.input(h0), lstm ? call.input(c0) : empty, call.input(keys), call.input(values),
      src_lengths, target_lengths.defined() ? target_lengths : detail::empty_lengths(), at::TensorList(cell_weights),
      at::TensorList(attention.tensors),
      between_layers_mask.defined() ? call.input(between_layers_mask) : empty, attention.config, attention.scale, lstm,
      call.bf16)[0];
}

}  // namespace luong::models