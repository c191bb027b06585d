// Remote functions of the multinode example (a shared library: the driver links it, workers load
// it).
#include <unistd.h>

#include <climits>

#include "examples/multinode.h"

Place WhereAmI() {
  char host[HOST_NAME_MAX + 1] = {};
  ::gethostname(host, sizeof(host) - 1);
  return Place{host, static_cast<int>(::getppid())};  // a worker is a child of its node
}

std::vector<uint8_t> MakeBlock(int64_t size, int64_t seed) { return BlockBytes(size, seed); }

BlockCheck CheckBlock(std::vector<uint8_t> block, int64_t size, int64_t seed) {
  return BlockCheck{WhereAmI(), FirstBadByte(block, size, seed)};
}

AIRT_REMOTE(WhereAmI, MakeBlock, CheckBlock);
