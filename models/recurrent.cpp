#include "luong/models/recurrent.h"

#include "luong/models/dropout.h"
#include "luong/models/gather_rows.h"

namespace luong::models {

RecurrentState RecurrentState::index_select(const torch::Tensor& rows) const {
  return {hidden.index_select(1, rows), cell.defined() ? cell.index_select(1, rows) : cell};
}

torch::Tensor embedding_lookup(const torch::nn::Embedding& embedding, const torch::Tensor& ids) {
  std::vector<int64_t> shape(ids.sizes().begin(), ids.sizes().end());
  shape.push_back(embedding->weight.size(1));
  return gather_rows(embedding->weight, ids.reshape({-1}), embedding->options.padding_idx()).view(shape);
}

std::vector<torch::Tensor> RecurrentLayers::all_weights() const {
  return kind == CellKind::kLstm ? lstm->all_weights() : gru->all_weights();
}

int64_t RecurrentLayers::layers() const {
  return kind == CellKind::kLstm ? lstm->options.num_layers() : gru->options.num_layers();
}

RecurrentState RecurrentLayers::step(const torch::Tensor& input, const RecurrentState& state, bool training) const {
  const std::vector<torch::Tensor> weights = all_weights();
  const int64_t count = state.hidden.size(0);
  std::vector<torch::Tensor> hidden, cell;
  hidden.reserve(static_cast<std::size_t>(count));
  torch::Tensor x = input;
  for (int64_t l = 0; l < count; ++l) {
    const auto i = static_cast<std::size_t>(4 * l);
    torch::Tensor h;
    if (kind == CellKind::kLstm) {
      auto [h_next, c_next] = torch::lstm_cell(x, {state.hidden[l], state.cell[l]}, weights[i], weights[i + 1],
                                               weights[i + 2], weights[i + 3]);
      h = h_next;
      cell.push_back(c_next);
    } else {
      h = torch::gru_cell(x, state.hidden[l], weights[i], weights[i + 1], weights[i + 2], weights[i + 3]);
    }
    hidden.push_back(h);
    x = l + 1 < count ? maybe_dropout(h, dropout, training) : h;
  }
  const auto stack = [](std::vector<torch::Tensor>& parts) {
    return parts.size() == 1 ? parts[0].unsqueeze(0) : torch::stack(parts);
  };
  return {stack(hidden), kind == CellKind::kLstm ? stack(cell) : torch::Tensor()};
}

std::pair<torch::Tensor, RecurrentState> RecurrentLayers::sequence(const torch::Tensor& x,
                                                                  const torch::Tensor& lengths) {
  namespace rnn = torch::nn::utils::rnn;
  const rnn::PackedSequence packed = rnn::pack_padded_sequence(x, lengths.to(torch::kCPU, torch::kLong),
                                                               /*batch_first=*/true, /*enforce_sorted=*/false);
  const auto unpack = [&](const rnn::PackedSequence& out) {
    return std::get<0>(rnn::pad_packed_sequence(out, /*batch_first=*/true, /*padding_value=*/0.0, x.size(1)));
  };
  if (kind == CellKind::kLstm) {
    auto [out, hc] = lstm->forward_with_packed_input(packed);
    return {unpack(out), {std::get<0>(hc), std::get<1>(hc)}};
  }
  auto [out, h] = gru->forward_with_packed_input(packed);
  return {unpack(out), {h, {}}};
}

namespace {

// [B, S]: for each row, position t read backwards within the row's length (t itself on padding).
// It is its own inverse.
torch::Tensor reversed_positions(const torch::Tensor& lengths, int64_t steps) {
  const torch::Tensor t = torch::arange(steps, lengths.options()).unsqueeze(0);
  const torch::Tensor length = lengths.unsqueeze(1);
  return torch::where(t < length, length - 1 - t, t);
}

// x [B, S, F] with each row's time steps taken at `positions` [B, S].
torch::Tensor take_steps(const torch::Tensor& x, const torch::Tensor& positions) {
  return x.gather(1, positions.unsqueeze(-1).expand({-1, -1, x.size(2)}));
}

struct DirectionOutput {
  torch::Tensor outputs;      ///< [B, S, H]; past a row's end, whatever the cell computed there
  torch::Tensor hidden, cell;  ///< [B, H] at the row's end (cell: LSTM only)
};

// cuDNN takes a layer's weights where they are (LibTorch's try_get_weight_buf) only where they start
// a storage of their own, laid out as one layer's; LibTorch's module keeps the whole stack in one,
// so each call for a direction after the first would copy its weights and warn. On a GPU, each
// direction's four weights get a storage of their own, once (the parameters keep their identity).
void give_each_direction_its_storage(const std::vector<torch::Tensor>& weights) {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i + 4 <= weights.size(); i += 4) {
    int64_t count = 0;
    for (std::size_t k = i; k < i + 4; ++k) count += weights[k].numel();
    const torch::Tensor& first = weights[i];
    if (first.storage_offset() == 0 &&
        first.storage().nbytes() == static_cast<std::size_t>(count) * first.element_size()) {
      continue;
    }
    std::vector<torch::Tensor> flat;
    for (std::size_t k = i; k < i + 4; ++k) flat.push_back(weights[k].reshape({-1}));
    const torch::Tensor buffer = torch::cat(flat);
    int64_t offset = 0;
    for (std::size_t k = i; k < i + 4; ++k) {
      weights[k].set_data(buffer.narrow(0, offset, weights[k].numel()).view(weights[k].sizes()));
      offset += weights[k].numel();
    }
  }
}

// One GRU direction over padded rows, in one call of LibTorch's gru (cuDNN on a GPU).
DirectionOutput gru_direction(const torch::Tensor& x, const torch::Tensor& lengths, const torch::Tensor* weights,
                              bool reverse, bool training) {
  const int64_t batch = x.size(0), hidden = weights[1].size(1);
  const auto run = [&](const torch::Tensor& input) {
    const torch::Tensor h0 = torch::zeros({1, batch, hidden}, input.options());
    return std::get<0>(torch::gru(input, h0, {weights[0], weights[1], weights[2], weights[3]}, /*has_biases=*/true,
                                  /*num_layers=*/1, /*dropout=*/0.0, training, /*bidirectional=*/false,
                                  /*batch_first=*/true));
  };
  if (reverse) {
    const torch::Tensor positions = reversed_positions(lengths, x.size(1));
    const torch::Tensor outputs = take_steps(run(take_steps(x, positions)), positions);
    return {outputs, outputs.select(1, 0), {}};  // the backward pass ends at position 0
  }
  const torch::Tensor outputs = run(x);
  const torch::Tensor last = (lengths - 1).clamp_min(0).view({batch, 1, 1}).expand({batch, 1, hidden});
  return {outputs, outputs.gather(1, last).squeeze(1), {}};
}

// One LSTM direction over padded rows, step by step, the state held where a row has ended (or,
// backwards, not yet begun).
DirectionOutput lstm_direction(const torch::Tensor& x, const torch::Tensor& inside, const torch::Tensor* weights,
                               bool reverse) {
  const int64_t batch = x.size(0), steps = x.size(1), hidden = weights[1].size(1);
  torch::Tensor h = torch::zeros({batch, hidden}, x.options());
  torch::Tensor c = torch::zeros({batch, hidden}, x.options());
  std::vector<torch::Tensor> outputs(static_cast<std::size_t>(steps));
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t t = reverse ? steps - 1 - k : k;
    auto [h_next, c_next] = torch::lstm_cell(x.select(1, t), {h, c}, weights[0], weights[1], weights[2], weights[3]);
    const torch::Tensor in_row = inside.select(1, t);  // [B, 1]
    h = torch::where(in_row, h_next, h);
    c = torch::where(in_row, c_next, c);
    outputs[static_cast<std::size_t>(t)] = h_next;
  }
  return {torch::stack(outputs, 1), h, c};
}

}  // namespace

std::pair<torch::Tensor, RecurrentState> RecurrentLayers::sequence_padded(const torch::Tensor& x,
                                                                         const torch::Tensor& lengths,
                                                                         bool training) const {
  const bool lstm_cells = kind == CellKind::kLstm;
  const int64_t directions = (lstm_cells ? lstm->options.bidirectional() : gru->options.bidirectional()) ? 2 : 1;
  const std::vector<torch::Tensor> weights = all_weights();
  if (x.is_cuda() && !lstm_cells) give_each_direction_its_storage(weights);
  const torch::Tensor row_lengths = lengths.to(x.device(), torch::kLong);
  const torch::Tensor inside =  // [B, S, 1]: the step is inside its row
      (torch::arange(x.size(1), row_lengths.options()).unsqueeze(0) < row_lengths.unsqueeze(1)).unsqueeze(-1);
  std::vector<torch::Tensor> hidden, cell;
  torch::Tensor input = x;
  for (int64_t l = 0; l < layers(); ++l) {
    std::vector<torch::Tensor> outputs;
    for (int64_t d = 0; d < directions; ++d) {
      const torch::Tensor* w = &weights[static_cast<std::size_t>(4 * (l * directions + d))];
      const DirectionOutput out = lstm_cells ? lstm_direction(input, inside, w, d == 1)
                                             : gru_direction(input, row_lengths, w, d == 1, training);
      outputs.push_back(out.outputs);
      hidden.push_back(out.hidden);
      if (lstm_cells) cell.push_back(out.cell);
    }
    const torch::Tensor joined = directions == 1 ? outputs[0] : torch::cat(outputs, 2);
    input = joined * inside.to(joined.scalar_type());
    if (l + 1 < layers()) input = maybe_dropout(input, dropout, training);
  }
  return {input, {torch::stack(hidden), lstm_cells ? torch::stack(cell) : torch::Tensor()}};
}

RecurrentLayers register_recurrent(torch::nn::Module& owner, const RecurrentOptions& o) {
  RecurrentLayers layers;
  layers.kind = o.cell();
  layers.dropout = o.layers() > 1 ? o.dropout() : 0.0;
  if (o.cell() == CellKind::kLstm) {
    layers.lstm = owner.register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(o.input_size(), o.hidden_size())
                                                                    .num_layers(o.layers())
                                                                    .dropout(layers.dropout)
                                                                    .bidirectional(o.bidirectional())
                                                                    .batch_first(true)));
  } else {
    layers.gru = owner.register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(o.input_size(), o.hidden_size())
                                                                 .num_layers(o.layers())
                                                                 .dropout(layers.dropout)
                                                                 .bidirectional(o.bidirectional())
                                                                 .batch_first(true)));
  }
  return layers;
}

}  // namespace luong::models
