#include "objectstore/internal/store_loop.h"

#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "common/logging.h"
#include "objectstore/internal/unix_socket.h"

namespace airt::objectstore::internal {
namespace {

constexpr uint64_t kListenerKey = 0;
constexpr uint64_t kWakeKey = ~uint64_t{0};
constexpr size_t kMaxPendingOutput = 64u << 20;

Status Truncated(std::string_view what) {
  return InvalidArgument(std::string(what) + " frame is truncated or has trailing bytes");
}

// Reads `u32 n, n bytes` of a primary copy's owner; false when truncated or over kMaxOwnerBytes.
bool ReadOwner(WireReader& r, std::string_view* owner) {
  uint32_t n;
  return r.Get(&n) && n <= kMaxOwnerBytes && r.GetBytes(n, owner);
}

}  // namespace

Result<std::unique_ptr<StoreLoop>> StoreLoop::Start(StoreOptions options,
                                                    std::unique_ptr<SpillStorage> spill) {
  if (options.socket_path.empty()) return InvalidArgument("the store needs a socket path");
  if (options.capacity_bytes == 0) return InvalidArgument("the store's capacity must be > 0");
  if (options.max_objects == 0 || options.max_objects > (1ull << 30)) {
    return InvalidArgument("max_objects must be in [1, 2^30]");
  }
  if (options.max_clients == 0 || options.max_clients > 4096) {
    return InvalidArgument("max_clients must be in [1, 4096]");
  }
  Layout layout = Layout::Compute(options.capacity_bytes, options.max_objects, options.max_clients,
                                  options.pin_slots_per_client);
  std::unique_ptr<FallbackFiles> fallback;
  if (!options.fallback_dir.empty()) {
    // Clients open its files by path, from their own working directories.
    std::error_code ec;
    std::filesystem::path absolute = std::filesystem::absolute(options.fallback_dir, ec);
    if (ec) return ErrnoStatus("the fallback folder " + options.fallback_dir, ec.value());
    options.fallback_dir = absolute.lexically_normal().string();
    AIRT_ASSIGN_OR_RETURN(fallback,
                          FallbackFiles::Open(options.fallback_dir, options.fallback_limit_bytes));
  }
  AIRT_ASSIGN_OR_RETURN(ArenaMapping arena, ArenaMapping::Create(layout));
  AIRT_ASSIGN_OR_RETURN(UniqueFd listener, ListenUnix(options.socket_path));
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return ErrnoStatus("eventfd", errno);
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) return ErrnoStatus("epoll_create1", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerKey;
  ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, listener.get(), &ev);
  ev.data.u64 = kWakeKey;
  ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, wake.get(), &ev);
  auto loop = std::unique_ptr<StoreLoop>(
      new StoreLoop(std::move(options), std::move(arena), std::move(listener), std::move(wake),
                    std::move(epoll), std::move(spill), std::move(fallback)));
  loop->thread_ = std::thread([raw = loop.get()] { raw->Run(); });
  return loop;
}

StoreLoop::StoreLoop(StoreOptions options, ArenaMapping arena, UniqueFd listener, UniqueFd wake,
                     UniqueFd epoll, std::unique_ptr<SpillStorage> spill,
                     std::unique_ptr<FallbackFiles> fallback)
    : options_(std::move(options)),
      arena_(std::move(arena)),
      listener_(std::move(listener)),
      wake_(std::move(wake)),
      epoll_(std::move(epoll)),
      table_(&arena_, std::move(spill), options_.max_objects, std::move(fallback)),
      slot_in_use_(options_.max_clients, false) {
  if (options_.prefault) populator_ = std::make_unique<BackgroundPopulator>(&arena_);
}

StoreLoop::~StoreLoop() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  populator_.reset();
  ::unlink(options_.socket_path.c_str());
}

StoreStats StoreLoop::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return StatsLocked();
}

StoreStats StoreLoop::StatsLocked() const {
  StoreStats s = table_.Stats();
  for (bool used : slot_in_use_) s.num_clients += used ? 1 : 0;
  s.mapped_bytes = arena_.size();
  s.prefault_target_bytes = populator_ ? BackgroundPopulator::BytesToPopulate(*arena_.header()) : 0;
  s.prefaulted_bytes = populator_ ? populator_->done_bytes() : 0;
  if (options_.transfer_counters) {
    s.transfer_objects_served =
        options_.transfer_counters->objects_served.load(std::memory_order_relaxed);
    s.transfer_bytes_served =
        options_.transfer_counters->bytes_served.load(std::memory_order_relaxed);
  }
  return s;
}

void StoreLoop::Run() {
  epoll_event events[64];
  auto last_activity = Clock::now() - std::chrono::hours(1);
  const auto spin = std::chrono::microseconds(options_.poll_spin_us);
  for (;;) {
    int timeout = NextTimeoutMs();
    if (Clock::now() - last_activity < spin) timeout = 0;  // a reply's follow-up is likely near
    int n = ::epoll_wait(epoll_.get(), events, 64, timeout);
    if (n < 0 && errno != EINTR) {
      AIRT_LOG(ERROR) << "epoll_wait: " << ErrnoStatus("epoll_wait", errno).ToString();
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < n; ++i) {
      uint64_t key = events[i].data.u64;
      if (key == kWakeKey) return;
      if (key == kListenerKey) {
        Accept();
        continue;
      }
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) OnReadable(key);
      if ((events[i].events & EPOLLOUT) && sessions_.count(key)) Flush(key);
    }
    if (n > 0) last_activity = Clock::now();
    ExpireWaits();
  }
}

void StoreLoop::Accept() {
  for (;;) {
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EINTR) {
        AIRT_LOG(WARNING) << ErrnoStatus("accept", errno).ToString();
      }
      return;
    }
    uint64_t id = next_session_++;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
    sessions_[id].fd.Reset(fd);
  }
}

void StoreLoop::OnReadable(uint64_t session_id) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return;
  Session& s = it->second;
  char buf[64 * 1024];
  for (;;) {
    ssize_t r = ::recv(s.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (r > 0) {
      s.in.append(buf, static_cast<size_t>(r));
      if (static_cast<size_t>(r) < sizeof(buf)) break;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) break;
    Close(session_id);  // EOF or error: the client is gone
    return;
  }
  size_t consumed = 0;
  while (!s.closing && s.in.size() - consumed >= kHeaderSize) {
    FrameHeader h;
    Status header = DecodeHeader(s.in.data() + consumed, &h);
    if (!header.ok()) {
      s.closing = true;  // the stream cannot be resynchronised
      s.in.clear();
      Reply(session_id, h.request_id, header);  // flushes, then closes
      return;
    }
    if (s.in.size() - consumed < kHeaderSize + h.body_size) break;
    std::string body = s.in.substr(consumed + kHeaderSize, h.body_size);
    consumed += kHeaderSize + h.body_size;
    HandleFrame(session_id, h, body);
    if (!sessions_.count(session_id)) return;
  }
  s.in.erase(0, consumed);
  if (s.closing) {
    s.in.clear();
    Flush(session_id);  // may close the session
  }
}

void StoreLoop::Reply(uint64_t session_id, uint32_t request_id, const Status& status,
                      std::string_view payload) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return;
  std::string body = ReplyBody(status);
  body.append(payload);
  it->second.out += MakeFrame(MessageType::kReply, 0, request_id, body);
  Flush(session_id);
}

void StoreLoop::Flush(uint64_t session_id) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return;
  Session& s = it->second;
  size_t sent = 0;
  while (sent < s.out.size()) {
    ssize_t n =
        ::send(s.fd.get(), s.out.data() + sent, s.out.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    Close(session_id);
    return;
  }
  s.out.erase(0, sent);
  if (s.out.size() > kMaxPendingOutput) {
    AIRT_LOG(WARNING) << "client in slot " << s.client_slot << " reads no replies; dropping it";
    Close(session_id);
    return;
  }
  if (s.out.empty() && s.closing) {
    Close(session_id);
    return;
  }
  epoll_event ev{};
  ev.events = s.out.empty() ? uint32_t{EPOLLIN} : uint32_t{EPOLLIN | EPOLLOUT};
  ev.data.u64 = session_id;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, s.fd.get(), &ev);
}

void StoreLoop::Close(uint64_t session_id) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return;
  if (it->second.client_slot >= 0) {
    auto slot = static_cast<uint32_t>(it->second.client_slot);
    table_.OnClientGone(slot);
    slot_in_use_[slot] = false;
  }
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
  sessions_.erase(it);
  std::vector<uint64_t> orphaned;
  for (const auto& [wait_id, wait] : waits_) {
    if (wait.session == session_id) orphaned.push_back(wait_id);
  }
  for (uint64_t wait_id : orphaned) FinishWait(wait_id);  // replies go nowhere
}

void StoreLoop::HandleFrame(uint64_t session_id, const FrameHeader& h, std::string_view body) {
  Session& s = sessions_.at(session_id);
  WireReader r(body);
  auto type = static_cast<MessageType>(h.type);
  if (type == MessageType::kHello) return HandleHello(session_id, h, r);
  if (s.client_slot < 0) {
    return Reply(session_id, h.request_id, FailedPrecondition("the first message must be Hello"));
  }
  auto slot = static_cast<uint32_t>(s.client_slot);
  ObjectId id;
  switch (type) {
    case MessageType::kCreate: {
      uint64_t data_size, metadata_size;
      uint8_t flags;
      if (!r.GetId(&id) || !r.Get(&data_size) || !r.Get(&metadata_size) || !r.Get(&flags)) {
        return Reply(session_id, h.request_id, Truncated("Create"));
      }
      std::string_view owner;
      if (r.remaining() != 0 && !ReadOwner(r, &owner)) {
        return Reply(session_id, h.request_id, Truncated("Create"));
      }
      Result<uint64_t> offset = table_.Create(id, data_size, metadata_size,
                                              (flags & kCreateSecondary) != 0, slot,
                                              std::string(owner));
      std::string payload;
      if (offset.ok()) WireWriter(&payload).Put(*offset);
      return Reply(session_id, h.request_id, offset.status(), payload);
    }
    case MessageType::kSeal:
    case MessageType::kAbort: {
      bool seal = type == MessageType::kSeal;
      Status status = (!r.GetId(&id) || r.remaining() != 0) ? Truncated(seal ? "Seal" : "Abort")
                      : seal                                ? table_.Seal(id, slot)
                                                            : table_.Abort(id, slot);
      if (seal && status.ok()) OnSealed(id);
      return Reply(session_id, h.request_id, status);
    }
    case MessageType::kDelete: {
      uint32_t n;
      if (!r.Get(&n) || r.remaining() != uint64_t{n} * ObjectId::kSize) {
        return Reply(session_id, h.request_id, Truncated("Delete"));
      }
      Status first;
      for (uint32_t i = 0; i < n; ++i) {
        r.GetId(&id);
        Status st = table_.Delete(id);
        if (first.ok() && !st.ok()) first = st;
      }
      return Reply(session_id, h.request_id, first);
    }
    case MessageType::kDeleteJob: {
      std::string_view job;
      if (!r.GetBytes(JobId::kSize, &job) || r.remaining() != 0) {
        return Reply(session_id, h.request_id, Truncated("DeleteJob"));
      }
      uint64_t deleted =
          table_.DeleteJob(JobId::FromRaw(reinterpret_cast<const uint8_t*>(job.data())));
      std::string payload;
      WireWriter(&payload).Put(deleted);
      return Reply(session_id, h.request_id, Status::Ok(), payload);
    }
    case MessageType::kListPrimaries: {
      if (r.remaining() != 0) return Reply(session_id, h.request_id, Truncated("ListPrimaries"));
      bool more = false;
      std::vector<PrimaryCopy> primaries = table_.Primaries(kMaxPrimariesReply, &more);
      std::string payload;
      WireWriter w(&payload);
      w.Put(static_cast<uint8_t>(more ? 1 : 0));
      w.Put(static_cast<uint32_t>(primaries.size()));
      for (const PrimaryCopy& p : primaries) {
        w.PutId(p.id);
        w.Put(p.size);
        w.Put(static_cast<uint32_t>(p.owner.size()));
        w.PutBytes(p.owner);
      }
      return Reply(session_id, h.request_id, Status::Ok(), payload);
    }
    case MessageType::kMakePrimary: {
      std::string_view owner;
      if (!r.GetId(&id) || !ReadOwner(r, &owner) || r.remaining() != 0) {
        return Reply(session_id, h.request_id, Truncated("MakePrimary"));
      }
      return Reply(session_id, h.request_id, table_.MakePrimary(id, std::string(owner)));
    }
    case MessageType::kWait: return HandleWait(session_id, h, r);
    case MessageType::kReleased:
      if (r.GetId(&id) && r.remaining() == 0) table_.OnReleased(id);
      return;
    case MessageType::kStats: {
      std::string payload;
      WireWriter w(&payload);
      PutStats(&w, StatsLocked());
      return Reply(session_id, h.request_id, Status::Ok(), payload);
    }
    default:
      return Reply(session_id, h.request_id,
                   InvalidArgument("unknown message type " + std::to_string(h.type)));
  }
}

void StoreLoop::HandleHello(uint64_t session_id, const FrameHeader& h, WireReader r) {
  Session& s = sessions_.at(session_id);
  uint32_t version;
  int32_t pid;
  if (!r.Get(&version) || !r.Get(&pid) || r.remaining() != 0) {
    return Reply(session_id, h.request_id, Truncated("Hello"));
  }
  if (s.client_slot >= 0) {
    return Reply(session_id, h.request_id, FailedPrecondition("Hello sent twice"));
  }
  if (version != kProtocolVersion) {
    Reply(session_id, h.request_id,
          FailedPrecondition("store protocol version " + std::to_string(kProtocolVersion) +
                             ", client speaks " + std::to_string(version)));
    s.closing = true;
    return;
  }
  int32_t slot = -1;
  for (uint32_t i = 0; i < slot_in_use_.size(); ++i) {
    if (!slot_in_use_[i]) {
      slot = static_cast<int32_t>(i);
      break;
    }
  }
  if (slot < 0 || !s.out.empty()) {
    Reply(session_id, h.request_id,
          slot < 0 ? ResourceExhausted("the store serves its maximum of " +
                                       std::to_string(slot_in_use_.size()) + " clients")
                   : FailedPrecondition("Hello must be the first request"));
    s.closing = true;
    return;
  }
  table_.ClearPinTable(static_cast<uint32_t>(slot));
  std::string body = ReplyBody(Status::Ok());
  WireWriter w(&body);
  w.Put(static_cast<uint32_t>(slot));
  w.Put(arena_.size());
  w.Put(static_cast<uint32_t>(options_.fallback_dir.size()));
  w.PutBytes(options_.fallback_dir);
  Status sent =
      SendWithFd(s.fd.get(), MakeFrame(MessageType::kReply, 0, h.request_id, body), arena_.fd());
  if (!sent.ok()) {
    Close(session_id);
    return;
  }
  s.client_slot = slot;
  slot_in_use_[static_cast<size_t>(slot)] = true;
}

void StoreLoop::HandleWait(uint64_t session_id, const FrameHeader& h, WireReader r) {
  int64_t timeout_ms;
  uint32_t n;
  if (!r.Get(&timeout_ms) || !r.Get(&n) || r.remaining() != uint64_t{n} * ObjectId::kSize) {
    return Reply(session_id, h.request_id, Truncated("Wait"));
  }
  uint64_t wait_id = next_wait_++;
  PendingWait wait{session_id, h.request_id, {}, {}, 0, {}, false};
  wait.ids.resize(n);
  wait.codes.resize(n);
  // What this Wait restored is not spilled again to restore the rest (which then go to fallback
  // memory if the arena cannot hold them all): the reply finds them all readable.
  std::unordered_set<ObjectId> readied;
  for (uint32_t i = 0; i < n; ++i) {
    r.GetId(&wait.ids[i]);
    Status st = table_.MakeReadable(wait.ids[i], &readied);
    if (st.ok()) readied.insert(wait.ids[i]);
    wait.codes[i] = static_cast<uint8_t>(st.code());
    if (st.code() == Code::kNotFound) {
      ++wait.missing;
      waiters_.emplace(wait.ids[i], wait_id);
    } else if (!st.ok()) {
      for (uint32_t j = 0; j <= i; ++j) {
        auto range = waiters_.equal_range(wait.ids[j]);
        for (auto it = range.first; it != range.second;) {
          it = it->second == wait_id ? waiters_.erase(it) : std::next(it);
        }
      }
      return Reply(session_id, h.request_id, st);
    }
  }
  if (timeout_ms > 0) {
    wait.has_deadline = true;
    wait.deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    deadlines_.emplace(wait.deadline, wait_id);
  }
  bool done = wait.missing == 0 || timeout_ms == 0;
  waits_.emplace(wait_id, std::move(wait));
  if (done) FinishWait(wait_id);
}

void StoreLoop::OnSealed(const ObjectId& id) {
  auto range = waiters_.equal_range(id);
  std::vector<uint64_t> woken;
  for (auto it = range.first; it != range.second; ++it) woken.push_back(it->second);
  waiters_.erase(range.first, range.second);
  for (uint64_t wait_id : woken) {
    auto it = waits_.find(wait_id);
    if (it == waits_.end()) continue;
    PendingWait& wait = it->second;
    Status st = table_.MakeReadable(id);
    for (size_t i = 0; i < wait.ids.size(); ++i) {
      if (wait.ids[i] == id && wait.codes[i] == static_cast<uint8_t>(Code::kNotFound)) {
        wait.codes[i] = static_cast<uint8_t>(st.code());
        --wait.missing;
      }
    }
    if (wait.missing == 0) FinishWait(wait_id);
  }
}

void StoreLoop::FinishWait(uint64_t wait_id) {
  auto it = waits_.find(wait_id);
  if (it == waits_.end()) return;
  PendingWait wait = std::move(it->second);
  waits_.erase(it);
  std::string payload;
  WireWriter w(&payload);
  w.Put(static_cast<uint32_t>(wait.ids.size()));
  for (size_t i = 0; i < wait.ids.size(); ++i) {
    if (wait.codes[i] == static_cast<uint8_t>(Code::kNotFound)) {
      wait.codes[i] = static_cast<uint8_t>(Code::kDeadlineExceeded);
      auto range = waiters_.equal_range(wait.ids[i]);
      for (auto wit = range.first; wit != range.second;) {
        wit = wit->second == wait_id ? waiters_.erase(wit) : std::next(wit);
      }
    }
    w.Put(wait.codes[i]);
  }
  if (wait.has_deadline) {
    auto range = deadlines_.equal_range(wait.deadline);
    for (auto dit = range.first; dit != range.second; ++dit) {
      if (dit->second == wait_id) {
        deadlines_.erase(dit);
        break;
      }
    }
  }
  Reply(wait.session, wait.request_id, Status::Ok(), payload);
}

void StoreLoop::ExpireWaits() {
  auto now = Clock::now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    FinishWait(deadlines_.begin()->second);
  }
}

int StoreLoop::NextTimeoutMs() const {
  if (deadlines_.empty()) return -1;
  auto left = deadlines_.begin()->first - Clock::now();
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms < 0 ? 0 : static_cast<int>(ms);
}

}  // namespace airt::objectstore::internal
