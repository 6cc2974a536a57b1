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

#include "luong/util/options.h"
#include "luong/util/watchdog.h"

namespace luong::training {

enum class DistBackend { kAuto, kGloo, kNccl };

}  // namespace luong::training

template <>
struct luong::options::EnumNames<luong::training::DistBackend> {
  static constexpr std::pair<luong::training::DistBackend, const char*> values[] = {
      {luong::training::DistBackend::kAuto, "auto"},
      {luong::training::DistBackend::kGloo, "gloo"},
      {luong::training::DistBackend::kNccl, "nccl"}};
};

namespace luong::training {

// X(type, name, default, flag, group, help, range, on_resume): see luong/util/options.h. The
// defaults are overridden by torchrun's variables (from_environment), and the flags override those.
#define LUONG_DISTRIBUTED_OPTIONS(X)                                                                            \
  X(std::int64_t, world_size, 1, "world-size", "distributed",                                                   \
    "processes in the data-parallel job; --batch is the global batch (default: $WORLD_SIZE or 1)",               \
    ::luong::options::closed(1, 65536), kMayChange)                                                             \
  X(std::int64_t, rank, 0, "rank", "distributed",                                                               \
    "this process's rank, 0..world-size-1; rank 0 writes the run directory (default: $RANK or 0)",               \
    ::luong::options::closed(0, 65535), kMayChange)                                                             \
  X(std::string, master_addr, "127.0.0.1", "master-addr", "distributed", "address of rank 0 ($MASTER_ADDR)",     \
    ::luong::options::kAnyValue, kMayChange)                                                                    \
  X(std::int64_t, master_port, 29500, "master-port", "distributed", "port rank 0 listens on ($MASTER_PORT)",     \
    ::luong::options::closed(1, 65535), kMayChange)                                                             \
  X(std::int64_t, dist_timeout, 300, "dist-timeout", "distributed",                                             \
    "seconds to wait for the other ranks before giving up", ::luong::options::closed(1, 86400), kMayChange)       \
  X(::luong::training::DistBackend, dist_backend, ::luong::training::DistBackend::kAuto, "dist-backend",          \
    "distributed", "collectives: auto (NCCL for CUDA tensors, Gloo on the CPU), gloo (also for CUDA tensors, e.g. " \
    "several ranks on one GPU) or nccl", ::luong::options::kAnyValue, kMayChange)

struct DistributedOptions {
  LUONG_OPTIONS_STRUCT_BODY(LUONG_DISTRIBUTED_OPTIONS)
  /// Gradients travel in flat buffers of at most this many bytes (one all-reduce each).
  std::size_t bucket_bytes = std::size_t{1} << 20;
  /// Processes on this machine (torchrun's LOCAL_WORLD_SIZE); they share its cores.
  int local_world_size = 1;
  int local_rank = 0;
  /// The training options a rank's command line gave (config.json keys): a rank other than 0 that
  /// gave one with another value than rank 0's is refused.
  std::vector<std::string> given_options;

  /// A data-parallel job: more than one rank (a single rank runs without collectives).
  bool enabled() const { return world_size > 1; }
  std::chrono::seconds timeout() const { return std::chrono::seconds(dist_timeout); }
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
  /// "rank R of N", as this rank's messages begin.
  std::string me() const;

  /// Overwrites every rank's `parameters` with rank 0's.
  void broadcast_parameters(const std::vector<torch::Tensor>& parameters);

  /// Replaces each parameter's gradient by its sum over ranks (undefined gradients count as zero),
  /// and returns `scalars` [k] summed over ranks, on the device and in float64, all in the same round
  /// of bucketed all-reduces (nothing waits for the device).
  torch::Tensor sum_gradients(const std::vector<torch::Tensor>& parameters, const torch::Tensor& scalars);

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
  void connect_store();
  void rendezvous();
  void check_followers_world_sizes();
  void check_main_world_size();
  void connect_group();
  std::string endpoint() const;  ///< rank 0's address:port
  void build_buckets(const std::vector<torch::Tensor>& parameters);
  std::string describe_failure(const std::string& during, const std::string& what) const;

  /// Bounds a call into c10d by --dist-timeout and `slack` (they have timeouts of their own, which
  /// some faults outlast: a store server that accepted and stalls).
  Watchdog::Scope deadline(const std::string& during, std::chrono::seconds slack);

  DistributedOptions options_;
  torch::Device device_;
  int c10_log_level_;  ///< restored when the job ends
  Watchdog watchdog_;
  struct Backend;
  std::unique_ptr<Backend> backend_;
  std::vector<Bucket> buckets_;
  double allreduce_seconds_ = 0;
  std::int64_t allreduce_calls_ = 0;
};

}  // namespace luong::training
