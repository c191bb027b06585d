// Actors for the end-to-end actor tests: built into airt_task_functions, which the test drivers
// link and airt-worker loads from its code search path.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

// Keeps a running sum; its methods read and change it.
class Counter {
 public:
  explicit Counter(int start) : value_(start) {}
  static Counter* Create(int start);
  // Throws std::invalid_argument when start < 0, so the actor never comes up.
  static Counter* CreateChecked(int start);

  int Add(int k);
  int Value() const;
  // Records `k` in the order calls arrive; returns all recorded so far.
  std::vector<int> Append(int k);
  int Pid();
  // The pid of the worker's parent: the airt-node that started it.
  int NodePid();
  // The first call (no file at `marker` yet) creates the file and kills this process at once
  // (_exit, as a crash); later calls return the value.
  int ExitOnce(std::string marker);
  int Throw(std::string message);
  // Waits until `n` calls of Meet are inside at once (true) or 5 s pass (false).
  bool Meet(int n);
  // Keeps the actor busy for `ms` milliseconds; returns `ms`.
  int SleepMs(int ms);

 private:
  int value_;
  std::vector<int> seen_;
  std::mutex mu_;
  std::condition_variable cv_;
  int inside_ = 0;
};

namespace airt {
template <typename T>
class ActorHandle;
}

// Calls Add(k) on the actor behind `counter` from inside a task (a handle passed to a task).
int AddThroughHandle(airt::ActorHandle<Counter> counter, int k);
// Creates a Counter inside a task and returns its handle (owned by that task's worker).
airt::ActorHandle<Counter> MakeCounter(int start);
// Submits n tasks Add(i, i) from inside a task and returns the sum of their results: blocks in
// Get while they run.
int SumOfSubtasks(int n);
