// Work handed to an event loop by threads that have none, without waiting for it (KJ's
// executeSync waits; executeAsync needs a loop on the calling thread): items run on the loop in
// the order they were posted, as many per wake-up as have arrived. A task submission costs its
// caller a lock and a push, and a burst of them wakes the loop once. The core worker takes
// submissions through one; a worker takes its finished tasks back to its RPC loop through one.
#pragma once

#include <mutex>
#include <vector>

#include <kj/async.h>
#include <kj/function.h>

namespace airt {

class Inbox {
 public:
  // Any thread.
  void Post(kj::Function<void()> item);
  // Loop thread: runs the items as they arrive, until the promise is dropped.
  kj::Promise<void> Serve();
  // Loop thread: runs the items posted so far now (before work that must come after them).
  void RunPending();
  // Loop thread, before the loop's side goes away: later posts are dropped (their items
  // destroyed on the posting thread, never run).
  void Close();

 private:
  std::mutex mu_;
  std::vector<kj::Function<void()>> items_;              // guarded by mu_
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> wake_;  // guarded by mu_
  bool closed_ = false;                                  // guarded by mu_
};

}  // namespace airt
