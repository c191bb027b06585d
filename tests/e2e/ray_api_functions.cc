#include "tests/e2e/ray_api_functions.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>

namespace ray_api_test {

int Return1() { return 1; }
int Plus1(int x) { return x + 1; }
int Plus(int x, int y) { return x + y; }
void NoReturn(int x) { (void)x; }
int ThrowTask(std::string message) { throw std::invalid_argument(message); }
int SleepMs(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}
std::string GetEnvVar(std::string name) {
  const char* value = std::getenv(name.c_str());
  return value ? value : "";
}
std::string GetEnvVarInSubtask(std::string name) {
  return *ray::Task(GetEnvVar).Remote(name).Get();
}
int SumVector(std::vector<int> values) { return std::accumulate(values.begin(), values.end(), 0); }
uint64_t Pid() { return static_cast<uint64_t>(::getpid()); }

Counter::Counter(int init) : count_(init), restarted_(ray::WasCurrentActorRestarted()) {}
Counter* Counter::FactoryCreate(int init) { return new Counter(init); }
Counter* Counter::FactoryCreateThrows() { throw std::runtime_error("creation error"); }
int Counter::Plus1() { return ++count_; }
int Counter::Add(int x) { return count_ += x; }
int Counter::Exit() {
  ray::ExitActor();
}
uint64_t Counter::GetPid() { return static_cast<uint64_t>(::getpid()); }
std::string Counter::GetEnv(std::string name) { return GetEnvVar(std::move(name)); }
bool Counter::CheckRestartInActorCreationTask() const { return restarted_; }
bool Counter::CheckRestartInActorTask() { return ray::WasCurrentActorRestarted(); }
std::string Counter::Namespace() { return ray::GetNamespace(); }

int Counter::Rendezvous(int n, int timeout_ms) {
  static std::mutex mu;
  static std::condition_variable arrived;
  static int inside = 0;
  std::unique_lock<std::mutex> lock(mu);
  ++inside;
  arrived.notify_all();
  arrived.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return inside >= n; });
  return inside;
}

RAY_REMOTE(Return1, Plus1, Plus, NoReturn, ThrowTask, SleepMs, GetEnvVar, GetEnvVarInSubtask,
           SumVector, Pid, Counter::FactoryCreate, Counter::FactoryCreateThrows, &Counter::Plus1,
           &Counter::Add, &Counter::Exit, &Counter::GetPid, &Counter::GetEnv,
           &Counter::CheckRestartInActorCreationTask, &Counter::CheckRestartInActorTask,
           &Counter::Namespace, &Counter::Rendezvous);

}  // namespace ray_api_test
