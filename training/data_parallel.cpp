#include "luong/training/data_parallel.h"

#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifndef LUONG_WITHOUT_GLOO
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO  // Debian's and the official LibTorch builds both ship ProcessGroupGloo
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>

#include "luong/training/cuda_module.h"
#include "luong/util/error.h"

namespace luong::training {
namespace {

using Collectives = c10d::Backend;

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string error_text(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return first_line(c10_error->what_without_backtrace());
  return first_line(e.what());
}

int int_from_environment(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < 0 || parsed > 1 << 20) {
    throw Error(std::string("environment variable ") + name + "='" + value + "' is not a non-negative integer");
  }
  return static_cast<int>(parsed);
}

#ifndef LUONG_WITHOUT_GLOO
bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

// The address this machine uses to reach `host`: what Gloo should listen on so the others can
// connect back (a UDP connect() sends nothing; it only picks the route).
std::string local_address_towards(const std::string& host, int port) {
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &remote.sin_addr) != 1) return host;  // a name: let Gloo resolve it
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  std::string address = host;
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof remote) == 0) {
    sockaddr_in local{};
    socklen_t length = sizeof local;
    char text[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
        inet_ntop(AF_INET, &local.sin_addr, text, sizeof text) != nullptr) {
      address = text;
    }
  }
  if (fd >= 0) ::close(fd);
  return address;
}

#endif

std::vector<std::uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }
std::string text_of(const std::vector<std::uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

}  // namespace

struct DataParallel::Backend {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<Collectives> group;
};

DistributedOptions DistributedOptions::from_environment() {
  DistributedOptions options;
  options.world_size = int_from_environment("WORLD_SIZE", options.world_size);
  options.rank = int_from_environment("RANK", options.rank);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') options.master_addr = addr;
  options.master_port = int_from_environment("MASTER_PORT", options.master_port);
  options.local_rank = int_from_environment("LOCAL_RANK", options.local_rank);
  options.local_world_size = int_from_environment("LOCAL_WORLD_SIZE", options.local_world_size);
  return options;
}

void DistributedOptions::validate() const {
  options::check_ranges(*this, [](const options::Info& info) { return std::string("--") + info.flag; });
  if (rank >= world_size) {
    throw Error("--rank " + std::to_string(rank) + " is outside the world of " + std::to_string(world_size) +
                " ranks (0.." + std::to_string(world_size - 1) + ")");
  }
  if (master_addr.empty()) throw Error("--master-addr is empty");
  if (local_world_size < 1) throw Error("LOCAL_WORLD_SIZE must be at least 1");
}

Watchdog::Scope DataParallel::deadline(const std::string& during, std::chrono::seconds slack) {
  const std::chrono::seconds limit = options_.timeout() + slack;
  return Watchdog::Scope(watchdog_, limit,
                         during + " did not finish within " + std::to_string(limit.count()) + " s (--dist-timeout " +
                             std::to_string(options_.dist_timeout) +
                             " and its retries): another rank has probably exited or stalled, or the port is not a "
                             "luong rank 0's");
}

std::string DataParallel::describe_failure(const std::string& during, const std::string& what) const {
  return me() + ": " + during + " failed (" + what + "); another rank has probably exited or stalled";
}

DataParallel::DataParallel(const DistributedOptions& options, const torch::Device& device)
    : options_(options),
      device_(device),
      c10_log_level_(FLAGS_caffe2_log_level),
      watchdog_("luong train: rank " + std::to_string(options.rank) + " of " + std::to_string(options.world_size) + ": "),
      backend_(std::make_unique<Backend>()) {
  options_.validate();
  // c10d logs every retry and timeout with its stack (tens of lines); the one line below says what
  // went wrong. Only its fatal messages stay.
  FLAGS_caffe2_log_level = 3;
  // Gloo and the store write to their peers' sockets without MSG_NOSIGNAL in places (Python, whose
  // ranks they were written for, ignores SIGPIPE), so a write to a rank that has just died would
  // kill this one with SIGPIPE (exit 141) instead of failing with EPIPE into a one-line error.
  ::signal(SIGPIPE, SIG_IGN);
  connect_store();
  rendezvous();
  connect_group();
}

std::string DataParallel::endpoint() const { return options_.master_addr + ":" + std::to_string(options_.master_port); }

std::string DataParallel::me() const {
  return "rank " + std::to_string(options_.rank) + " of " + std::to_string(options_.world_size);
}

void DataParallel::connect_store() {
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(options_.master_port);
  store_options.isServer = options_.rank == 0;
  store_options.numWorkers = static_cast<std::size_t>(options_.world_size);
  store_options.waitWorkers = false;  // the rendezvous waits, with a clearer error
  store_options.timeout = options_.timeout();
  try {
    // The client retries a refused connection until its timeout, then once more after a pause.
    const auto bounded = deadline("reaching rank 0 at " + endpoint(), options_.timeout() + std::chrono::seconds(5));
    backend_->store = c10::make_intrusive<c10d::TCPStore>(options_.master_addr, store_options);
  } catch (const std::exception& e) {
    const std::string what = error_text(e);
    if (options_.rank == 0) {
      if (what.find("in use") != std::string::npos) {
        throw Error(me() + ": cannot listen on " + endpoint() + ": the port is in use (choose another --master-port)");
      }
      throw Error(me() + ": cannot listen on " + endpoint() + " (" + what + ")");
    }
    throw Error(me() + ": could not reach rank 0 at " + endpoint() + " within " + std::to_string(options_.dist_timeout) +
                " s (" + what + ")");
  }
}

// Every rank announces its world size; a second process with the same rank, a different world size
// or a rank that never comes are all errors rather than a hang.
void DataParallel::rendezvous() {
  c10d::Store& store = *backend_->store;
  const std::string rank_key = "luong/rank/" + std::to_string(options_.rank);
  try {
    const auto bounded = deadline("the rendezvous at " + endpoint(), std::chrono::seconds(15));
    if (store.add(rank_key + "/claimed", 1) > 1) {
      throw Error(me() + ": another process already joined " + endpoint() + " as rank " + std::to_string(options_.rank));
    }
    store.set(rank_key + "/world", bytes_of(std::to_string(options_.world_size)));
    if (options_.rank == 0) {
      check_followers_world_sizes();
    } else {
      check_main_world_size();
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(describe_failure("the rendezvous at " + endpoint(), error_text(e)));
  }
}

void DataParallel::check_followers_world_sizes() {
  c10d::Store& store = *backend_->store;
  std::vector<std::string> keys;
  for (int r = 1; r < options_.world_size; ++r) keys.push_back("luong/rank/" + std::to_string(r) + "/world");
  try {
    store.wait(keys, options_.timeout());
  } catch (const std::exception&) {
    int joined = 1;
    for (const auto& key : keys) joined += store.check({key}) ? 1 : 0;
    throw Error(me() + ": only " + std::to_string(joined) + " of " + std::to_string(options_.world_size) +
                " ranks joined " + endpoint() + " within " + std::to_string(options_.dist_timeout) +
                " s (is --world-size right on every rank?)");
  }
  for (int r = 1; r < options_.world_size; ++r) {
    const std::string theirs = text_of(store.get("luong/rank/" + std::to_string(r) + "/world"));
    if (theirs != std::to_string(options_.world_size)) {
      // Stay up until that rank has read rank 0's world size, so that it can say what is wrong.
      store.set("luong/world", bytes_of(std::to_string(options_.world_size)));
      try {
        store.wait({"luong/rank/" + std::to_string(r) + "/read"}, std::chrono::seconds(10));
      } catch (const std::exception&) {
      }
      throw Error(me() + ": rank " + std::to_string(r) + " was started with --world-size " + theirs +
                  ", rank 0 with " + std::to_string(options_.world_size));
    }
  }
  store.set("luong/world", bytes_of(std::to_string(options_.world_size)));
}

void DataParallel::check_main_world_size() {
  c10d::Store& store = *backend_->store;
  try {
    store.wait({"luong/world"}, options_.timeout());
  } catch (const std::exception&) {
    throw Error(me() + ": rank 0 did not finish the rendezvous at " + endpoint() + " within " +
                std::to_string(options_.dist_timeout) + " s (is --world-size right on every rank?)");
  }
  const std::string theirs = text_of(store.get("luong/world"));
  store.set("luong/rank/" + std::to_string(options_.rank) + "/read", bytes_of("1"));
  if (theirs != std::to_string(options_.world_size)) {
    throw Error(me() + ": rank 0 was started with --world-size " + theirs + ", this rank with " +
                std::to_string(options_.world_size));
  }
}

void DataParallel::connect_group() {
  const auto group_store = c10::make_intrusive<c10d::PrefixStore>("luong/group", backend_->store);
  const std::chrono::milliseconds timeout = options_.timeout();
  try {
    const auto bounded = deadline("connecting the process group", std::chrono::seconds(5));
    const bool nccl = options_.dist_backend == DistBackend::kNccl ||
                      (options_.dist_backend == DistBackend::kAuto && device_.is_cuda());
    if (nccl && !device_.is_cuda()) throw Error("--dist-backend nccl needs --device cuda");
    if (nccl) {
      backend_->group = cuda_module().nccl_group(group_store, options_.rank, options_.world_size, timeout);
    } else {
#ifdef LUONG_WITHOUT_GLOO
      throw Error("this build has no Gloo (its headers were missing at build time): --world-size > 1 needs it on the CPU");
#else
      auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
      if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface != nullptr && *interface != '\0') {
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
      } else {
        const std::string local = is_loopback(options_.master_addr)
                                      ? std::string("127.0.0.1")
                                      : local_address_towards(options_.master_addr, options_.master_port);
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(local));
      }
      gloo_options->threads = 1;  // one small all-reduce at a time; the cores belong to the model
      backend_->group =
          c10::make_intrusive<c10d::ProcessGroupGloo>(group_store, options_.rank, options_.world_size, gloo_options);
#endif
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(describe_failure("connecting the process group", error_text(e)));
  }
}

DataParallel::~DataParallel() {
  backend_.reset();  // the group and the store say goodbye while their logs are still quiet
  FLAGS_caffe2_log_level = c10_log_level_;
}

void DataParallel::build_buckets(const std::vector<torch::Tensor>& parameters) {
  buckets_.clear();
  Bucket current;
  std::int64_t numel = 0;
  std::size_t bytes = 0;
  const auto close = [&] {
    if (current.members.empty()) return;
    current.flat = torch::zeros({numel}, parameters[current.members.front()].options().requires_grad(false));
    buckets_.push_back(std::move(current));
    current = Bucket{};
    numel = 0;
    bytes = 0;
  };
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const std::size_t size = static_cast<std::size_t>(parameters[i].numel()) * parameters[i].element_size();
    const bool same_type = current.members.empty() || parameters[current.members.front()].dtype() == parameters[i].dtype();
    if (!current.members.empty() && (bytes + size > options_.bucket_bytes || !same_type)) close();
    current.members.push_back(i);
    numel += parameters[i].numel();
    bytes += size;
  }
  close();
}

torch::Tensor DataParallel::sum_gradients(const std::vector<torch::Tensor>& parameters, const torch::Tensor& scalars) {
  torch::NoGradGuard no_grad;
  if (buckets_.empty()) build_buckets(parameters);
  const auto start = std::chrono::steady_clock::now();
  for (Bucket& bucket : buckets_) {
    std::int64_t offset = 0;
    for (const std::size_t i : bucket.members) {
      const torch::Tensor& p = parameters[i];
      torch::Tensor slot = bucket.flat.narrow(0, offset, p.numel());
      if (p.grad().defined()) {
        slot.copy_(p.grad().reshape({-1}));
      } else {
        slot.zero_();
      }
      offset += p.numel();
    }
  }
  torch::Tensor totals = scalars.to(device_, torch::kFloat64).clone();
  std::vector<c10::intrusive_ptr<c10d::Work>> pending;
  try {
    const auto bounded = deadline("the gradient all-reduce", std::chrono::seconds(30));
    for (Bucket& bucket : buckets_) {
      std::vector<at::Tensor> tensors{bucket.flat};
      pending.push_back(backend_->group->allreduce(tensors));
    }
    std::vector<at::Tensor> tensors{totals};
    pending.push_back(backend_->group->allreduce(tensors));
    for (auto& work : pending) work->wait();
  } catch (const std::exception& e) {
    throw Error(describe_failure("the gradient all-reduce", error_text(e)));
  }
  for (Bucket& bucket : buckets_) {
    std::int64_t offset = 0;
    for (const std::size_t i : bucket.members) {
      torch::Tensor p = parameters[i];
      const torch::Tensor summed = bucket.flat.narrow(0, offset, p.numel()).view(p.sizes());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(summed);
      } else {
        p.mutable_grad() = summed.clone();
      }
      offset += p.numel();
    }
  }
  allreduce_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++allreduce_calls_;
  return totals;
}

std::vector<double> DataParallel::sum(const std::vector<double>& scalars) {
  torch::Tensor totals = torch::tensor(scalars, torch::TensorOptions().dtype(torch::kFloat64)).to(device_);
  try {
    const auto bounded = deadline("an all-reduce", std::chrono::seconds(30));
    std::vector<at::Tensor> tensors{totals};
    backend_->group->allreduce(tensors)->wait();
  } catch (const std::exception& e) {
    throw Error(describe_failure("an all-reduce", error_text(e)));
  }
  const torch::Tensor host = totals.cpu();
  return {host.data_ptr<double>(), host.data_ptr<double>() + host.numel()};
}

void DataParallel::broadcast_parameters(const std::vector<torch::Tensor>& parameters) {
  torch::NoGradGuard no_grad;
  try {
    const auto bounded = deadline("broadcasting rank 0's parameters", std::chrono::seconds(30));
    for (const torch::Tensor& p : parameters) {
      std::vector<at::Tensor> tensors{p.data()};
      c10d::BroadcastOptions broadcast_options;
      broadcast_options.rootRank = 0;
      backend_->group->broadcast(tensors, broadcast_options)->wait();
    }
  } catch (const std::exception& e) {
    throw Error(describe_failure("broadcasting rank 0's parameters", error_text(e)));
  }
}

std::string DataParallel::share(const std::string& key, const std::string& bytes) {
  const std::string full_key = "luong/shared/" + key;
  try {
    const auto bounded = deadline("receiving " + key + " from rank 0", std::chrono::seconds(5));
    if (is_main()) {
      backend_->store->set(full_key, bytes_of(bytes));
      return bytes;
    }
    backend_->store->wait({full_key}, options_.timeout());
    return text_of(backend_->store->get(full_key));
  } catch (const std::exception& e) {
    throw Error(describe_failure("receiving " + key + " from rank 0", error_text(e)));
  }
}

}  // namespace luong::training
