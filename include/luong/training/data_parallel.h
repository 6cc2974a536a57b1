#pragma once
// Data-parallel training on PyTorch's c10d: a TCPStore rendezvous, ProcessGroupGloo on the CPU
// (ProcessGroupNCCL in CUDA builds), parameters broadcast from rank 0, gradients summed in a few
// flat buckets. Every rank holds the whole corpus and takes its own rows of each global batch.
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace luong::training {

struct DistributedOptions {
  int world_size = 1;
  int rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  /// Rendezvous and collective timeout: a rank that does not answer within it is an error.
  std::chrono::seconds timeout{300};
  /// Gradients travel in flat buffers of at most this many bytes (one all-reduce each).
  std::size_t bucket_bytes = std::size_t{1} << 20;
  /// Processes on this machine (torchrun's LOCAL_WORLD_SIZE); they share its cores.
  int local_world_size = 1;
  int local_rank = 0;

  bool enabled() const { return world_size > 1; }
  /// Fills the fields from torchrun's WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT, LOCAL_RANK and
  /// LOCAL_WORLD_SIZE where they are set. Throws luong::Error on a malformed value.
  static DistributedOptions from_environment();
  /// Throws luong::Error naming the first inconsistent field.
  void validate() const;
};

/// One process of a data-parallel job. Construction is the rendezvous: it returns once every rank
/// has joined with the same world size, or throws luong::Error (timeout, port in use, mismatch).
class DataParallel {
 public:
  DataParallel(const DistributedOptions& options, const torch::Device& device);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  bool is_main() const { return options_.rank == 0; }

  /// Overwrites every rank's `parameters` with rank 0's.
  void broadcast_parameters(const std::vector<torch::Tensor>& parameters);

  /// Replaces each parameter's gradient by its sum over ranks (undefined gradients count as zero),
  /// and returns `scalars` summed over ranks, all in the same round of bucketed all-reduces.
  std::vector<double> sum_gradients(const std::vector<torch::Tensor>& parameters, const std::vector<double>& scalars);

  /// Returns `scalars` summed over ranks.
  std::vector<double> sum(const std::vector<double>& scalars);

  /// Rank 0 stores `bytes` under `key`; the other ranks wait for it. Returns the value on every rank.
  std::string share(const std::string& key, const std::string& bytes);

  /// Seconds spent in gradient all-reduces so far, and how many there were.
  double allreduce_seconds() const { return allreduce_seconds_; }
  std::int64_t allreduce_calls() const { return allreduce_calls_; }
  std::size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Bucket {
    torch::Tensor flat;
    std::vector<std::size_t> members;  // indices into the parameter list
  };
  void build_buckets(const std::vector<torch::Tensor>& parameters);
  std::string describe_failure(const std::string& during, const std::string& what) const;

  DistributedOptions options_;
  torch::Device device_;
  struct Backend;
  std::unique_ptr<Backend> backend_;
  std::vector<Bucket> buckets_;
  double allreduce_seconds_ = 0;
  std::int64_t allreduce_calls_ = 0;
};

}  // namespace luong::training
