#include "head/internal/port_owner.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

namespace airt::head::internal {
namespace {

constexpr std::string_view kListen = "0A";  // TCP_LISTEN in /proc/net/tcp's "st" column

// The inodes of the sockets listening on `port` in a /proc/net/tcp-format file.
void ListeningInodes(const char* path, uint16_t port, std::set<std::string>& inodes) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  char want[8];
  std::snprintf(want, sizeof(want), ":%04X", port);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string sl, local, remote, st, queues, timer, retrans, uid, timeout, inode;
    fields >> sl >> local >> remote >> st >> queues >> timer >> retrans >> uid >> timeout >> inode;
    if (st != kListen || local.size() < 5) continue;
    if (local.compare(local.size() - 5, 5, want) == 0) inodes.insert(inode);
  }
}

}  // namespace

std::string DescribePortOwner(uint16_t port) {
  std::set<std::string> inodes;
  ListeningInodes("/proc/net/tcp", port, inodes);
  ListeningInodes("/proc/net/tcp6", port, inodes);
  if (inodes.empty()) return "";
  std::set<std::string> links;
  for (const std::string& inode : inodes) links.insert("socket:[" + inode + "]");
  std::error_code ec;
  for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
    std::string pid = proc.path().filename();
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::filesystem::directory_iterator fds(proc.path() / "fd", ec);
    if (ec) continue;  // another user's process
    for (const auto& fd : fds) {
      std::error_code link_ec;
      std::filesystem::path target = std::filesystem::read_symlink(fd.path(), link_ec);
      if (link_ec || links.count(target.string()) == 0) continue;
      std::ifstream comm(proc.path() / "comm");
      std::string name;
      std::getline(comm, name);
      return (name.empty() ? "a process" : name) + " (pid " + pid + ")";
    }
  }
  return "a process of another user";
}

}  // namespace airt::head::internal
