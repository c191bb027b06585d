// Tasks and an actor for the borrowing tests (tests/e2e/borrow_test.cc): they take and return
// refs inside values, which travel as references (docs/ownership.md). Built into
// airt_task_functions.
#pragma once

#include <cstdint>
#include <vector>

#include "airt/driver.h"

using BlockRefs = std::vector<airt::ObjectRef<std::vector<uint8_t>>>;

// How many refs it was given; reads none of them.
int CountRefs(BlockRefs refs);
// Reads the first of `refs` only; returns its size.
int64_t SizeOfFirst(BlockRefs refs);
// Waits `ms`, then reads every object and returns the sum of their sizes.
int64_t SumRefsAfter(BlockRefs refs, int ms);
// Waits `ms`, then hands the refs on to SumRefsAfter(refs, ms) and returns what it returns.
int64_t PassOnAfter(BlockRefs refs, int ms);
// Puts `n` objects of `size` bytes and returns refs to them (this task's worker owns them).
BlockRefs PutBlocks(int n, int size);

// Keeps the refs it is given, or makes objects of its own and returns refs to them.
class RefKeeper {
 public:
  static RefKeeper* Create();
  // Keeps `refs` (borrowed from their owner); returns this process's pid.
  int Keep(BlockRefs refs);
  // Reads what it keeps: the sum of the sizes.
  int64_t SumKept();
  // Puts `n` objects of `size` bytes and returns refs to them (this actor owns them).
  BlockRefs Make(int n, int size);
  int Pid();

 private:
  BlockRefs kept_;
};
