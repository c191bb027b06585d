#include "tests/e2e/borrow_functions.h"

#include <unistd.h>

#include <chrono>
#include <thread>

#include "airt/api.h"

int CountRefs(BlockRefs refs) { return static_cast<int>(refs.size()); }

int64_t SizeOfFirst(BlockRefs refs) {
  return refs.empty() ? -1 : static_cast<int64_t>(airt::Get(refs[0])->size());
}

int64_t SumRefsAfter(BlockRefs refs, int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  int64_t sum = 0;
  for (const auto& block : airt::Get(refs)) sum += static_cast<int64_t>(block->size());
  return sum;
}

int64_t PassOnAfter(BlockRefs refs, int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return *airt::Get(airt::Task(SumRefsAfter).Remote(refs, ms));
}

BlockRefs PutBlocks(int n, int size) {
  BlockRefs refs;
  for (int i = 0; i < n; ++i) {
    refs.push_back(airt::Put(std::vector<uint8_t>(static_cast<size_t>(size), uint8_t(i))));
  }
  return refs;
}

RefKeeper* RefKeeper::Create() { return new RefKeeper(); }

int RefKeeper::Keep(BlockRefs refs) {
  kept_ = std::move(refs);
  return Pid();
}

int64_t RefKeeper::SumKept() { return SumRefsAfter(kept_, 0); }

BlockRefs RefKeeper::Make(int n, int size) { return PutBlocks(n, size); }

int RefKeeper::Pid() { return static_cast<int>(::getpid()); }

AIRT_REMOTE(CountRefs, SizeOfFirst, SumRefsAfter, PassOnAfter, PutBlocks, RefKeeper::Create,
            &RefKeeper::Keep, &RefKeeper::SumKept, &RefKeeper::Make, &RefKeeper::Pid);
