// The C++ sweep's experiment state: experiment_state.json, checkpoints
// (<trial>/checkpoint_NNNNNN/state.bin), retries of failed trials and resuming an interrupted
// sweep from its folder.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "airt/exceptions.h"
#include "airt/tune/pbt.h"
#include "airt/tune/sweep.h"

namespace airt::tune {
namespace internal {
namespace {

constexpr const char* kStateFile = "/experiment_state.json";
constexpr const char* kStateBlob = "/state.bin";

// Replaces `path` with `data` (a temporary file renamed over it).
void WriteAtomically(const std::string& path, const std::string& data) {
  {
    std::ofstream f(path + ".tmp", std::ios::binary | std::ios::trunc);
    f << data;
    if (!f) throw Exception("cannot write " + path + ".tmp");
  }
  std::filesystem::rename(path + ".tmp", path);
}

nlohmann::json ConfigToJson(const Config& c) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : c.numbers) out[k] = v;
  for (const auto& [k, v] : c.strings) out[k] = v;
  return out;
}

std::optional<double> MetricOf(const Metrics& m, const std::string& name) {
  auto it = m.find(name);
  return it == m.end() ? std::nullopt : std::optional<double>(it->second);
}

}  // namespace

bool Sweep::WantsCheckpoint(size_t i) const {
  const TrialRecord& t = result_.trials[i];
  int every = options_.checkpoint_frequency;
  return every > 0 && !t.results.empty() && t.results.size() % static_cast<size_t>(every) == 0;
}

void Sweep::Checkpointed(size_t i, const std::string& state) {
  TrialRecord& t = result_.trials[i];
  char name[32];
  std::snprintf(name, sizeof name, "/checkpoint_%06zu", t.results.size());
  std::string folder = t.path + name;
  std::filesystem::create_directories(folder);
  WriteAtomically(folder + kStateBlob, state);
  t.checkpoint = folder;
  t.checkpoint_iteration = t.results.size();
  if (pbt_) pbt_->SetCheckpointed(t.id);
  PruneCheckpoints(t);
  SaveState();
}

std::optional<std::string> Sweep::CheckpointOf(size_t i) const {
  const TrialRecord& t = result_.trials[i];
  if (t.checkpoint.empty()) return std::nullopt;
  std::ifstream f(t.checkpoint + kStateBlob, std::ios::binary);
  if (!f) {
    throw Exception("trial_" + t.id + ": its checkpoint " + t.checkpoint + kStateBlob +
                    " cannot be read");
  }
  std::ostringstream data;
  data << f.rdbuf();
  return data.str();
}

bool Sweep::Failed(size_t i, const std::string& error) {
  TrialRecord& t = result_.trials[i];
  if (t.status != "RUNNING") return false;  // stopped or paused already: the failure is moot
  ++t.num_failures;
  std::filesystem::create_directories(t.path);
  std::ofstream(t.path + "/error.txt", std::ios::app)
      << "Failure #" << t.num_failures << " (iteration " << t.results.size() << "):\n"
      << error << "\n";
  if (options_.max_failures == -1 || t.num_failures <= options_.max_failures) {
    Rewind(t);
    Queue(i);
    SaveState();
    return true;
  }
  t.error = error;
  t.status = "ERROR";
  options_.scheduler->OnTrialRemove(t.id);
  SaveState();
  for (const auto& callback : options_.callbacks) callback->OnTrialError(t);
  ApplyActions();
  return false;
}

void Sweep::Rewind(TrialRecord& t) {
  size_t keep = t.checkpoint.empty() ? 0 : t.checkpoint_iteration;
  if (t.results.size() > keep) t.results.resize(keep);
  std::filesystem::remove(t.path + "/result.json");
  std::filesystem::remove(t.path + "/progress.csv");
  for (size_t k = 0; k < t.results.size(); ++k) WriteResult(t, t.results[k], k == 0);
  size_t i = static_cast<size_t>(&t - result_.trials.data());
  time_base_[i] = t.results.empty() ? 0 : t.results.back().at("time_total_s");
}

void Sweep::SaveState() {
  nlohmann::json trials = nlohmann::json::array();
  for (const TrialRecord& t : result_.trials) {
    trials.push_back(
        {{"trial_id", t.id},
         {"status", t.status},
         {"config", ConfigToJson(t.config)},
         {"local_path", t.path},
         {"iterations", t.results.size()},
         {"stopped_early", t.stopped_early},
         {"num_failures", t.num_failures},
         {"num_pauses", t.num_pauses},
         {"num_exploits", t.num_exploits},
         {"checkpoint", t.checkpoint.empty() ? nlohmann::json() : nlohmann::json(t.checkpoint)},
         {"checkpoint_iteration", t.checkpoint_iteration},
         {"error_msg", t.error.empty() ? nlohmann::json() : nlohmann::json(t.error)}});
  }
  nlohmann::json state = {{"trials", trials}};
  WriteAtomically(result_.experiment_path + kStateFile, state.dump() + "\n");
}

void Sweep::Resume() {
  std::ifstream f(result_.experiment_path + kStateFile);
  if (!f) return;  // nothing to resume: a fresh sweep
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgumentError(result_.experiment_path + kStateFile +
                               " is not readable: " + e.what());
  }
  const nlohmann::json& saved = state.at("trials");
  if (saved.size() != result_.trials.size()) {
    throw InvalidArgumentError("resume: " + result_.experiment_path + " holds " +
                               std::to_string(saved.size()) + " trials, the search space makes " +
                               std::to_string(result_.trials.size()) +
                               " (not the interrupted sweep's space)");
  }
  for (size_t i = 0; i < saved.size(); ++i) {
    const nlohmann::json& s = saved[i];
    TrialRecord& t = result_.trials[i];
    t.status = s.at("status").get<std::string>();
    t.stopped_early = s.value("stopped_early", false);
    t.num_failures = s.value("num_failures", 0);
    t.num_pauses = s.value("num_pauses", 0);
    t.num_exploits = s.value("num_exploits", 0);
    if (s.contains("config") && s["config"].is_object()) {  // PBT may have changed it
      for (const auto& [k, v] : s["config"].items()) {
        if (v.is_number()) t.config.numbers[k] = v.get<double>();
        if (v.is_string()) t.config.strings[k] = v.get<std::string>();
      }
      if (pbt_) pbt_->SetConfig(t.id, t.config);
    }
    if (s.contains("checkpoint") && s["checkpoint"].is_string()) {
      t.checkpoint = s["checkpoint"].get<std::string>();
      t.checkpoint_iteration = s.value("checkpoint_iteration", size_t{0});
    }
    if (s.contains("error_msg") && s["error_msg"].is_string()) {
      t.error = s["error_msg"].get<std::string>();
    }
    std::ifstream lines(t.path + "/result.json");
    for (std::string line; std::getline(lines, line);) {
      if (line.empty()) continue;
      Metrics m;
      nlohmann::json row;
      try {
        row = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        break;  // a line torn by the interruption: the results end before it
      }
      for (const auto& [k, v] : row.items()) {
        if (v.is_number()) m[k] = v.get<double>();
      }
      t.results.push_back(std::move(m));
    }
    if (t.status != "TERMINATED" && t.status != "ERROR") {
      Rewind(t);
      t.status = "PENDING";  // queued in trial order, as at a fresh start
    }
    if (pbt_ && !t.checkpoint.empty()) pbt_->SetCheckpointed(t.id);
    // The scheduler learns the kept results again, trial by trial (decisions dropped).
    for (const Metrics& m : t.results) {
      options_.scheduler->OnTrialResult(t.id, m.at("training_iteration"),
                                        MetricOf(m, options_.metric));
    }
    if (t.status == "TERMINATED") {
      std::optional<double> time, metric;
      if (!t.results.empty()) {
        time = t.results.back().at("training_iteration");
        metric = MetricOf(t.results.back(), options_.metric);
      }
      options_.scheduler->OnTrialComplete(t.id, time, metric);
    } else if (t.status == "ERROR") {
      options_.scheduler->OnTrialRemove(t.id);
    }
  }
  options_.scheduler->TakeActions();
  SaveState();
}

}  // namespace internal
}  // namespace airt::tune
