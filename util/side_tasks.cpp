#include "luong/util/side_tasks.h"

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <c10/core/GradMode.h>
#include <omp.h>

#include <atomic>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "luong/util/spin_wait.h"
#include "luong/util/path_counts.h"

namespace luong {

namespace {

enum TaskState : int { kQueued, kTaken, kDone };

struct Task {
  std::function<void()> work;
  std::atomic<int> state{kQueued};
  std::exception_ptr error;
};
using TaskList = std::vector<std::shared_ptr<Task>>;

struct Deferred {
  TaskList tasks;
  std::function<void()> then;
};

// One run_with_side_tasks: the queue its threads take from, and the deferred groups in order.
struct Team {
  int threads = 1;
  std::mutex mutex;
  std::deque<std::shared_ptr<Task>> queue;  // tasks the calling thread took itself stay until popped
  std::atomic<int64_t> queued{0};           // queue's size, read without the lock
  std::atomic<int64_t> unfinished{0};       // handed out and not done
  std::atomic<bool> stop{false};
  std::vector<Deferred> deferred;  // touched by the main thread only
};

thread_local Team* current_team = nullptr;  // set on run_with_side_tasks's thread only

bool claim(Task& task) {
  int expected = kQueued;
  return task.state.compare_exchange_strong(expected, kTaken, std::memory_order_acq_rel);
}

void execute(Team& team, Task& task) {
  try {
    task.work();
  } catch (...) {
    task.error = std::current_exception();
  }
  task.state.store(kDone, std::memory_order_release);
  team.unfinished.fetch_sub(1, std::memory_order_acq_rel);
}

// The first queued task nobody has taken, claimed; null when there is none.
std::shared_ptr<Task> take(Team& team) {
  if (team.queued.load(std::memory_order_acquire) == 0) return nullptr;
  const std::lock_guard<std::mutex> lock(team.mutex);
  while (!team.queue.empty()) {
    std::shared_ptr<Task> task = std::move(team.queue.front());
    team.queue.pop_front();
    team.queued.fetch_sub(1, std::memory_order_acq_rel);
    if (claim(*task)) return task;
  }
  return nullptr;
}

// Tasks running `body(i)` under the caller's thread-local state (grad mode, the profiler's), which
// an OpenMP worker thread does not otherwise share.
TaskList make_tasks(int64_t first, int64_t count, std::function<void(int64_t)> body) {
  auto shared_body = std::make_shared<std::function<void(int64_t)>>(std::move(body));
  const at::ThreadLocalState state;
  TaskList tasks;
  for (int64_t i = first; i < count; ++i) {
    auto task = std::make_shared<Task>();
    task->work = [shared_body, state, i] {
      const at::ThreadLocalStateGuard guard(state);
      (*shared_body)(i);
    };
    tasks.push_back(std::move(task));
  }
  return tasks;
}

void enqueue(Team& team, const TaskList& tasks, bool ahead) {
  if (tasks.empty()) return;
  team.unfinished.fetch_add(static_cast<int64_t>(tasks.size()), std::memory_order_acq_rel);
  const std::lock_guard<std::mutex> lock(team.mutex);
  if (ahead) {
    team.queue.insert(team.queue.begin(), tasks.begin(), tasks.end());
  } else {
    team.queue.insert(team.queue.end(), tasks.begin(), tasks.end());
  }
  team.queued.fetch_add(static_cast<int64_t>(tasks.size()), std::memory_order_acq_rel);
}

void serve(Team& team) {
  for (SpinWait wait;; wait()) {
    if (const std::shared_ptr<Task> task = take(team)) {
      execute(team, *task);
      path_counts::add(path_counts::Path::kSideTasks);
      wait.reset();
      continue;
    }
    if (team.stop.load(std::memory_order_acquire)) return;
  }
}

void rethrow_first(const TaskList& tasks) {
  for (const std::shared_ptr<Task>& task : tasks) {
    if (task->error) std::rethrow_exception(task->error);
  }
}

}  // namespace

void run_with_side_tasks(int threads, const std::function<void()>& main) {
  if (threads < 2 || at::in_parallel_region()) {  // (inside main too: its region is open)
    main();
    return;
  }
  Team team;
  std::exception_ptr main_error;
#pragma omp parallel num_threads(threads)
  {
    if (omp_get_thread_num() == 0) {
      team.threads = omp_get_num_threads();
      current_team = &team;
      try {
        main();
      } catch (...) {
        main_error = std::current_exception();
      }
      current_team = nullptr;
      while (const std::shared_ptr<Task> task = take(team)) execute(team, *task);
      for (SpinWait wait; team.unfinished.load(std::memory_order_acquire) > 0;) wait();
      team.stop.store(true, std::memory_order_release);
    } else {
      serve(team);
    }
  }
  if (main_error) std::rethrow_exception(main_error);
  for (const Deferred& group : team.deferred) {
    rethrow_first(group.tasks);
    if (group.then) group.then();
  }
}

bool side_tasks_active() { return current_team != nullptr; }

int task_threads() {
  if (current_team != nullptr) return current_team->threads;
  return at::in_parallel_region() ? 1 : at::get_num_threads();
}

void run_tasks(int64_t count, const std::function<void(int64_t)>& body) {
  if (count <= 0) return;
  Team* team = current_team;
  if (team == nullptr) {
    const bool grad_mode = c10::GradMode::is_enabled();
    at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
      const c10::AutoGradMode same_grad_mode(grad_mode);
      for (int64_t i = begin; i < end; ++i) body(i);
    });
    return;
  }
  // (body outlives the tasks: this returns only when every one is done)
  const TaskList tasks = make_tasks(1, count, [&body](int64_t i) { body(i); });
  enqueue(*team, tasks, /*ahead=*/true);
  std::exception_ptr first_error;
  try {
    body(0);
  } catch (...) {
    first_error = std::current_exception();
  }
  for (const std::shared_ptr<Task>& task : tasks) {
    if (claim(*task)) {
      execute(*team, *task);
    } else {
      for (SpinWait wait; task->state.load(std::memory_order_acquire) != kDone;) wait();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
  rethrow_first(tasks);
}

bool defer_tasks(int64_t count, std::function<void(int64_t)> body, std::function<void()> then) {
  Team* team = current_team;
  if (team == nullptr) return false;
  Deferred group{make_tasks(0, count, std::move(body)), std::move(then)};
  enqueue(*team, group.tasks, /*ahead=*/false);
  team->deferred.push_back(std::move(group));
  return true;
}


}  // namespace luong
