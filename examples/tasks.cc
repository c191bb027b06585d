// Tasks, references and objects: the smallest airt C++ program.
//   AIRT_ADDRESS=127.0.0.1:6379 build/examples/tasks   joins that cluster
//   build/examples/tasks                                without AIRT_ADDRESS: a cluster of its own
#include <cstdint>
#include <cstdio>
#include <vector>

#include "airt/api.h"

int Add(int a, int b);
std::vector<int> Range(int n);
int64_t Sum(std::vector<int> values);

int main() {
  airt::Init();
  airt::ObjectRef<int> three = airt::Task(Add).Remote(1, 2);
  airt::ObjectRef<int> six = airt::Task(Add).Remote(three, three);  // refs are resolved first
  std::printf("1 + 2 = %d, then doubled: %d\n", *airt::Get(three), *airt::Get(six));

  airt::ObjectRef<std::vector<int>> numbers = airt::Task(Range).Remote(100000);  // 400 KB: store
  std::printf("sum of 0..99999 computed remotely: %lld\n",
              static_cast<long long>(*airt::Get(airt::Task(Sum).Remote(numbers))));

  airt::ObjectRef<int> put = airt::Put(40);
  std::printf("40 put, plus 2 remotely: %d\n", *airt::Get(airt::Task(Add).Remote(put, 2)));
  airt::Shutdown();
  return 0;
}
