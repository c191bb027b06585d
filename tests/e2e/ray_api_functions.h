// Remote functions and an actor written against Ray's C++ API names (ray/api.h), for
// ray_api_test (cluster mode) and local_mode_test: the shapes Ray's own C++ API tests use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ray/api.h"

namespace ray_api_test {

int Return1();
int Plus1(int x);
int Plus(int x, int y);
void NoReturn(int x);              // a void task: its ObjectRef<void> says when it finished
int ThrowTask(std::string message);  // throws std::invalid_argument(message)
int SleepMs(int ms);                  // sleeps, then returns ms
std::string GetEnvVar(std::string name);  // "" when unset
// A task that submits GetEnvVar(name) and returns what it got: env_vars are inherited.
std::string GetEnvVarInSubtask(std::string name);
int SumVector(std::vector<int> values);
uint64_t Pid();

class Counter {
 public:
  explicit Counter(int init);
  static Counter* FactoryCreate(int init);
  static Counter* FactoryCreateThrows();  // its constructor throws
  int Plus1();
  int Add(int x);
  int Exit();  // calls ray::ExitActor()
  uint64_t GetPid();
  std::string GetEnv(std::string name);
  bool CheckRestartInActorCreationTask() const;
  bool CheckRestartInActorTask();
  std::string Namespace();
  // Waits until `n` calls are inside it at once (max_concurrency), at most timeout_ms; the count
  // it saw.
  int Rendezvous(int n, int timeout_ms);

 private:
  int count_;
  bool restarted_;
};

}  // namespace ray_api_test
