#include "collective/services.h"

#include <unistd.h>

#include "airt/driver.h"
#include "airt/internal/collective_support.h"
#include "airt/exceptions.h"

namespace airt::collective {
namespace {

constexpr const char* kNamespace = "airt_collective";

// airt::internal's calls throw; a Status comes back here.
template <typename Fn>
auto Catching(Fn&& fn) -> Result<decltype(fn())> {
  try {
    return fn();
  } catch (const InvalidArgumentError& e) {
    return InvalidArgument(e.what());
  } catch (const TimeoutError& e) {
    return DeadlineExceeded(e.what());
  } catch (const std::exception& e) {
    return Unavailable(e.what());
  }
}

}  // namespace

Status HeadKv::Put(const std::string& key, const std::string& value) {
  return Catching([&] { return internal::KvPut(kNamespace, key, value, /*overwrite=*/true); })
      .status();
}

Result<std::optional<std::string>> HeadKv::Get(const std::string& key) {
  return Catching([&] { return internal::KvGet(kNamespace, key); });
}

Result<uint32_t> HeadKv::DeletePrefix(const std::string& prefix) {
  return Catching([&] { return internal::KvDeletePrefix(kNamespace, prefix); });
}

void CoreWorkerProgress::Record(const std::string& group, std::optional<uint64_t> entered) {
  try {
    internal::RecordCollectiveProgress(group, entered);
  } catch (const std::exception&) {
    // After Shutdown there is nobody to ask this process anyway.
  }
}

Result<std::optional<ProgressBoard::Progress>> CoreWorkerProgress::Read(
    const RankInfo& peer, const std::string& group, std::chrono::milliseconds timeout) {
  return Catching([&]() -> std::optional<Progress> {
    auto got = internal::QueryCollectiveProgress(peer.progress_address, group, timeout.count());
    if (!got) return std::nullopt;
    return Progress{got->first, got->second};
  });
}

Result<CommunicatorServices> ClusterServices(RendezvousKv& kv, ProgressBoard& progress) {
  CommunicatorServices s;
  s.kv = &kv;
  s.progress = &progress;
  Status got = Catching([&] {
                 s.self.node = internal::NodeAddress();
                 s.self.progress_address = internal::CollectiveProgressAddress();
                 s.key_prefix = internal::JobIdHex() + "/";
                 return 0;
               }).status();
  if (!got.ok()) {
    return Unavailable("collective groups need airt::Init (a driver, or a task or actor): " +
                       got.message());
  }
  s.self.pid = ::getpid();
  s.host = s.self.node.substr(0, s.self.node.rfind(':'));
  return s;
}

Status MemoryKv::Put(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  rows_[key] = value;
  return Status::Ok();
}

Result<std::optional<std::string>> MemoryKv::Get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rows_.find(key);
  if (it == rows_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

Result<uint32_t> MemoryKv::DeletePrefix(const std::string& prefix) {
  if (prefix.empty()) return InvalidArgument("deleting by an empty prefix");
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t n = 0;
  for (auto it = rows_.lower_bound(prefix); it != rows_.end() && it->first.starts_with(prefix);) {
    it = rows_.erase(it);
    ++n;
  }
  return n;
}

size_t MemoryKv::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rows_.size();
}

void MemoryProgress::View::Record(const std::string& group, std::optional<uint64_t> entered) {
  std::lock_guard<std::mutex> lock(board_.mu_);
  if (entered) {
    board_.entered_[{address_, group}] = Progress{*entered, false};
  } else if (auto it = board_.entered_.find({address_, group}); it != board_.entered_.end()) {
    it->second.left = true;
  }
}

Result<std::optional<ProgressBoard::Progress>> MemoryProgress::View::Read(
    const RankInfo& peer, const std::string& group, std::chrono::milliseconds) {
  std::lock_guard<std::mutex> lock(board_.mu_);
  auto it = board_.entered_.find({peer.progress_address, group});
  if (it == board_.entered_.end()) return std::optional<Progress>();
  return std::optional<Progress>(it->second);
}

}  // namespace airt::collective
