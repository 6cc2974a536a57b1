#include "luong/models/gather_rows.h"

#include <cstring>

namespace luong::models {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct GatherRowsFunction : torch::autograd::Function<GatherRowsFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& table, const torch::Tensor& rows_in,
                               int64_t skip) {
    RECORD_FUNCTION("luong::GatherRowsFunction::forward", std::vector<c10::IValue>());
    const torch::Tensor rows = rows_in.contiguous();
    const int64_t count = rows.size(0), width = table.size(1), height = table.size(0);
    const int64_t* index = rows.data_ptr<int64_t>();
    for (int64_t i = 0; i < count; ++i) {
      TORCH_CHECK(index[i] >= 0 && index[i] < height, "gather_rows: row ", index[i], " outside [0, ", height, ")");
    }
    const torch::Tensor source = table.detach().contiguous();
    torch::Tensor out = torch::empty({count, width}, table.options());
    const auto bytes = static_cast<std::size_t>(width) * table.element_size();
    const auto* from = static_cast<const char*>(source.data_ptr());
    auto* to = static_cast<char*>(out.data_ptr());
    for (int64_t i = 0; i < count; ++i) std::memcpy(to + i * bytes, from + index[i] * bytes, bytes);
    ctx->save_for_backward({rows});
    ctx->saved_data["height"] = height;
    ctx->saved_data["skip"] = skip;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    RECORD_FUNCTION("luong::GatherRowsFunction::backward", std::vector<c10::IValue>());
    const torch::Tensor rows = ctx->get_saved_variables()[0];
    const int64_t height = ctx->saved_data["height"].toInt(), skip = ctx->saved_data["skip"].toInt();
    const torch::Tensor grad = grad_outputs[0].contiguous();
    const int64_t count = rows.size(0), width = grad.size(1);
    torch::Tensor grad_table = torch::zeros({height, width}, grad.options());
    const int64_t* index = rows.data_ptr<int64_t>();
    AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "gather_rows_backward", [&] {
      const scalar_t* g = grad.data_ptr<scalar_t>();
      scalar_t* out = grad_table.data_ptr<scalar_t>();
      for (int64_t i = 0; i < count; ++i) {
        if (index[i] == skip) continue;
        scalar_t* row = out + index[i] * width;
        const scalar_t* add = g + i * width;
        for (int64_t d = 0; d < width; ++d) row[d] += add[d];
      }
    });
    return {grad_table, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor gather_rows(const torch::Tensor& table, const torch::Tensor& rows, std::optional<int64_t> skip) {
  const bool fast = table.device().is_cpu() && table.dim() == 2 && table.layout() == torch::kStrided &&
                    (table.scalar_type() == torch::kFloat || table.scalar_type() == torch::kDouble) &&
                    rows.dim() == 1 && rows.scalar_type() == torch::kLong;
  if (fast) return GatherRowsFunction::apply(table, rows, skip.value_or(-1));
  if (!skip) return table.index_select(0, rows);
  // LibTorch's CUDA embedding backward sorts the rows past 3,072 of them and reads a count back to
  // the host: a wait at every step, and an error inside a CUDA graph. index_select's backward is
  // index_add_, which reads nothing back; the mask keeps the skipped row's gradient zero. Only the
  // embedding is deterministic.
  if (!table.is_cuda() || at::globalContext().deterministicAlgorithms()) return torch::embedding(table, rows, *skip);
  return table.index_select(0, rows) * rows.ne(*skip).unsqueeze(-1).to(table.scalar_type());
}

}  // namespace luong::models
