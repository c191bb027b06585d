#include "tests/e2e/actor_functions.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "airt/api.h"

Counter* Counter::Create(int start) { return new Counter(start); }

Counter* Counter::CreateChecked(int start) {
  if (start < 0) throw std::invalid_argument("start must be >= 0, got " + std::to_string(start));
  return new Counter(start);
}

int Counter::Add(int k) { return value_ += k; }

int Counter::Value() const { return value_; }

std::vector<int> Counter::Append(int k) {
  seen_.push_back(k);
  return seen_;
}

int Counter::Pid() { return static_cast<int>(::getpid()); }

int Counter::NodePid() { return static_cast<int>(::getppid()); }

int Counter::ExitOnce(std::string marker) {
  if (!std::filesystem::exists(marker)) {
    std::ofstream(marker) << "died here\n";
    ::_exit(17);
  }
  return value_;
}

int Counter::Throw(std::string message) { throw std::runtime_error(message); }

bool Counter::Meet(int n) {
  std::unique_lock<std::mutex> lock(mu_);
  ++inside_;
  cv_.notify_all();
  bool met = cv_.wait_for(lock, std::chrono::seconds(5), [&] { return inside_ >= n; });
  return met;
}

int Counter::SleepMs(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}

int Add(int a, int b);  // tests/e2e/task_functions.cc

int AddThroughHandle(airt::ActorHandle<Counter> counter, int k) {
  return *airt::Get(counter.Task(&Counter::Add).Remote(k));
}

airt::ActorHandle<Counter> MakeCounter(int start) {
  return airt::Actor(Counter::Create).Remote(start);
}

int SumOfSubtasks(int n) {
  std::vector<airt::ObjectRef<int>> parts;
  for (int i = 0; i < n; ++i) parts.push_back(airt::Task(Add).Remote(i, i));
  int sum = 0;
  for (const auto& part : airt::Get(parts)) sum += *part;
  return sum;
}

AIRT_REMOTE(AddThroughHandle, MakeCounter, SumOfSubtasks);
AIRT_REMOTE(Counter::Create, Counter::CreateChecked, &Counter::Add, &Counter::Value,
            &Counter::Append, &Counter::Pid, &Counter::NodePid, &Counter::ExitOnce, &Counter::Throw,
            &Counter::Meet, &Counter::SleepMs);
