// The C++ sweep's scheduling beyond a report's own decision: a scheduler's actions on other
// trials (HyperBand resuming or stopping the paused members of a bracket, the median rule's
// time-sliced trials going on), waking paused trials nothing else will, PBT's exploits (a copy
// of the donor's checkpoint, the explored config) and CheckpointConfig.num_to_keep.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "airt/tune/pbt.h"
#include "airt/tune/sweep.h"

namespace airt::tune {
namespace internal {

size_t Sweep::Waiting() const {
  return static_cast<size_t>(std::count_if(result_.trials.begin(), result_.trials.end(),
                                           [](const TrialRecord& t) {
                                             return t.status == "PENDING";
                                           }));
}

void Sweep::Queue(size_t i) {
  result_.trials[i].status = "PENDING";
  queued_[i] = next_queue_++;
}

void Sweep::Unpause(size_t i) {
  Rewind(result_.trials[i]);  // to its latest checkpoint (the one taken at the pause)
  Queue(i);
}

void Sweep::ApplyActions() {
  while (true) {
    options_.scheduler->SetWaiting(Waiting());
    std::vector<Action> actions = options_.scheduler->TakeActions();
    if (actions.empty()) break;
    bool changed = false;
    for (const Action& a : actions) {
      auto it = std::find_if(result_.trials.begin(), result_.trials.end(),
                             [&](const TrialRecord& t) { return t.id == a.trial; });
      if (it == result_.trials.end()) continue;
      size_t i = static_cast<size_t>(it - result_.trials.begin());
      if (a.decision == Decision::kStop && (it->status == "RUNNING" || it->status == "PAUSED")) {
        End(i, "TERMINATED", true);  // a running one's in-flight result is dropped
        changed = true;
      } else if (a.decision == Decision::kContinue && it->status == "PAUSED") {
        Unpause(i);
        changed = true;
      }
    }
    if (changed) SaveState();
  }
}

bool Sweep::Wake() {
  ApplyActions();
  auto any = [&](const char* status) {
    return std::any_of(result_.trials.begin(), result_.trials.end(),
                       [&](const TrialRecord& t) { return t.status == status; });
  };
  if (any("PENDING")) return true;
  if (!any("PAUSED")) return false;
  options_.scheduler->OnSearchFinished();
  ApplyActions();
  if (any("PENDING")) return true;
  for (size_t i = 0; i < result_.trials.size(); ++i) {  // a bracket that cannot complete
    if (result_.trials[i].status == "PAUSED") Unpause(i);
  }
  SaveState();
  return true;
}

void Sweep::ApplyExploit(size_t i) {
  TrialRecord& t = result_.trials[i];
  for (Exploit& e : pbt_->TakeExploits()) {
    if (e.trial != t.id) continue;  // asynchronous PBT exploits the reporting trial only
    auto donor = std::find_if(result_.trials.begin(), result_.trials.end(),
                              [&](const TrialRecord& d) { return d.id == e.donor; });
    if (donor == result_.trials.end() || donor->checkpoint.empty()) continue;
    std::optional<std::string> state =
        CheckpointOf(static_cast<size_t>(donor - result_.trials.begin()));
    t.config = std::move(e.config);
    ++t.num_exploits;
    std::ofstream(t.path + "/pbt_policy.txt", std::ios::app)
        << "iteration " << t.results.size() << ": exploited trial_" << donor->id << " (its "
        << donor->checkpoint_iteration << "-result checkpoint)\n";
    Checkpointed(i, *state);  // the trial goes on from the donor's state, its own results kept
    Queue(i);
    SaveState();
    return;
  }
}

void Sweep::PruneCheckpoints(const TrialRecord& t) const {
  if (!options_.checkpoint_config.num_to_keep) return;
  std::vector<std::string> folders;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(t.path, ec)) {
    std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("checkpoint_", 0) == 0) {
      folders.push_back(entry.path().string());
    }
  }
  std::sort(folders.begin(), folders.end());  // checkpoint_NNNNNN: oldest first
  size_t keep = static_cast<size_t>(*options_.checkpoint_config.num_to_keep);
  for (size_t k = 0; k + keep < folders.size(); ++k) {
    if (folders[k] != t.checkpoint) std::filesystem::remove_all(folders[k], ec);
  }
}

}  // namespace internal
}  // namespace airt::tune
