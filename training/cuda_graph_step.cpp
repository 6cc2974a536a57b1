// CUDA graphs of whole training steps, in luong's CUDA module (cuda_module.h).
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/ops/_foreach_zero.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <map>

#include "luong/data_pipeline/batching.h"
#include "luong/training/cuda_module.h"
#include "luong/training/train_step.h"
#include "luong/util/error.h"

namespace luong::training {

namespace {

std::atomic<std::int64_t> g_eager{0}, g_captured{0}, g_replayed{0};

// Steps run eagerly before the first capture: cuBLAS, cuDNN and the autograd engine initialise
// themselves lazily, and neither a handle's creation nor its first synchronisation may be captured.
constexpr std::int64_t kEagerSteps = 3;

std::int64_t round_up(std::int64_t n, std::int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// A batch's tensors padded to the graph's shape, in pinned memory (so that copies do not wait).
struct PaddedBatch {
  torch::Tensor src, src_lengths, dec_in, dec_tgt;
  std::array<std::int64_t, 3> shape;  // B, S, T
};

PaddedBatch pad_batch(const std::vector<const data::EncodedPair*>& rows, std::int64_t padding) {
  const data::Batch batch = data::make_batch(rows);
  const std::int64_t source = round_up(batch.src.size(1), padding), target = round_up(batch.dec_in.size(1), padding);
  const auto pad = [](const torch::Tensor& t, std::int64_t length) {
    return torch::constant_pad_nd(t, {0, length - t.size(1)}, 0).pin_memory();
  };
  return {pad(batch.src, source), batch.src_lengths.pin_memory(), pad(batch.dec_in, target), pad(batch.dec_tgt, target),
          {batch.src.size(0), source, target}};
}

// The steps themselves, on the stream `stream`.
struct GraphSteps {
  GraphSteps(models::Seq2SeqImpl& model_, FusedAdam& optimizer_, const run::TrainConfig& options_,
             const torch::Device& device_)
      : model(model_),
        optimizer(optimizer_),
        options(options_),
        device(device_),
        stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index())),
        parameters(model_.parameters()) {}

  models::Seq2SeqImpl& model;
  FusedAdam& optimizer;
  run::TrainConfig options;
  torch::Device device;
  c10::cuda::CUDAStream stream;  ///< every step's work: a capture needs a stream other than the default
  std::vector<torch::Tensor> parameters;
  std::vector<torch::Tensor> gradients;  ///< what every step accumulates into, from the first step on
  std::int64_t eager_steps = 0;

  struct Graph {
    at::cuda::CUDAGraph graph;
    torch::Tensor src, src_lengths, dec_in, dec_tgt;  ///< a batch is copied in before each replay
    torch::Tensor loss;                               ///< float64 scalar, written by the replay
  };
  std::map<std::array<std::int64_t, 3>, std::unique_ptr<Graph>> graphs;
  bool capture_failed = false;
  std::vector<const void*> parameter_data;  ///< where the parameters were at the last step

  std::vector<const void*> data_pointers() const {
    std::vector<const void*> out;
    for (const torch::Tensor& p : parameters) out.push_back(p.data_ptr());
    return out;
  }

  // Forward, backward, clipping and Adam's device half, as a capture records them: the gradients
  // are zeroed in place (every graph shares them), the loss left in `loss_out`. The very first
  // step creates the gradients instead, and runs Adam's host half once they exist.
  void device_step(const torch::Tensor& src, const torch::Tensor& src_lengths, const torch::Tensor& dec_in,
                   const torch::Tensor& dec_tgt, torch::Tensor& loss_out) {
    const bool first = gradients.empty();
    if (first) {
      optimizer.zero_grad();
    } else {
      torch::_foreach_zero_(gradients);
    }
    const models::LossOutput loss = [&] {
      const models::PrecisionGuard precision(device, options.precision);
      return model.padded_loss(src, src_lengths, dec_in, dec_tgt, {options.loss_average, options.label_smoothing});
    }();
    loss.loss.backward();
    if (first) {
      for (const torch::Tensor& p : parameters) {
        if (p.grad().defined()) gradients.push_back(p.grad());
      }
      optimizer.prepare_device_step();
    }
    const torch::Tensor coefficient =
        options.clip > 0 ? gradient_clip(parameters, options.clip).coefficient : torch::Tensor();
    optimizer.launch_device_step(coefficient);
    loss_out.copy_(loss.loss.detach());
  }

  // A step outside any graph, on the same padded tensors.
  torch::Tensor eager(const PaddedBatch& batch) {
    const auto on_device = [&](const torch::Tensor& t) { return t.to(device, /*non_blocking=*/true); };
    torch::Tensor loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
    if (!gradients.empty()) optimizer.prepare_device_step();  // else device_step runs it
    device_step(on_device(batch.src), on_device(batch.src_lengths), on_device(batch.dec_in), on_device(batch.dec_tgt),
                loss);
    check_gradients_kept();
    ++g_eager;
    return loss;
  }

  // A graph's every launch reads and writes the gradient tensors it was captured with.
  void check_gradients_kept() const {
    std::size_t k = 0;
    for (const torch::Tensor& p : parameters) {
      if (!p.grad().defined()) continue;
      if (k >= gradients.size() || !p.grad().is_same(gradients[k])) {
        throw Error("CUDA graphs: a gradient tensor was replaced during a step (use --no-cuda-graphs)");
      }
      ++k;
    }
  }

  std::unique_ptr<Graph> capture(const PaddedBatch& batch) {
    auto g = std::make_unique<Graph>();
    const auto input = [&](const torch::Tensor& host) {
      return torch::empty(host.sizes(), torch::TensorOptions().dtype(host.scalar_type()).device(device));
    };
    g->src = input(batch.src);
    g->src_lengths = input(batch.src_lengths);
    g->dec_in = input(batch.dec_in);
    g->dec_tgt = input(batch.dec_tgt);
    g->loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
    copy_in(*g, batch);
    optimizer.prepare_device_step();
    stream.synchronize();  // once per shape: nothing of earlier steps may be pending in the capture
    g->graph.capture_begin();
    try {
      device_step(g->src, g->src_lengths, g->dec_in, g->dec_tgt, g->loss);
    } catch (...) {
      try {
        g->graph.capture_end();
      } catch (...) {  // the capture was invalidated by whatever threw; its own error says less
      }
      throw;
    }
    g->graph.capture_end();
    check_gradients_kept();
    ++g_captured;
    return g;
  }

  void copy_in(Graph& g, const PaddedBatch& batch) const {
    g.src.copy_(batch.src, /*non_blocking=*/true);
    g.src_lengths.copy_(batch.src_lengths, /*non_blocking=*/true);
    g.dec_in.copy_(batch.dec_in, /*non_blocking=*/true);
    g.dec_tgt.copy_(batch.dec_tgt, /*non_blocking=*/true);
  }

  torch::Tensor run(const std::vector<const data::EncodedPair*>& rows) {
    const PaddedBatch batch = pad_batch(rows, options.cuda_graph_padding);
    if (data_pointers() != parameter_data) {
      // A parameter's storage moved (the GPU's recurrence gives each direction its own, at its
      // first step; a module's to() flattens them again): graphs hold the old addresses.
      graphs.clear();
      eager_steps = 0;
    }
    if (eager_steps < kEagerSteps || capture_failed) {
      ++eager_steps;
      torch::Tensor loss = eager(batch);
      parameter_data = data_pointers();
      return loss;
    }
    auto found = graphs.find(batch.shape);
    if (found == graphs.end()) {
      try {
        found = graphs.emplace(batch.shape, capture(batch)).first;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "luong: warning: CUDA graph capture failed, training goes on without graphs: %s\n",
                     first_line(e.what()).c_str());
        capture_failed = true;
        optimizer.cancel_device_step();  // the capture's step never ran
        return eager(batch);
      }
    } else {
      copy_in(*found->second, batch);
      optimizer.prepare_device_step();
    }
    found->second->graph.replay();
    ++g_replayed;
    return found->second->loss.clone();
  }

  static std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }
};

// The steps on their own stream, which waits for the caller's before each step, and the caller's
// for it after.
class StreamedGraphSteps final : public CudaGraphSteps {
 public:
  StreamedGraphSteps(models::Seq2SeqImpl& model, FusedAdam& optimizer, const run::TrainConfig& options,
                     const torch::Device& device)
      : steps_(model, optimizer, options, device) {}

  torch::Tensor run(const std::vector<const data::EncodedPair*>& rows) override {
    const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(steps_.device.index());
    at::cuda::CUDAEvent ready;
    ready.record(caller);
    ready.block(steps_.stream);
    torch::Tensor loss;
    {
      const c10::cuda::CUDAStreamGuard guard(steps_.stream);
      loss = steps_.run(rows);
    }
    at::cuda::CUDAEvent done;
    done.record(steps_.stream);
    done.block(caller);
    return loss;
  }

 private:
  GraphSteps steps_;
};

}  // namespace

std::unique_ptr<CudaGraphSteps> make_cuda_graph_steps(models::Seq2SeqImpl& model, FusedAdam& optimizer,
                                                      const run::TrainConfig& options,
                                                      const torch::Device& device) {
  return std::make_unique<StreamedGraphSteps>(model, optimizer, options, device);
}

CudaGraphCounts count_cuda_graph_steps() { return {g_eager.load(), g_captured.load(), g_replayed.load()}; }

}  // namespace luong::training
