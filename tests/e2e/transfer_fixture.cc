#include "tests/e2e/transfer_fixture.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <tuple>

namespace airt::e2e {
namespace {

// The last `n` characters of a log, to keep failure output readable.
std::string Tail(const std::string& text, size_t n = 6000) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

constexpr const char* kNamespacePrefix = "airt-xfer-";

// Deletes namespaces "airt-xfer-<pid>-..." whose test process is gone (killed before its
// destructors ran), or that carry this process's pid (left by an earlier process of that pid).
// Others' namespaces and those of live tests are left alone.
void DeleteStaleNamespaces(const std::string& ip, const std::string& log) {
  auto [rc, listing] = RunCommand({ip, "netns", "list"}, log);
  if (rc != 0) return;
  std::istringstream in(listing);
  for (std::string line; std::getline(in, line);) {
    std::string name = line.substr(0, line.find(' '));
    if (name.rfind(kNamespacePrefix, 0) != 0) continue;
    long pid = std::strtol(name.c_str() + std::string_view(kNamespacePrefix).size(), nullptr, 10);
    if (pid <= 0) continue;
    if (pid == ::getpid() || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
      RunCommand({ip, "netns", "delete", name}, log);
    }
  }
}

}  // namespace

std::string IpBinary() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(path, X_OK) == 0) return path;
  }
  return "";
}

std::pair<int, std::string> RunCommand(const std::vector<std::string>& argv,
                                       const std::string& log_path) {
  std::ofstream(log_path, std::ios::trunc).flush();  // this command's output only
  testing::ChildProcess child(argv, log_path);
  int rc = child.Wait(20s);
  return {rc, testing::ReadFile(log_path)};
}

// ---- NamespacePair ----------------------------------------------------------------------------

Result<std::unique_ptr<NamespacePair>> NamespacePair::Create() {
  if (IpBinary().empty()) return FailedPrecondition("no ip(8) binary (package iproute2)");
  std::unique_ptr<NamespacePair> pair(new NamespacePair());
  Status s = pair->Setup();
  if (!s.ok()) return s;  // the destructor deletes what was made
  return pair;
}

Status NamespacePair::Setup() {
  const std::string ip = IpBinary();
  const std::string log = logs_.File("ip.log");
  DeleteStaleNamespaces(ip, log);
  const std::string tag = std::to_string(::getpid());
  a_ = kNamespacePrefix + tag + "-a";
  b_ = kNamespacePrefix + tag + "-b";

  auto [rc, out] = RunCommand({ip, "netns", "add", a_}, log);
  if (rc != 0) {
    return FailedPrecondition("`ip netns add " + a_ + "` is not permitted here (exit " +
                              std::to_string(rc) + "): " + out);
  }
  created_.push_back(a_);
  std::tie(rc, out) = RunCommand({ip, "netns", "add", b_}, log);
  if (rc != 0) return Internal("ip netns add " + b_ + ": " + out);
  created_.push_back(b_);

  // veth names: at most 15 characters; the pid keeps them unique among concurrent tests.
  const std::string veth_a = "axa" + tag, veth_b = "axb" + tag;
  const std::vector<std::vector<std::string>> steps = {
      {ip, "link", "add", veth_a, "netns", a_, "type", "veth", "peer", "name", veth_b, "netns", b_},
      {ip, "-n", a_, "addr", "add", std::string(kAddressA) + "/24", "dev", veth_a},
      {ip, "-n", b_, "addr", "add", std::string(kAddressB) + "/24", "dev", veth_b},
      {ip, "-n", a_, "link", "set", "lo", "up"},
      {ip, "-n", b_, "link", "set", "lo", "up"},
      {ip, "-n", a_, "link", "set", veth_a, "up"},
      {ip, "-n", b_, "link", "set", veth_b, "up"},
  };
  for (const auto& step : steps) {
    std::tie(rc, out) = RunCommand(step, log);
    if (rc != 0) {
      std::string command;
      for (size_t i = 1; i < step.size(); ++i) command += " " + step[i];
      return Internal("ip" + command + " (exit " + std::to_string(rc) + "): " + out);
    }
  }
  return Status::Ok();
}

NamespacePair::~NamespacePair() {
  const std::string ip = IpBinary();
  for (const std::string& ns : created_) {
    auto [rc, out] = RunCommand({ip, "netns", "delete", ns}, logs_.File("ip.log"));
    if (rc != 0) std::cerr << "could not delete network namespace " << ns << ": " << out << "\n";
  }
}

std::vector<std::string> NamespacePair::Exec(const std::string& ns) {
  return {IpBinary(), "netns", "exec", ns};
}

// ---- TransferFixture --------------------------------------------------------------------------

TransferFixture::TransferFixture() : task_(TaskId::ForDriver(JobId::FromRandom())) {}

TransferFixture::~TransferFixture() { EndProcessesAndNamespaces(); }

void TransferFixture::EndProcessesAndNamespaces() {
  TearDown();      // the logs of a failed test, before the processes that wrote them are gone
  tools_.clear();  // kills and reaps every tool still running
  for (auto& node : nodes_) node->observer.reset();
  nodes_.clear();  // and every daemon
  namespaces_.reset();
}

void TransferFixture::TearDown() {
  if (!HasFailure() || logs_printed_) return;
  logs_printed_ = true;
  for (const auto& node : nodes_) {
    std::cerr << "---- node " << node->name << " (airt-store) output\n"
              << Tail(testing::ReadFile(node->log)) << "\n";
  }
  for (const auto& tool : tools_) {
    std::cerr << "---- " << tool->name << " output\n" << Tail(testing::ReadFile(tool->log)) << "\n";
  }
}

TransferFixture::Node* TransferFixture::StartNode(const std::string& name,
                                                  std::vector<std::string> flags,
                                                  std::vector<std::string> prefix) {
  auto node = std::make_unique<Node>();
  node->name = name;
  node->socket = dir_.File(name + ".sock");
  node->log = dir_.File("node-" + name + ".log");
  node->prefix = std::move(prefix);
  std::vector<std::string> argv = node->prefix;
  argv.insert(argv.end(), {AIRT_STORE_BIN, "--socket", node->socket, "--transfer"});
  argv.insert(argv.end(), flags.begin(), flags.end());
  node->process = std::make_unique<testing::ChildProcess>(argv, node->log);
  Node* n = node.get();
  nodes_.push_back(std::move(node));
  if (!n->process->started()) {
    ADD_FAILURE() << "could not start node " << name;
    return nullptr;
  }
  if (!testing::WaitForLine(n->log, "ready " + n->socket, 30s, n->process.get())) {
    ADD_FAILURE() << "node " << name << " printed no ready line within 30 s or exited: "
                  << Tail(testing::ReadFile(n->log));
    return nullptr;
  }
  if (!n->process->Running()) {
    ADD_FAILURE() << "node " << name << " exited: " << testing::ReadFile(n->log);
    return nullptr;
  }
  n->transfer = testing::LineAfter(testing::ReadFile(n->log), "transfer ").value_or("");
  if (n->transfer.empty()) {
    ADD_FAILURE() << "node " << name << " printed no transfer line";
    return nullptr;
  }
  objectstore::StoreClient::Options options;
  options.prefault = false;
  auto client = objectstore::StoreClient::Connect(n->socket, options);
  if (!client.ok()) {
    ADD_FAILURE() << "connect to node " << name << ": " << client.status().ToString();
    return nullptr;
  }
  n->observer = std::move(client).value();
  return n;
}

void TransferFixture::StopNode(Node* node) {
  ASSERT_NE(node, nullptr);
  node->observer.reset();
  node->process->Kill(SIGTERM);
  EXPECT_EQ(node->process->Wait(20s), 0)
      << "node " << node->name << " did not stop cleanly on SIGTERM";
}

void TransferFixture::KillNode(Node* node) {
  ASSERT_NE(node, nullptr);
  node->observer.reset();
  node->process->Kill(SIGKILL);
  EXPECT_EQ(node->process->Wait(20s), 128 + SIGKILL) << "node " << node->name;
}

TransferFixture::Tool* TransferFixture::StartTool(const std::string& label,
                                                  std::vector<std::string> argv,
                                                  const std::vector<std::string>& prefix) {
  auto tool = std::make_unique<Tool>();
  tool->name = "tool " + std::to_string(tools_.size()) + " " + label;
  tool->log = dir_.File("tool-" + std::to_string(tools_.size()) + ".log");
  argv.insert(argv.begin(), prefix.begin(), prefix.end());
  tool->process = std::make_unique<testing::ChildProcess>(argv, tool->log);
  tools_.push_back(std::move(tool));
  return tools_.back().get();
}

TransferFixture::Tool* TransferFixture::StartPull(Node* local, const std::string& peer,
                                                  const std::vector<ObjectId>& ids,
                                                  int64_t timeout_ms) {
  std::string hex;
  for (const ObjectId& id : ids) hex += (hex.empty() ? "" : ",") + id.Hex();
  return StartTool(
      "pull into " + local->name + " from " + peer + " " + hex,
      {AIRT_TRANSFER_TOOL_BIN, "pull", local->socket, peer, hex, std::to_string(timeout_ms)},
      local->prefix);
}

TransferFixture::Tool* TransferFixture::StartStoreTool(Node* node, const std::string& command,
                                                       std::vector<std::string> args) {
  std::string label = command + " on " + node->name;
  for (const auto& a : args) label += " " + a;
  std::vector<std::string> argv = {AIRT_STORE_CLIENT_TOOL_BIN, command, node->socket};
  argv.insert(argv.end(), args.begin(), args.end());
  return StartTool(label, std::move(argv), node->prefix);
}

int TransferFixture::WaitTool(Tool* tool, std::chrono::milliseconds timeout) {
  int rc = tool->process->Wait(timeout);
  if (rc < 0) {
    ADD_FAILURE() << tool->name << " did not finish within " << timeout.count() << " ms";
    tool->process->Kill(SIGKILL);
    tool->process->Wait(10s);
  }
  return rc;
}

int TransferFixture::Put(Node* node, const ObjectId& id, uint64_t size, uint64_t seed) {
  int rc = RunStoreTool(node, "put", {id.Hex(), std::to_string(size), std::to_string(seed)});
  if (rc != 0) return rc;
  if (!WaitUntilSealed(node, id)) {
    ADD_FAILURE() << "node " << node->name << " does not show " << id.Hex()
                  << " although its writer exited after sealing it";
    return -1;
  }
  return 0;
}

bool TransferFixture::WaitUntilSealed(Node* node, const ObjectId& id,
                                      std::chrono::milliseconds timeout) {
  return testing::WaitUntil([&] { return node->observer->Contains(id); }, timeout);
}

bool TransferFixture::WaitForOutput(Tool* tool, std::string_view text,
                                    std::chrono::milliseconds timeout) {
  auto printed = [&] { return testing::ReadFile(tool->log).find(text) != std::string::npos; };
  testing::WaitUntil([&] { return printed() || !tool->process->Running(); }, timeout);
  return printed();
}

objectstore::StoreStats TransferFixture::Stats(Node* node) {
  auto stats = node->observer->Stats();
  EXPECT_TRUE(stats.ok()) << "node " << node->name << ": " << stats.status().ToString();
  return stats.ok() ? *stats : objectstore::StoreStats{};
}

bool TransferFixture::WaitForStats(
    Node* node, const std::function<bool(const objectstore::StoreStats&)>& condition,
    std::chrono::milliseconds timeout) {
  return testing::WaitUntil([&] { return condition(Stats(node)); }, timeout);
}

}  // namespace airt::e2e
