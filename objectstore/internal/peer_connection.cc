#include "objectstore/internal/peer_connection.h"

#include <algorithm>

#include "objectstore/internal/protocol.h"

namespace airt::objectstore::internal {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {
constexpr uint32_t kMaxReplyMessage = 1u << 20;
constexpr size_t kScratchSize = 1u << 20;
}  // namespace

Result<std::pair<std::string, std::string>> SplitAddress(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return InvalidArgument("transfer address '" + address + "' is not host:port");
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host, address.substr(colon + 1));
}

PeerConnection::PeerConnection(asio::io_context& io, std::string address, StoreClient* local,
                               PeerEvents* events)
    : io_(io), address_(std::move(address)), local_(local), events_(events), socket_(io) {}

PeerConnection::~PeerConnection() {
  if (receiving_) (void)local_->Abort(receiving_->id);
}

void PeerConnection::Dial() {
  // Failures are reported from the loop, never from inside the caller's Dial.
  auto fail_later = [this](Status error) {
    asio::post(io_, [self = shared_from_this(), error = std::move(error)] { self->Fail(error); });
  };
  auto host_port = SplitAddress(address_);
  if (!host_port.ok()) return fail_later(host_port.status());
  boost::system::error_code ec;
  tcp::resolver resolver(io_);
  // Numeric hosts resolve without a lookup; names block this thread for the lookup only.
  auto endpoints = resolver.resolve(host_port->first, host_port->second, ec);
  if (ec) return fail_later(Unavailable("resolve " + address_ + ": " + ec.message()));
  asio::async_connect(
      socket_, endpoints,
      [self = shared_from_this()](boost::system::error_code error, const auto&) {
        if (self->closed_) return;
        if (error) {
          return self->Fail(Unavailable("connect to " + self->address_ + ": " + error.message()));
        }
        self->OnConnected();
      });
}

void PeerConnection::OnConnected() {
  connected_ = true;
  boost::system::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);
  WriteRequests(0);
  ReadReply();
}

void PeerConnection::Send(std::shared_ptr<ObjectTransfer> transfer) {
  ++transfer->attempts;
  if (queue_.empty() && answered_ > 0) idle_reuse_ = true;
  queue_.push_back(std::move(transfer));
  if (!connected_) return;
  WriteRequests(queue_.size() - 1);
  if (!reading_) ReadReply();
}

void PeerConnection::WriteRequests(size_t from) {
  WireWriter w(&outbox_);
  for (size_t i = from; i < queue_.size(); ++i) {
    w.Put(kTransferMagic);
    w.PutId(queue_[i]->id);
  }
  written_ = queue_.size();
  FlushWrites();
}

void PeerConnection::FlushWrites() {
  if (writing_ || outbox_.empty() || closed_) return;
  writing_ = true;
  in_write_.swap(outbox_);
  outbox_.clear();
  asio::async_write(
      socket_, asio::buffer(in_write_),
      [self = shared_from_this()](boost::system::error_code error, size_t) {
        self->writing_ = false;
        if (self->closed_) return;
        if (error) {
          return self->Fail(Unavailable("send to " + self->address_ + ": " + error.message()));
        }
        self->in_write_.clear();
        self->FlushWrites();
      });
}

void PeerConnection::ReadReply() {
  if (closed_ || queue_.empty() || written_ == 0) {
    reading_ = false;
    return;
  }
  reading_ = true;
  asio::async_read(
      socket_, asio::buffer(head_),
      [self = shared_from_this()](boost::system::error_code error, size_t) {
        if (self->closed_) return;
        if (error) {
          return self->Fail(Unavailable("receive from " + self->address_ + ": " + error.message()));
        }
        self->OnHead();
      });
}

void PeerConnection::OnHead() {
  idle_reuse_ = false;  // the peer is alive on this connection
  WireReader r(std::string_view(head_, sizeof(head_)));
  uint32_t message_size = 0;
  r.Get(&code_);
  r.Get(&message_size);
  if (code_ > static_cast<uint8_t>(Code::kInternal) || message_size > kMaxReplyMessage) {
    return Fail(InvalidArgument("malformed transfer reply from " + address_ + " (code " +
                                std::to_string(code_) + ", message of " +
                                std::to_string(message_size) + " bytes)"));
  }
  rest_.assign(message_size + 16, '\0');
  asio::async_read(
      socket_, asio::buffer(rest_),
      [self = shared_from_this()](boost::system::error_code error, size_t) {
        if (self->closed_) return;
        if (error) {
          return self->Fail(Unavailable("receive from " + self->address_ + ": " + error.message()));
        }
        self->OnRest();
      });
}

void PeerConnection::OnRest() {
  WireReader r(rest_);
  std::string_view message;
  r.GetBytes(rest_.size() - 16, &message);
  r.Get(&data_size_);
  r.Get(&metadata_size_);
  const ObjectTransfer& front = *queue_.front();
  if (code_ != static_cast<uint8_t>(Code::kOk)) {
    if (data_size_ != 0 || metadata_size_ != 0) {
      return Fail(InvalidArgument("malformed transfer reply from " + address_ +
                                  ": an error reply that carries bytes"));
    }
    return FinishFront(Status(static_cast<Code>(code_), std::string(message)), 0);
  }
  if (data_size_ > (uint64_t{1} << 48) || metadata_size_ > (uint64_t{1} << 32)) {
    return Fail(InvalidArgument("malformed transfer reply from " + address_ + ": " +
                                std::to_string(data_size_) + " data bytes"));
  }
  Result<MutableObject> object =
      local_->Create(front.id, data_size_, metadata_size_, /*secondary=*/true);
  if (!object.ok()) {
    // Another client is creating it here (kAlreadyExists), or there is no room: the bytes are on
    // their way on this connection all the same, so they are read and dropped.
    discard_status_ = object.status().code() == Code::kAlreadyExists
                          ? object.status()
                          : object.status().WithContext(std::to_string(data_size_) + " bytes");
    discard_left_ = data_size_ + metadata_size_;
    return Discard();
  }
  receiving_ = std::move(*object);
  ReadBody();
}

void PeerConnection::ReadBody() {
  std::vector<asio::mutable_buffer> buffers = {
      asio::buffer(receiving_->data.data(), receiving_->data.size()),
      asio::buffer(receiving_->metadata.data(), receiving_->metadata.size())};
  asio::async_read(
      socket_, buffers, TransferAllInLargeChunks(),
      [self = shared_from_this()](boost::system::error_code error, size_t) {
        if (self->closed_) return;
        if (error) {
          return self->Fail(Unavailable("receive from " + self->address_ + ": " + error.message()));
        }
        MutableObject object = std::move(*self->receiving_);
        self->receiving_.reset();
        Status sealed = self->local_->Seal(object.id);
        if (!sealed.ok()) (void)self->local_->Abort(object.id);
        self->FinishFront(sealed, object.data.size() + object.metadata.size());
      });
}

void PeerConnection::Discard() {
  if (discard_left_ == 0) return FinishFront(discard_status_, 0);
  if (scratch_.empty()) scratch_.resize(kScratchSize);
  size_t n = static_cast<size_t>(std::min<uint64_t>(discard_left_, scratch_.size()));
  asio::async_read(
      socket_, asio::buffer(scratch_.data(), n),
      [self = shared_from_this(), n](boost::system::error_code error, size_t) {
        if (self->closed_) return;
        if (error) {
          return self->Fail(Unavailable("receive from " + self->address_ + ": " + error.message()));
        }
        self->discard_left_ -= n;
        self->Discard();
      });
}

void PeerConnection::FinishFront(Status status, uint64_t bytes) {
  std::shared_ptr<ObjectTransfer> done = std::move(queue_.front());
  queue_.pop_front();
  --written_;
  ++answered_;
  events_->Finished(this, done, std::move(status), bytes);
  ReadReply();
}

std::vector<std::shared_ptr<ObjectTransfer>> PeerConnection::Close() {
  closed_ = true;
  boost::system::error_code ignored;
  socket_.close(ignored);
  if (receiving_) {
    (void)local_->Abort(receiving_->id);  // if this fails, the store aborts it at disconnect
    receiving_.reset();
  }
  std::vector<std::shared_ptr<ObjectTransfer>> unanswered(queue_.begin(), queue_.end());
  queue_.clear();
  written_ = 0;
  return unanswered;
}

void PeerConnection::Fail(Status error) {
  if (closed_) return;
  bool ask_again = idle_reuse_ || error.code() == Code::kInvalidArgument;
  auto self = shared_from_this();  // the puller drops its reference in Broken
  std::vector<std::shared_ptr<ObjectTransfer>> unanswered = Close();
  events_->Broken(this, error, std::move(unanswered), ask_again);
}

bool PeerConnection::AnyoneWaiting() const {
  return std::any_of(queue_.begin(), queue_.end(),
                     [](const auto& transfer) { return !transfer->waiters.empty(); });
}

}  // namespace airt::objectstore::internal
