#pragma once
// PyTorch state_dict files: written in torch.save's zip format (Python's torch.load reads them) and
// read from files written by Python's torch.save(model.state_dict()) or by luong itself.
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace luong::models {

/// Name -> tensor in module order, names dotted as in Python (`decoder.gru.weight_ih_l0`).
using StateDict = std::vector<std::pair<std::string, torch::Tensor>>;

/// The module's parameters and buffers, on the CPU.
StateDict state_dict(const torch::nn::Module& module);

/// Receives a file's bytes piece by piece, in order.
using ByteSink = std::function<void(const char* data, std::size_t size)>;
/// torch.save-compatible bytes of `dict` (a plain dict of CPU tensors), handed to `sink` as they are
/// made, each tensor's data straight from its memory: nothing the size of the file is held (a buffer
/// of fresh pages the size of the checkpoint at every save, otherwise).
void serialize_state_dict(const StateDict& dict, const ByteSink& sink);
/// Writes `dict` atomically (temporary file + rename).
void save_state_dict(const StateDict& dict, const std::string& path);

/// Parses torch.save zip bytes holding a dict / OrderedDict of tensors (including the
/// `_metadata` attribute Python attaches). Throws luong::CheckpointError naming `origin` when the
/// data is truncated, corrupt or holds something else.
/// Every tensor's view is checked against its storage before anything is allocated, the pickle's
/// nesting and size are bounded, and an archive of another byte order is refused.
StateDict parse_state_dict(const std::vector<char>& bytes, const std::string& origin);
/// A state_dict file of at most `max_bytes` (state_dict_size_limit for a model's).
StateDict read_state_dict(const std::string& path, std::uint64_t max_bytes);
/// A checkpoint file's bytes (read_whole_file, at most `max_bytes`): nullopt where it does not exist,
/// CheckpointError (the path and the reason) where it is not a regular file, is larger, or reading fails.
std::optional<std::vector<char>> read_checkpoint_file(const std::string& path, std::uint64_t max_bytes);
/// The most bytes a state_dict of `module` can take: its parameters and buffers as float64, with
/// room for each one's record.
std::uint64_t state_dict_size_limit(const torch::nn::Module& module);
std::uint64_t state_dict_size_limit(const StateDict& dict);

/// Copies `dict` into `module`. Strict: missing, unexpected and mis-shaped keys, integer or boolean
/// tensors for floating-point parameters and tensors holding NaN or Inf are all listed in one
/// luong::CheckpointError, and nothing is modified unless every key matches.
void load_state_dict(torch::nn::Module& module, const StateDict& dict, const std::string& origin);

}  // namespace luong::models
