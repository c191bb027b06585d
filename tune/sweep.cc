// The C++ sweep's bookkeeping: trial states, the scheduler's decisions, the trials' result files
// (the layout airt.tune writes) and the progress table. sweep_state.cc has the experiment's
// state, checkpoints, retries and resume.
#include "airt/tune/sweep.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "airt/exceptions.h"
#include "airt/tune/pbt.h"
#include "tune/sweep_plot.h"

namespace airt::tune {
namespace internal {
namespace {

double Now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Num(double v) {
  if (!std::isfinite(v)) return Quote(std::to_string(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string Short(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string ConfigJson(const Config& c) {
  std::string out = "{";
  for (const auto& [k, v] : c.numbers)
    out += (out.size() > 1 ? ", " : "") + Quote(k) + ": " + Num(v);
  for (const auto& [k, v] : c.strings)
    out += (out.size() > 1 ? ", " : "") + Quote(k) + ": " + Quote(v);
  return out + "}";
}

void Append(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::app);
  f << text;
}

}  // namespace

Sweep::Sweep(std::vector<Config> variants, const SweepOptions& options)
    : options_(options), start_time_(Now()), tty_(isatty(STDOUT_FILENO)) {
  if (!options_.scheduler) options_.scheduler = MakeFifoScheduler();
  pbt_ = dynamic_cast<PopulationBasedTraining*>(options_.scheduler.get());
  if (options_.checkpoint_config.num_to_keep && *options_.checkpoint_config.num_to_keep < 1) {
    throw InvalidArgumentError("checkpoint_config.num_to_keep must be at least 1");
  }
  if (options_.max_concurrent < 1) throw InvalidArgumentError("max_concurrent must be positive");
  std::string storage = options_.storage_path;
  if (storage.empty()) {
    const char* home = std::getenv("HOME");
    storage = std::string(home ? home : ".") + "/airt_results";
  }
  result_.experiment_path = std::filesystem::absolute(storage + "/" + options_.name).string();
  std::filesystem::create_directories(result_.experiment_path);
  for (size_t i = 0; i < variants.size(); ++i) {
    TrialRecord t;
    char id[24];  // room for any size_t
    std::snprintf(id, sizeof id, "%05zu", i + 1);
    t.id = id;
    t.config = std::move(variants[i]);
    t.path = result_.experiment_path + "/trial_" + t.id;
    options_.scheduler->OnTrialAdd(t.id);
    if (pbt_) pbt_->SetConfig(t.id, t.config);
    result_.trials.push_back(std::move(t));
  }
  started_at_.assign(result_.trials.size(), 0);
  time_base_.assign(result_.trials.size(), 0);
  for (size_t i = 0; i < result_.trials.size(); ++i) queued_.push_back(next_queue_++);
  options_.scheduler->OnSearchFinished();
  if (options_.max_failures < -1) throw InvalidArgumentError("max_failures must be >= -1");
  if (options_.checkpoint_frequency < 0) {
    throw InvalidArgumentError("checkpoint_frequency must not be negative");
  }
  if (options_.resume) Resume();
}

std::vector<size_t> Sweep::Launchable(size_t running) {
  std::vector<size_t> pending;
  for (size_t i = 0; i < result_.trials.size(); ++i) {
    if (result_.trials[i].status == "PENDING") pending.push_back(i);
  }
  std::sort(pending.begin(), pending.end(),
            [&](size_t a, size_t b) { return queued_[a] < queued_[b]; });
  size_t room = static_cast<size_t>(options_.max_concurrent);
  pending.resize(std::min(pending.size(), room > running ? room - running : 0));
  return pending;
}

void Sweep::Started(size_t i) {
  TrialRecord& t = result_.trials[i];
  t.status = "RUNNING";
  started_at_[i] = Now();
  std::filesystem::create_directories(t.path);
  if (t.results.empty()) {  // a sweep run again under its name starts afresh
    std::filesystem::remove(t.path + "/result.json");
    std::filesystem::remove(t.path + "/progress.csv");
  }
  if (t.num_failures == 0) std::filesystem::remove(t.path + "/error.txt");
  std::ofstream(t.path + "/params.json") << ConfigJson(t.config) << "\n";
  for (const auto& callback : options_.callbacks) callback->OnTrialStart(t);
}

bool Sweep::Report(size_t i, Metrics metrics) {
  TrialRecord& t = result_.trials[i];
  if (t.status != "RUNNING") return false;  // stopped by an action while its step ran
  double iteration = static_cast<double>(t.results.size() + 1);
  metrics["training_iteration"] = iteration;
  metrics["time_total_s"] = time_base_[i] + Now() - started_at_[i];
  WriteResult(t, metrics, t.results.empty());
  std::optional<double> metric;
  if (auto it = metrics.find(options_.metric); it != metrics.end()) metric = it->second;
  t.results.push_back(std::move(metrics));
  for (const auto& callback : options_.callbacks) callback->OnTrialResult(t, t.results.back());
  options_.scheduler->SetWaiting(Waiting());
  Decision d = options_.scheduler->OnTrialResult(t.id, iteration, metric);
  if (iteration >= options_.max_iterations) {
    End(i, "TERMINATED", false);  // at its end, whatever the scheduler says
  } else if (d == Decision::kStop) {
    End(i, "TERMINATED", true);
  } else if (d == Decision::kPause) {
    t.status = "PAUSED";
    ++t.num_pauses;
    SaveState();
  } else if (pbt_) {
    ApplyExploit(i);
  }
  ApplyActions();
  return t.status == "RUNNING";
}

void Sweep::WriteResult(const TrialRecord& t, const Metrics& metrics, bool header) const {
  std::string json = "{";
  for (const auto& [k, v] : metrics)
    json += (json.size() > 1 ? ", " : "") + Quote(k) + ": " + Num(v);
  json += ", \"trial_id\": " + Quote(t.id) + ", \"config\": " + ConfigJson(t.config) + "}\n";
  Append(t.path + "/result.json", json);
  std::string csv;
  if (header) {
    for (const auto& [k, v] : metrics) csv += (csv.empty() ? "" : ",") + k;
    csv += "\n";
  }
  std::string row;
  for (const auto& [k, v] : metrics) row += (row.empty() ? "" : ",") + Num(v);
  Append(t.path + "/progress.csv", csv + row + "\n");
}

void Sweep::End(size_t i, const std::string& status, bool early) {
  TrialRecord& t = result_.trials[i];
  t.status = status;
  t.stopped_early = early;
  std::optional<double> time, metric;
  if (!t.results.empty()) {
    time = t.results.back().at("training_iteration");
    if (auto it = t.results.back().find(options_.metric); it != t.results.back().end()) {
      metric = it->second;
    }
  }
  options_.scheduler->OnTrialComplete(t.id, time, metric);
  SaveState();
  if (status == "TERMINATED") {
    for (const auto& callback : options_.callbacks) callback->OnTrialComplete(t);
  }
}

bool Sweep::CutShort(const TrialRecord& t) const {
  size_t longest = 0;
  for (const TrialRecord& other : result_.trials) longest = std::max(longest, other.results.size());
  return t.stopped_early && t.results.size() < longest;
}

void Sweep::Tick() {
  ApplyActions();
  Print(false);
}

void Sweep::Print(bool force) {
  if (!options_.verbose) return;
  double interval =
      options_.progress_interval_s >= 0 ? options_.progress_interval_s : (tty_ ? 0.5 : 10.0);
  double now = Now();
  if (!force && now - last_print_ < interval) return;
  last_print_ = now;
  std::map<std::string, int> counts;
  for (const TrialRecord& t : result_.trials) ++counts[t.status];
  std::ostringstream out;
  out << "== Tune status: " << result_.trials.size() << " trials";
  for (const auto& [s, n] : counts) out << ", " << n << " " << s;
  out << " | " << Short(now - start_time_) << " s elapsed ==\n";
  std::vector<std::string> params;
  if (!result_.trials.empty()) {
    for (const auto& [k, v] : result_.trials[0].config.numbers) params.push_back(k);
    for (const auto& [k, v] : result_.trials[0].config.strings) params.push_back(k);
  }
  std::vector<std::string> header = {"trial", "status"};
  header.insert(header.end(), params.begin(), params.end());
  header.insert(header.end(), {options_.metric.empty() ? "-" : options_.metric, "iter"});
  std::vector<std::vector<std::string>> rows = {header};
  for (const TrialRecord& t : result_.trials) {
    std::vector<std::string> row = {"trial_" + t.id,
                                    t.status + (CutShort(t) ? " (stopped early)" : "")};
    for (const std::string& p : params) {
      auto n = t.config.numbers.find(p);
      row.push_back(n != t.config.numbers.end() ? Short(n->second) : t.config.strings.at(p));
    }
    std::string metric, iter;
    if (!t.results.empty()) {
      auto it = t.results.back().find(options_.metric);
      if (it != t.results.back().end()) metric = Short(it->second);
      iter = std::to_string(t.results.size());
    }
    row.push_back(metric);
    row.push_back(iter);
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t c = 0; c < rows[r].size(); ++c) {
      out << (c ? " | " : "") << rows[r][c] << std::string(width[c] - rows[r][c].size(), ' ');
    }
    out << "\n";
  }
  std::string text = out.str();
  if (tty_ && drawn_lines_ > 0) std::printf("\x1b[%dF\x1b[J", drawn_lines_);
  drawn_lines_ = static_cast<int>(rows.size()) + 1;
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

SweepResult Sweep::Finish() {
  Print(true);
  SaveState();
  if (options_.plot && !options_.metric.empty()) {
    Result<std::string> png = PlotExperiment(result_.experiment_path, options_.metric);
    if (png.ok()) {
      result_.plot_path = *png;
    } else {
      result_.no_plot = png.status().message();
    }
  }
  if (options_.verbose) {
    int stopped = 0;
    for (const TrialRecord& t : result_.trials) stopped += CutShort(t);
    std::printf("Tune finished in %.1f s: %zu trials, %d stopped early; folder %s\n",
                Now() - start_time_, result_.trials.size(), stopped,
                result_.experiment_path.c_str());
    if (!result_.plot_path.empty()) {
      std::printf("Plot of %s over iterations: %s\n", options_.metric.c_str(),
                  result_.plot_path.c_str());
    } else if (!result_.no_plot.empty()) {
      std::printf("No plot: %s\n", result_.no_plot.c_str());
    }
  }
  return result_;
}

}  // namespace internal

const TrialRecord* SweepResult::Best(const std::string& metric, Mode mode) const {
  const TrialRecord* best = nullptr;
  double value = 0;
  for (const TrialRecord& t : trials) {
    if (t.results.empty()) continue;
    auto it = t.results.back().find(metric);
    if (it == t.results.back().end() || std::isnan(it->second)) continue;
    bool better = mode == Mode::kMin ? it->second < value : it->second > value;
    if (!best || better) {
      best = &t;
      value = it->second;
    }
  }
  return best;
}

}  // namespace airt::tune
