#include "tests/e2e/store_fixture.h"

#include <signal.h>

#include <iostream>

namespace airt::e2e {
namespace {

// The last `n` characters of a log, to keep failure output readable.
std::string Tail(const std::string& text, size_t n = 6000) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

}  // namespace

StoreFixture::StoreFixture()
    : socket_(dir_.File("store.sock")), task_(TaskId::ForDriver(JobId::FromRandom())) {}

StoreFixture::~StoreFixture() {
  observer_.reset();
  tools_.clear();  // kills and reaps every tool still running
  store_.reset();  // and the daemon
}

void StoreFixture::TearDown() {
  if (!HasFailure()) return;
  std::cerr << "---- airt-store output (" << store_log_ << ")\n"
            << Tail(testing::ReadFile(store_log_)) << "\n";
  for (const auto& tool : tools_) {
    std::cerr << "---- " << tool->name << " output\n" << Tail(testing::ReadFile(tool->log)) << "\n";
  }
}

void StoreFixture::StartStore(std::vector<std::string> flags) {
  ASSERT_EQ(store_, nullptr) << "one store per test";
  store_log_ = dir_.File("airt-store.log");
  std::vector<std::string> argv = {AIRT_STORE_BIN, "--socket", socket_};
  argv.insert(argv.end(), flags.begin(), flags.end());
  store_ = std::make_unique<testing::ChildProcess>(argv, store_log_);
  ASSERT_TRUE(store_->started());
  ASSERT_TRUE(testing::WaitForLine(store_log_, "ready " + socket_, 30s, store_.get()))
      << "airt-store printed no ready line within 30 s or exited: "
      << testing::ReadFile(store_log_);
  ASSERT_TRUE(store_->Running()) << "airt-store exited: " << testing::ReadFile(store_log_);
  objectstore::StoreClient::Options options;
  options.prefault = false;
  auto client = objectstore::StoreClient::Connect(socket_, options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  observer_ = std::move(client).value();
}

void StoreFixture::StopStore() {
  ASSERT_NE(store_, nullptr);
  store_->Kill(SIGTERM);
  EXPECT_EQ(store_->Wait(20s), 0) << "airt-store did not stop cleanly on SIGTERM";
}

StoreFixture::Tool* StoreFixture::StartTool(const std::string& command,
                                            std::vector<std::string> args) {
  auto tool = std::make_unique<Tool>();
  tool->name = "tool " + std::to_string(tools_.size()) + " " + command;
  for (const auto& a : args) tool->name += " " + a;
  tool->log = dir_.File("tool-" + std::to_string(tools_.size()) + ".log");
  std::vector<std::string> argv = {AIRT_STORE_CLIENT_TOOL_BIN, command, socket_};
  argv.insert(argv.end(), args.begin(), args.end());
  tool->process = std::make_unique<testing::ChildProcess>(argv, tool->log);
  tools_.push_back(std::move(tool));
  return tools_.back().get();
}

int StoreFixture::RunTool(const std::string& command, std::vector<std::string> args,
                          std::chrono::milliseconds timeout) {
  Tool* tool = StartTool(command, std::move(args));
  int rc = tool->process->Wait(timeout);
  if (rc < 0) {
    ADD_FAILURE() << tool->name << " did not finish within " << timeout.count() << " ms";
    tool->process->Kill(SIGKILL);
    tool->process->Wait(10s);
  }
  return rc;
}

bool StoreFixture::WaitForOutput(Tool* tool, std::string_view text,
                                 std::chrono::milliseconds timeout) {
  auto printed = [&] { return testing::ReadFile(tool->log).find(text) != std::string::npos; };
  testing::WaitUntil([&] { return printed() || !tool->process->Running(); }, timeout);
  return printed();
}

objectstore::StoreStats StoreFixture::Stats() {
  auto stats = observer_->Stats();
  EXPECT_TRUE(stats.ok()) << stats.status().ToString();
  return stats.ok() ? *stats : objectstore::StoreStats{};
}

bool StoreFixture::WaitForStats(
    const std::function<bool(const objectstore::StoreStats&)>& condition,
    std::chrono::milliseconds timeout) {
  return testing::WaitUntil([&] { return condition(Stats()); }, timeout);
}

}  // namespace airt::e2e
