// A change to the head's tables, staged: the rows to write in one WriteBatch and what to do to the
// tables' memory once the store confirmed them. A table's mutating method validates against its
// memory and returns a Change without touching memory; the caller writes `rows` and runs Apply()
// only when the write succeeded, so memory and store never diverge. Changes of several tables
// join into one batch (finishing a job marks its actors DEAD in the same write).
//
// The head stages and applies one change at a time (HeadServer's write queue), so the memory a
// change was staged against is the memory it is applied to.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "head/metadata_store.h"

namespace airt::head::internal {

struct Change {
  WriteBatch rows;
  std::string
      what;  // what the change does, as context for the store's error ("registering node ..")
  std::vector<std::function<void()>> on_written;  // run in order by Apply

  // Appends `other`'s rows and memory updates after this change's own.
  void Add(Change other) {
    rows.Append(std::move(other.rows));
    if (what.empty()) what = std::move(other.what);
    for (auto& f : other.on_written) on_written.push_back(std::move(f));
  }
  // Updates memory; call once, after the rows were written.
  void Apply() {
    for (auto& f : on_written) f();
    on_written.clear();
  }
};

// A staged change with what it answers (an id handed out, whether a key was new).
template <typename T>
struct Staged {
  T value;
  Change change;
};

}  // namespace airt::head::internal
