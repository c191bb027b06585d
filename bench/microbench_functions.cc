// Remote functions of bench/microbenchmark: linked by the benchmark (which names them with
// Task(f)) and loaded by airt-worker from the node's --worker-code-search-path.
#include <cstdint>
#include <vector>

#include "airt/api.h"
#include "airt/buffer.h"

// Ray's microbenchmark's `small_value`: a task that does nothing and returns a tiny value, so
// that what is measured is the runtime's own cost per task.
int SmallValue() { return 0; }

// Ray's microbenchmark's `Actor`: a method that does nothing and returns a tiny value.
class BenchActor {
 public:
  static BenchActor* Create() { return new BenchActor(); }
  int SmallValue() { return 0; }
};

// cross_node_pull_gigabytes' object: `size` bytes, every page written (as a filled numpy array).
std::vector<uint8_t> FilledBytes(int64_t size) {
  return std::vector<uint8_t>(static_cast<size_t>(size), 0x5a);
}

// fetch_bench's objects: `size` bytes as an airt::Buffer (a msgpack bin, read back as a view).
airt::Buffer FilledBuffer(int64_t size) {
  return airt::Buffer(std::vector<uint8_t>(static_cast<size_t>(size), 0x5a));
}

AIRT_REMOTE(SmallValue, BenchActor::Create, &BenchActor::SmallValue, FilledBytes, FilledBuffer);
