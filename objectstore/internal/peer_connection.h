// One pooled TCP connection from an ObjectPuller to one peer node's TransferServer: requests are
// written as they are queued (pipelined, never waiting for a reply) and the replies read in
// order, each object straight into an object created in the local store. Confined to the
// puller's io thread; it reports to the puller through PeerEvents.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/asio.h"
#include "common/ids.h"
#include "common/status.h"
#include "objectstore/object_store.h"
#include "objectstore/transfer.h"

namespace airt::objectstore::internal {

// One object this puller is fetching, shared by the batches that wait for it (each waiter is a
// batch and the object's index in it). Io thread only.
struct ObjectTransfer {
  ObjectId id;
  std::string address;
  int attempts = 0;  // connections it was queued on
  std::vector<std::pair<std::shared_ptr<PullBatch::State>, size_t>> waiters;
};

class PeerConnection;

// What a connection tells its puller, on the io thread.
class PeerEvents {
 public:
  virtual ~PeerEvents() = default;
  // `transfer` left `peer`: sealed here (Ok, `bytes` received), failed, or kAlreadyExists when
  // another client of the store was creating it (its bytes were read and dropped).
  virtual void Finished(PeerConnection* peer, const std::shared_ptr<ObjectTransfer>& transfer,
                        Status status, uint64_t bytes) = 0;
  // `peer` is closed after `error`. `unanswered` are the requests queued on it that got no
  // complete reply, in order. `ask_again`: they may be sent again on a fresh connection (the
  // pooled connection was found broken as it was reused, before any reply; or a reply was
  // malformed, and then the first of them fails).
  virtual void Broken(PeerConnection* peer, const Status& error,
                      std::vector<std::shared_ptr<ObjectTransfer>> unanswered, bool ask_again) = 0;
};

// "host:port" split; kInvalidArgument naming the address otherwise.
Result<std::pair<std::string, std::string>> SplitAddress(const std::string& address);

class PeerConnection : public std::enable_shared_from_this<PeerConnection> {
 public:
  // `local` and `events` must outlive it. Dial() starts it.
  PeerConnection(boost::asio::io_context& io, std::string address, StoreClient* local,
                 PeerEvents* events);
  ~PeerConnection();

  // Starts connecting. Failure is reported through Broken.
  void Dial();
  // Queues a request for `transfer` (written at once when connected, else once connected).
  void Send(std::shared_ptr<ObjectTransfer> transfer);
  // Closes the socket (a partly received object is aborted) and returns the requests that got
  // no complete reply; nothing is reported through PeerEvents after this.
  std::vector<std::shared_ptr<ObjectTransfer>> Close();

  // Whether a request queued here still has a waiter.
  bool AnyoneWaiting() const;
  size_t queued() const { return queue_.size(); }
  bool closed() const { return closed_; }
  const std::string& address() const { return address_; }

 private:
  void OnConnected();
  void WriteRequests(size_t from);
  void FlushWrites();
  void ReadReply();
  void OnHead();
  void OnRest();
  void ReadBody();
  void Discard();
  void FinishFront(Status status, uint64_t bytes);
  // Closes after a socket error or a malformed reply and reports Broken.
  void Fail(Status error);

  boost::asio::io_context& io_;
  std::string address_;
  StoreClient* local_;
  PeerEvents* events_;
  boost::asio::ip::tcp::socket socket_;
  bool connected_ = false;
  uint64_t answered_ = 0;    // complete replies read
  bool idle_reuse_ = false;  // reused after being idle, and no reply byte has come since
  bool closed_ = false;
  bool reading_ = false;
  bool writing_ = false;
  // Requests in order: those written and those still to write (from written_ on).
  std::deque<std::shared_ptr<ObjectTransfer>> queue_;
  size_t written_ = 0;
  std::string outbox_, in_write_;

  // The reply being read (for queue_.front()).
  char head_[5] = {};
  uint8_t code_ = 0;
  std::string rest_;
  uint64_t data_size_ = 0, metadata_size_ = 0;
  std::optional<MutableObject> receiving_;  // created here, being filled
  uint64_t discard_left_ = 0;               // bytes of a reply read and dropped
  Status discard_status_;
  std::vector<uint8_t> scratch_;
};

}  // namespace airt::objectstore::internal
