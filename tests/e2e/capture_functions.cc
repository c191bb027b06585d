// The remote functions of placement_group_capture_test: tasks and an actor method that submit a
// child without a group of their own and say whether it ran (tests/e2e/capture_test.cc).
#include <string>
#include <vector>

#include "airt/api.h"

int Add(int a, int b);  // tests/e2e/task_functions.cc

// Submits Add(1, 2) (1 CPU, no group of its own, or with the default strategy set explicitly) and
// waits `ms` for it: 3 when it ran, -1 when it did not start in that time.
int ChildResult(int ms, bool default_strategy) {
  airt::ObjectRef<int> child = default_strategy
                                   ? airt::Task(Add)
                                         .SetSchedulingStrategy(airt::DefaultSchedulingStrategy{})
                                         .Remote(1, 2)
                                   : airt::Task(Add).Remote(1, 2);
  auto waited = airt::Wait(std::vector<airt::ObjectRef<int>>{child}, 1, ms);
  if (waited.ready.empty()) {
    airt::Cancel(child, /*force=*/false);
    return -1;
  }
  return *airt::Get(child);
}

// One level more: a child task (1 CPU, no group of its own) that itself runs ChildResult.
int GrandchildResult(int ms) {
  airt::ObjectRef<int> child = airt::Task(ChildResult).Remote(ms, false);
  auto waited = airt::Wait(std::vector<airt::ObjectRef<int>>{child}, 1, 2 * ms);
  if (waited.ready.empty()) {
    airt::Cancel(child, /*force=*/false);
    return -1;
  }
  return *airt::Get(child);
}

// An actor whose method submits a child.
class Spawner {
 public:
  static Spawner* Create() { return new Spawner(); }
  int Child(int ms) { return ChildResult(ms, false); }
};

AIRT_REMOTE(ChildResult, GrandchildResult, Spawner::Create, &Spawner::Child);
