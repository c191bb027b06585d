// ObjectPuller: one connection per Pull, driven on the calling thread by an io_context that runs
// each operation against the call's deadline (Asio's "blocking with a timeout" pattern).
#include <chrono>
#include <optional>

#include "common/asio.h"
#include "objectstore/internal/protocol.h"
#include "objectstore/transfer.h"

namespace airt::objectstore {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// Runs one asynchronous operation at a time against a deadline, translating Asio's errors once.
class DeadlineConnection {
 public:
  DeadlineConnection(std::string peer, std::optional<Clock::time_point> deadline)
      : peer_(std::move(peer)), socket_(io_), deadline_(deadline) {}

  Status Connect(const std::string& host, const std::string& port) {
    boost::system::error_code ec;
    tcp::resolver resolver(io_);
    auto endpoints = resolver.resolve(host, port, ec);
    if (ec) return Unavailable("resolve " + peer_ + ": " + ec.message());
    AIRT_RETURN_IF_ERROR(Run("connect", [&](auto done) {
      asio::async_connect(socket_, endpoints, [done](auto error, const auto&) { done(error, 0); });
    }));
    socket_.set_option(tcp::no_delay(true), ec);
    return Status::Ok();
  }
  Status Write(asio::const_buffer buffer) {
    return Run("send to", [&](auto done) {
      asio::async_write(socket_, buffer, TransferAllInLargeChunks(), done);
    });
  }
  Status Read(asio::mutable_buffer buffer) {
    return Run("receive from", [&](auto done) {
      asio::async_read(socket_, buffer, TransferAllInLargeChunks(), done);
    });
  }

 private:
  template <typename Start>
  Status Run(const char* what, Start start) {
    std::optional<boost::system::error_code> result;
    start([&result](boost::system::error_code ec, size_t) { result = ec; });
    io_.restart();
    if (deadline_) {
      io_.run_until(*deadline_);
    } else {
      io_.run();
    }
    if (!result) {  // the deadline passed first: cancel and let the handler run
      boost::system::error_code ignored;
      socket_.close(ignored);
      io_.restart();
      io_.run();
      return DeadlineExceeded("transfer from " + peer_ + " did not finish in time");
    }
    if (*result) {
      return Unavailable(std::string(what) + " " + peer_ + ": " + result->message());
    }
    return Status::Ok();
  }

  std::string peer_;
  asio::io_context io_;
  tcp::socket socket_;
  std::optional<Clock::time_point> deadline_;
};

Result<std::pair<std::string, std::string>> SplitAddress(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return InvalidArgument("transfer address '" + address + "' is not host:port");
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return std::make_pair(host, address.substr(colon + 1));
}

}  // namespace

namespace {

// Pulls `wanted` over one connection, in order. Returns how many were pulled before one turned
// out to be in the middle of being created here by someone else (all of them when none was):
// the connection is then dropped, since that object's bytes are on their way on it.
Result<size_t> PullOnOneConnection(StoreClient* local, const std::string& address,
                                   std::span<const ObjectId> wanted,
                                   std::optional<Clock::time_point> deadline) {
  AIRT_ASSIGN_OR_RETURN(auto host_port, SplitAddress(address));
  DeadlineConnection conn(address, deadline);
  AIRT_RETURN_IF_ERROR(conn.Connect(host_port.first, host_port.second));

  // Pipelined: every request first, then the replies in order.
  std::string requests;
  internal::WireWriter w(&requests);
  for (const ObjectId& id : wanted) {
    w.Put(kTransferMagic);
    w.PutId(id);
  }
  AIRT_RETURN_IF_ERROR(conn.Write(asio::buffer(requests)));

  for (size_t i = 0; i < wanted.size(); ++i) {
    const ObjectId& id = wanted[i];
    char head[5];
    AIRT_RETURN_IF_ERROR(conn.Read(asio::buffer(head)));
    internal::WireReader hr(std::string_view(head, sizeof(head)));
    uint8_t code;
    uint32_t message_size;
    hr.Get(&code);
    hr.Get(&message_size);
    if (code > static_cast<uint8_t>(Code::kInternal) || message_size > (1u << 20)) {
      return InvalidArgument("malformed transfer reply from " + address);
    }
    std::string rest(message_size + 16, '\0');
    AIRT_RETURN_IF_ERROR(conn.Read(asio::buffer(rest)));
    internal::WireReader rr(rest);
    std::string_view message;
    uint64_t data_size, metadata_size;
    rr.GetBytes(message_size, &message);
    rr.Get(&data_size);
    rr.Get(&metadata_size);
    if (code != static_cast<uint8_t>(Code::kOk)) {
      return Status(static_cast<Code>(code),
                    "pulling from " + address + ": " + std::string(message));
    }
    Result<MutableObject> object = local->Create(id, data_size, metadata_size, /*secondary=*/true);
    if (object.status().code() == Code::kAlreadyExists) return i;  // another pull has it
    if (!object.ok()) {
      return object.status().WithContext("pulling object " + id.Hex() + " from " + address);
    }
    Status body = conn.Read(asio::buffer(object->data.data(), object->data.size()));
    if (body.ok()) body = conn.Read(asio::buffer(object->metadata.data(), object->metadata.size()));
    if (!body.ok()) {
      (void)local->Abort(id);  // if this fails too, the store aborts it when we disconnect
      return body.WithContext("pulling object " + id.Hex() + " (" + std::to_string(data_size) +
                              " bytes)");
    }
    AIRT_RETURN_IF_ERROR(local->Seal(id));
  }
  return wanted.size();
}

}  // namespace

Status ObjectPuller::Pull(const std::string& address, std::span<const ObjectId> ids,
                          int64_t timeout_ms) {
  std::optional<Clock::time_point> deadline;
  if (timeout_ms >= 0) deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<ObjectId> wanted;
  for (const ObjectId& id : ids) {
    if (!local_->Contains(id)) wanted.push_back(id);
  }
  while (!wanted.empty()) {
    AIRT_ASSIGN_OR_RETURN(size_t pulled, PullOnOneConnection(local_, address, wanted, deadline));
    if (pulled == wanted.size()) return Status::Ok();
    // wanted[pulled] is being created here by another pull (or an owner's put). Wait a little for
    // it; if it does not arrive (that pull failed and aborted it), pull it ourselves again.
    int64_t slice_ms = 100;
    if (deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      if (left <= 0) {
        return DeadlineExceeded("object " + wanted[pulled].Hex() +
                                " was still arriving from another pull at the deadline");
      }
      slice_ms = std::min<int64_t>(slice_ms, left);
    }
    Result<ObjectPin> arrived = local_->Get(wanted[pulled], slice_ms);
    if (!arrived.ok() && arrived.status().code() != Code::kDeadlineExceeded) {
      return arrived.status();
    }
    wanted.erase(wanted.begin(),
                 wanted.begin() + static_cast<long>(pulled) + (arrived.ok() ? 1 : 0));
  }
  return Status::Ok();
}

}  // namespace airt::objectstore
