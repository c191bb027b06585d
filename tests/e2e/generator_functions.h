// Streaming generators for the generator tests (tests/e2e/generator_test.cc): functions and an
// actor whose methods return airt::Generator<T>. Built into airt_task_functions.
#pragma once

#include <string>

#include "airt/api.h"

// 0, 1, ..., n - 1.
airt::Generator<int> CountTo(int n);
// "first", then (once `go_file` exists, which the consumer writes) "0" .. "n-1". Throws when the
// file does not come within 60 s.
airt::Generator<std::string> GatedItems(std::string go_file, int n);
// 0 .. n - 1, writing how many items it made into `count_file` as it makes each.
airt::Generator<int> CountInto(std::string count_file, int n);
// 0 .. k - 1, then throws "failed after k items".
airt::Generator<int> FailAfter(int k);
// 0 .. n - 1; on its first attempt (no `marker` yet) its process exits once item k went out.
airt::Generator<int> DieOnceAfter(std::string marker, int n, int k);
// 0, 1, ... without end, writing how many it made into `count_file`; writes `stopped_file` once
// the generator is dropped (its sends failed: the stream was cancelled).
airt::Generator<int> Endless(std::string count_file, std::string stopped_file);

// An actor whose methods stream: each is the function of the same name above, run as a method
// (one call at a time, in the order the caller made them), counting the calls it started.
class StreamingActor {
 public:
  static StreamingActor* Create();
  airt::Generator<int> CountTo(int n);
  airt::Generator<std::string> GatedItems(std::string go_file, int n);
  airt::Generator<int> CountInto(std::string count_file, int n);
  airt::Generator<int> FailAfter(int k);
  airt::Generator<int> DieOnceAfter(std::string marker, int n, int k);
  airt::Generator<int> Endless(std::string count_file, std::string stopped_file);
  // call * 100 + i for i in 0 .. n - 1, `call` the number of calls started before this one; each
  // item adds one to the actor's item total as it is made.
  airt::Generator<int> Numbered(int n);
  // The calls started so far (this one included) and the items Numbered made.
  int Calls();
  int ItemTotal();

 private:
  int calls_ = 0;
  int items_ = 0;
};
