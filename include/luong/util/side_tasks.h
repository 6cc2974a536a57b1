#pragma once
// Overlapping a backward pass's independent work. At small sizes a recurrence's backward loop gains
// little from a second thread (its per-step products are too small to split), while the output
// layer's weight gradient, a large product that nothing in the backward pass waits for, runs at full
// rate on one. run_with_side_tasks runs the backward pass on the calling thread and lends the other
// intra-op threads to the work it hands out: run_tasks's independent pieces first, deferred work
// behind them. The calling thread takes deferred work too once the backward pass is done.
#include <cstdint>
#include <functional>

namespace luong {

/// Runs `main` on the calling thread while the other threads of an OpenMP team of `threads` (at
/// least 2) take the tasks that `main`, and what it calls, hand out with run_tasks and defer_tasks.
/// Returns when `main` and every task have run, after running the deferred tasks' `then`s on the
/// calling thread in the order they were deferred. An exception from `main` or a task is rethrown
/// here once the team has stopped (a failed task's `then` and those after it do not run).
void run_with_side_tasks(int threads, const std::function<void()>& main);

/// Whether the calling thread is run_with_side_tasks's main: run_tasks and defer_tasks hand work to
/// the side threads. LibTorch's own at::parallel_for runs inline here (an OpenMP region is open).
bool side_tasks_active();

/// Threads that run_tasks may spread tasks over: the team's inside run_with_side_tasks's main,
/// LibTorch's intra-op threads outside any parallel region, else 1.
int task_threads();

/// Runs body(0), ..., body(count - 1), each exactly once, and returns when all have run; the first
/// exception is rethrown then. Inside run_with_side_tasks's main, body(0) runs here and the rest go
/// to the side threads ahead of deferred work (this thread runs any not yet started when it gets to
/// them); elsewhere at::parallel_for spreads them over the intra-op threads (grain 1), copying the
/// caller's grad mode into LibTorch's worker threads.
void run_tasks(int64_t count, const std::function<void(int64_t)>& body);

/// Inside run_with_side_tasks's main: queues body(0), ..., body(count - 1) behind everything handed
/// out so far, to run on whichever thread is free before run_with_side_tasks returns, and `then`
/// after all of them, on run_with_side_tasks's thread. Returns false and runs nothing elsewhere.
bool defer_tasks(int64_t count, std::function<void(int64_t)> body, std::function<void()> then);

}  // namespace luong
