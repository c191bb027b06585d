// ObjectPuller: an Asio io_context on a thread of its own holds one pooled PeerConnection per
// peer node and every object on its way (ObjectTransfer, joined by every batch that wants it).
// Callers post their batches to it and wait on the batch's condition variable.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "common/asio.h"
#include "objectstore/internal/peer_connection.h"
#include "objectstore/transfer.h"

namespace airt::objectstore {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using internal::ObjectTransfer;
using internal::PeerConnection;

namespace {
// How long a batch waits for an object another client of the store is creating before it asks
// for it again itself (that client may have given up and aborted it).
constexpr auto kElsewhereSlice = std::chrono::milliseconds(100);
// Connections a request may be sent on: the first, and one redial after a break.
constexpr int kMaxAttempts = 2;
}  // namespace

struct PullBatch::State {
  std::vector<PullRequest> wanted;
  int64_t timeout_ms = -1;
  std::optional<Clock::time_point> deadline;

  std::mutex mu;
  std::condition_variable cv;
  std::vector<Status> results;  // guarded by mu
  std::vector<bool> pending;    // guarded by mu
  size_t remaining = 0;         // guarded by mu

  std::unique_ptr<asio::steady_timer> timer;  // io thread
};

class ObjectPuller::Impl : public internal::PeerEvents {
 public:
  explicit Impl(StoreClient* local) : local_(local), work_(asio::make_work_guard(io_)) {
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Impl() override {
    if (thread_.joinable()) Shutdown();
  }

  StoreClient* local() const { return local_; }
  bool shutting_down() const { return shutting_down_.load(); }

  // Any thread: asks for state->wanted[i] for each of `indices` (each marked pending already).
  void Enqueue(std::shared_ptr<PullBatch::State> state, std::vector<size_t> indices) {
    asio::post(io_, [this, state = std::move(state), indices = std::move(indices)] {
      DoEnqueue(state, indices);
    });
  }
  // Any thread: the batch's caller gave up.
  void Abandon(std::shared_ptr<PullBatch::State> state) {
    asio::post(io_, [this, state = std::move(state)] {
      DoAbandon(state, [](const PullRequest&) { return Cancelled("the pull was given up"); });
    });
  }

  // Fails everything in flight with kCancelled, closes the connections, stops the thread.
  void Shutdown() {
    shutting_down_ = true;
    asio::post(io_, [this] {
      for (auto& [address, peer] : peers_) {
        for (auto& transfer : peer->Close()) Resolve(*transfer, Cancelled("the puller stopped"));
      }
      peers_.clear();
      for (auto& [id, transfer] : transfers_) Resolve(*transfer, Cancelled("the puller stopped"));
      transfers_.clear();
      for (auto& weak : armed_) {
        if (auto state = weak.lock()) state->timer.reset();
      }
      armed_.clear();
      work_.reset();
      io_.stop();
    });
    thread_.join();
  }

  PullerSnapshot Snapshot() const {
    std::lock_guard<std::mutex> lock(counters_mu_);
    PullerSnapshot s = counters_;
    for (const auto& [address, peer] : peer_counters_) s.peers.push_back(peer);
    return s;
  }

  // PeerEvents, io thread.
  void Finished(PeerConnection* peer, const std::shared_ptr<ObjectTransfer>& transfer,
                Status status, uint64_t bytes) override {
    {
      std::lock_guard<std::mutex> lock(counters_mu_);
      PullerSnapshot::Peer& p = peer_counters_[peer->address()];
      p.in_flight = peer->queued();
      if (status.ok()) {
        ++counters_.objects_pulled;
        counters_.bytes_pulled += bytes;
        ++p.objects_pulled;
      } else if (status.code() != Code::kAlreadyExists) {
        ++counters_.objects_failed;
      }
    }
    Forget(transfer);
    if (!status.ok() && status.code() != Code::kAlreadyExists) {
      status = Status(status.code(), "object " + transfer->id.Hex() + " from node " +
                                         transfer->address + ": " + status.message());
    }
    Resolve(*transfer, status);
  }

  void Broken(PeerConnection* peer, const Status& error,
              std::vector<std::shared_ptr<ObjectTransfer>> unanswered, bool ask_again) override {
    std::string address = peer->address();
    DropPeer(peer);
    bool malformed = error.code() == Code::kInvalidArgument;
    for (size_t i = 0; i < unanswered.size(); ++i) {
      std::shared_ptr<ObjectTransfer>& transfer = unanswered[i];
      if (transfer->waiters.empty()) {
        Forget(transfer);
        continue;
      }
      // The object whose reply was malformed fails; the others are asked again on a fresh
      // connection once. So are those of a pooled connection found dead as it was reused.
      bool retry = ask_again && transfer->attempts < kMaxAttempts && !(malformed && i == 0);
      if (retry) {
        PeerFor(address).Send(transfer);
        continue;
      }
      Forget(transfer);
      {
        std::lock_guard<std::mutex> lock(counters_mu_);
        ++counters_.objects_failed;
      }
      Resolve(*transfer, Status(error.code(), "object " + transfer->id.Hex() + " from node " +
                                                  address + ": " + error.message()));
    }
  }

 private:
  void DoEnqueue(const std::shared_ptr<PullBatch::State>& state,
                 const std::vector<size_t>& indices) {
    for (size_t i : indices) {
      const PullRequest& request = state->wanted[i];
      if (shutting_down_) {
        ResolveOne(*state, i, Cancelled("the puller stopped"));
        continue;
      }
      if (local_->Contains(request.id)) {
        ResolveOne(*state, i, Status::Ok());
        continue;
      }
      if (auto valid = internal::SplitAddress(request.address); !valid.ok()) {
        ResolveOne(*state, i, valid.status().WithContext("object " + request.id.Hex()));
        continue;
      }
      auto [it, added] = transfers_.try_emplace(request.id);
      if (!added) {
        it->second->waiters.emplace_back(state, i);
        std::lock_guard<std::mutex> lock(counters_mu_);
        ++counters_.requests_joined;
        continue;
      }
      it->second = std::make_shared<ObjectTransfer>();
      it->second->id = request.id;
      it->second->address = request.address;
      it->second->waiters.emplace_back(state, i);
      PeerConnection& peer = PeerFor(request.address);
      peer.Send(it->second);
      std::lock_guard<std::mutex> lock(counters_mu_);
      ++counters_.objects_requested;
      peer_counters_[request.address].in_flight = peer.queued();
    }
    ArmDeadline(state);
  }

  // (Re)starts the wait for the batch's deadline; a batch asked again after it had finished (see
  // PullBatch::Wait) gets its timer back.
  void ArmDeadline(const std::shared_ptr<PullBatch::State>& state) {
    if (!state->deadline || shutting_down_) return;
    if (!state->timer) {
      state->timer = std::make_unique<asio::steady_timer>(io_);
      std::erase_if(armed_, [](const auto& weak) { return weak.expired(); });
      armed_.push_back(state);
    }
    state->timer->expires_at(*state->deadline);  // cancels an earlier wait
    std::weak_ptr<PullBatch::State> weak = state;
    state->timer->async_wait([this, weak](boost::system::error_code ec) {
      auto state = weak.lock();
      if (ec || !state) return;
      std::string within = std::to_string(state->timeout_ms);
      DoAbandon(state, [&](const PullRequest& request) {
        return DeadlineExceeded("object " + request.id.Hex() + " from node " + request.address +
                                " did not arrive within " + within + " ms");
      });
    });
  }

  // Resolves every object of `state` still pending with why(request), stops waiting for them,
  // and closes the connections on which nobody waits for anything any more.
  template <typename Why>
  void DoAbandon(const std::shared_ptr<PullBatch::State>& state, Why why) {
    std::vector<size_t> open;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      for (size_t i = 0; i < state->wanted.size(); ++i) {
        if (state->pending[i]) open.push_back(i);
      }
    }
    // Stop waiting first, and close what nobody wants any more, so that once the caller sees
    // its results the connections are as they will stay.
    std::vector<std::string> touched;
    for (size_t i : open) {
      auto it = transfers_.find(state->wanted[i].id);
      if (it == transfers_.end()) continue;
      auto& waiters = it->second->waiters;
      std::erase_if(waiters, [&](const auto& w) { return w.first == state; });
      if (waiters.empty()) touched.push_back(it->second->address);
    }
    for (const std::string& address : touched) {
      auto peer = peers_.find(address);
      if (peer == peers_.end() || peer->second->AnyoneWaiting()) continue;
      std::shared_ptr<PeerConnection> closing = peer->second;
      for (auto& transfer : closing->Close()) Forget(transfer);
      DropPeer(closing.get());
    }
    {
      std::lock_guard<std::mutex> lock(counters_mu_);
      counters_.objects_failed += open.size();
    }
    for (size_t i : open) ResolveOne(*state, i, why(state->wanted[i]));
  }

  PeerConnection& PeerFor(const std::string& address) {
    auto& slot = peers_[address];
    if (!slot) {
      slot = std::make_shared<PeerConnection>(io_, address, local_, this);
      {
        std::lock_guard<std::mutex> lock(counters_mu_);
        ++counters_.connections_dialled;
        ++counters_.connections_open;
        PullerSnapshot::Peer& p = peer_counters_[address];
        p.address = address;
        p.connected = true;
        ++p.dials;
      }
      slot->Dial();
    }
    return *slot;
  }

  void DropPeer(PeerConnection* peer) {
    auto it = peers_.find(peer->address());
    if (it == peers_.end() || it->second.get() != peer) return;
    std::lock_guard<std::mutex> lock(counters_mu_);
    --counters_.connections_open;
    ++counters_.connections_dropped;
    PullerSnapshot::Peer& p = peer_counters_[peer->address()];
    p.connected = false;
    p.in_flight = 0;
    // Erased last: `peer` may be the connection this drops.
    peers_.erase(it);
  }

  void Forget(const std::shared_ptr<ObjectTransfer>& transfer) {
    auto it = transfers_.find(transfer->id);
    if (it != transfers_.end() && it->second == transfer) transfers_.erase(it);
  }

  void Resolve(ObjectTransfer& transfer, const Status& status) {
    auto waiters = std::move(transfer.waiters);
    transfer.waiters.clear();
    for (auto& [state, index] : waiters) ResolveOne(*state, index, status);
  }

  void ResolveOne(PullBatch::State& state, size_t index, const Status& status) {
    bool done = false;
    {
      std::lock_guard<std::mutex> lock(state.mu);
      if (!state.pending[index]) return;
      state.pending[index] = false;
      state.results[index] = status;
      done = --state.remaining == 0;
      if (done) state.cv.notify_all();
    }
    if (done && state.timer) state.timer->cancel();
  }

  StoreClient* local_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::atomic<bool> shutting_down_{false};
  // Io thread.
  std::map<std::string, std::shared_ptr<PeerConnection>> peers_;
  std::unordered_map<ObjectId, std::shared_ptr<ObjectTransfer>> transfers_;
  std::vector<std::weak_ptr<PullBatch::State>> armed_;  // batches with a deadline timer

  mutable std::mutex counters_mu_;
  PullerSnapshot counters_;                                    // guarded by counters_mu_
  std::map<std::string, PullerSnapshot::Peer> peer_counters_;  // guarded by counters_mu_
  std::thread thread_;
};

ObjectPuller::ObjectPuller(StoreClient* local) : impl_(std::make_shared<Impl>(local)) {}

ObjectPuller::~ObjectPuller() { impl_->Shutdown(); }

std::unique_ptr<PullBatch> ObjectPuller::Start(std::span<const PullRequest> wanted,
                                               int64_t timeout_ms) {
  auto state = std::make_shared<PullBatch::State>();
  state->wanted.assign(wanted.begin(), wanted.end());
  state->timeout_ms = timeout_ms;
  if (timeout_ms >= 0) state->deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  state->results.assign(wanted.size(), Status::Ok());
  state->pending.assign(wanted.size(), false);
  std::vector<size_t> remote;
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (impl_->local()->Contains(wanted[i].id)) continue;  // here already: Ok
    state->pending[i] = true;
    remote.push_back(i);
  }
  state->remaining = remote.size();
  if (!remote.empty()) impl_->Enqueue(state, std::move(remote));
  return std::unique_ptr<PullBatch>(new PullBatch(impl_, std::move(state)));
}

std::vector<Status> ObjectPuller::PullEach(std::span<const PullRequest> wanted,
                                           int64_t timeout_ms) {
  return Start(wanted, timeout_ms)->Wait();
}

Status ObjectPuller::Pull(const std::string& address, std::span<const ObjectId> ids,
                          int64_t timeout_ms) {
  std::vector<PullRequest> wanted;
  wanted.reserve(ids.size());
  for (const ObjectId& id : ids) wanted.push_back(PullRequest{id, address});
  for (Status& s : PullEach(wanted, timeout_ms)) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

PullerSnapshot ObjectPuller::Snapshot() const { return impl_->Snapshot(); }

PullBatch::PullBatch(std::shared_ptr<ObjectPuller::Impl> puller, std::shared_ptr<State> state)
    : puller_(std::move(puller)), state_(std::move(state)) {}

PullBatch::~PullBatch() {
  if (!Done() && !puller_->shutting_down()) puller_->Abandon(state_);
}

bool PullBatch::Done() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->remaining == 0;
}

const std::vector<Status>& PullBatch::Wait() {
  if (waited_) return state_->results;
  StoreClient* local = puller_->local();
  for (;;) {
    std::vector<size_t> elsewhere;
    {
      std::unique_lock<std::mutex> lock(state_->mu);
      state_->cv.wait(lock, [&] { return state_->remaining == 0; });
      for (size_t i = 0; i < state_->results.size(); ++i) {
        if (state_->results[i].code() == Code::kAlreadyExists) elsewhere.push_back(i);
      }
    }
    if (elsewhere.empty()) break;
    // Another client of the store is creating these here: wait a while for its seal (polling the
    // shared index, no round trip: a blocking Get would hold the client's socket, which the
    // puller's thread needs), then ask for what has not come.
    auto until = Clock::now() + kElsewhereSlice;
    if (state_->deadline) until = std::min(until, *state_->deadline);
    auto missing = [&] {
      return std::any_of(elsewhere.begin(), elsewhere.end(),
                         [&](size_t i) { return !local->Contains(state_->wanted[i].id); });
    };
    while (missing() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    bool late = state_->deadline && Clock::now() >= *state_->deadline;
    std::vector<size_t> again;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      for (size_t i : elsewhere) {
        const PullRequest& request = state_->wanted[i];
        if (local->Contains(request.id)) {
          state_->results[i] = Status::Ok();
        } else if (late || puller_->shutting_down()) {
          state_->results[i] =
              DeadlineExceeded("object " + request.id.Hex() + " from node " + request.address +
                               " was still being created here by another client at the deadline");
        } else {
          state_->pending[i] = true;
          ++state_->remaining;
          again.push_back(i);
        }
      }
    }
    if (again.empty()) break;
    puller_->Enqueue(state_, std::move(again));
  }
  waited_ = true;
  return state_->results;
}

}  // namespace airt::objectstore
