#include "luong/models/recurrent.h"

namespace luong::models {

RecurrentState RecurrentState::index_select(const torch::Tensor& rows) const {
  return {hidden.index_select(1, rows), cell.defined() ? cell.index_select(1, rows) : cell};
}

torch::Tensor maybe_dropout(const torch::Tensor& x, double p, bool training) {
  return p > 0 && training ? torch::dropout(x, p, true) : x;
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
