// TransferServer: an Asio acceptor on its own thread; one Session per connection reads requests,
// pins the object in the local store, and writes the reply header and the pinned bytes.
#include <atomic>
#include <thread>

#include "common/asio.h"
#include "common/logging.h"
#include "objectstore/internal/protocol.h"
#include "objectstore/transfer.h"

namespace airt::objectstore {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using internal::WireReader;
using internal::WireWriter;

constexpr size_t kRequestSize = 4 + ObjectId::kSize;

// The service's counters (TransferServerSnapshot), written on the io thread, read from any.
// `served` may be shared with the node's store, which shows it in its Stats.
struct Counters {
  std::atomic<uint64_t> accepted{0}, open{0};
  std::shared_ptr<TransferCounters> served;
};

// Confined to the server's io thread.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, StoreClient* store, Counters* counters)
      : socket_(std::move(socket)), store_(store), counters_(counters) {
    counters_->accepted.fetch_add(1, std::memory_order_relaxed);
    counters_->open.fetch_add(1, std::memory_order_relaxed);
  }
  ~Session() { counters_->open.fetch_sub(1, std::memory_order_relaxed); }

  void ReadRequest() {
    asio::async_read(socket_, asio::buffer(request_),
                     [self = shared_from_this()](boost::system::error_code ec, size_t) {
                       if (!ec) self->Answer();  // EOF or error: the puller is done or gone
                     });
  }

 private:
  void Answer() {
    WireReader r(std::string_view(request_.data(), request_.size()));
    uint32_t magic = 0;
    ObjectId id;
    r.Get(&magic);
    r.GetId(&id);
    header_.clear();
    WireWriter w(&header_);
    if (magic != kTransferMagic) {
      // Not our protocol: answer once, then hang up (the stream cannot be trusted).
      header_ = internal::ReplyBody(InvalidArgument("not an airt transfer request"));
      w.Put(uint64_t{0});
      w.Put(uint64_t{0});
      asio::async_write(socket_, asio::buffer(header_),
                        [self = shared_from_this()](boost::system::error_code, size_t) {});
      return;
    }
    Result<ObjectPin> pin = store_->Get(id, 0);
    if (!pin.ok()) {
      Status s = pin.status().code() == Code::kDeadlineExceeded
                     ? NotFound("object " + id.Hex() + " is not sealed on this node")
                     : pin.status();
      header_ = internal::ReplyBody(s);
      WireWriter(&header_).Put(uint64_t{0});
      WireWriter(&header_).Put(uint64_t{0});
      return Write({asio::buffer(header_)});
    }
    pin_ = std::move(*pin);
    counters_->served->objects_served.fetch_add(1, std::memory_order_relaxed);
    counters_->served->bytes_served.fetch_add(pin_.data().size() + pin_.metadata().size(),
                                              std::memory_order_relaxed);
    header_ = internal::ReplyBody(Status::Ok());
    WireWriter(&header_).Put(static_cast<uint64_t>(pin_.data().size()));
    WireWriter(&header_).Put(static_cast<uint64_t>(pin_.metadata().size()));
    Write({asio::buffer(header_), asio::buffer(pin_.data().data(), pin_.data().size()),
           asio::buffer(pin_.metadata().data(), pin_.metadata().size())});
  }

  void Write(std::vector<asio::const_buffer> buffers) {
    asio::async_write(socket_, buffers, TransferAllInLargeChunks(),
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        self->pin_.Release();
                        if (!ec) self->ReadRequest();
                      });
  }

  tcp::socket socket_;
  StoreClient* store_;
  Counters* counters_;
  std::array<char, kRequestSize> request_{};
  std::string header_;
  ObjectPin pin_;  // held until its bytes are written
};

}  // namespace

class TransferServer::Impl {
 public:
  Impl(std::unique_ptr<StoreClient> store, tcp::endpoint endpoint,
       std::shared_ptr<TransferCounters> served)
      : store_(std::move(store)), acceptor_(io_, endpoint) {
    counters_.served = served ? std::move(served) : std::make_shared<TransferCounters>();
  }

  ~Impl() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  void Run() {
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  TransferServerSnapshot Snapshot() const {
    TransferServerSnapshot s;
    s.connections_accepted = counters_.accepted.load(std::memory_order_relaxed);
    s.connections_open = counters_.open.load(std::memory_order_relaxed);
    s.objects_served = counters_.served->objects_served.load(std::memory_order_relaxed);
    s.bytes_served = counters_.served->bytes_served.load(std::memory_order_relaxed);
    return s;
  }

 private:
  void Accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (!ec) {
        socket.set_option(tcp::no_delay(true));
        std::make_shared<Session>(std::move(socket), store_.get(), &counters_)->ReadRequest();
      } else if (ec == asio::error::operation_aborted) {
        return;
      }
      Accept();
    });
  }

  // Declared first so it is destroyed last: sessions hold pins of this client.
  std::unique_ptr<StoreClient> store_;
  Counters counters_;  // before io_: sessions the io_context destroys still count down
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
};

Result<std::unique_ptr<TransferServer>> TransferServer::Start(Options options) {
  return Start(std::move(options), nullptr);
}

Result<std::unique_ptr<TransferServer>> TransferServer::Start(
    Options options, std::shared_ptr<TransferCounters> counters) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(options.bind_address, ec);
  if (ec)
    return InvalidArgument("transfer bind address '" + options.bind_address + "': " + ec.message());
  // The client's own mapping is populated in the background like any other (page tables only:
  // the pages exist already), so sending an object does not fault in every page it reads.
  AIRT_ASSIGN_OR_RETURN(auto store, StoreClient::Connect(options.store_socket));
  std::unique_ptr<Impl> impl;
  try {
    impl = std::make_unique<Impl>(std::move(store), tcp::endpoint(address, options.port),
                                  std::move(counters));
  } catch (const boost::system::system_error& e) {
    return Unavailable("bind the transfer service to " + options.bind_address + ":" +
                       std::to_string(options.port) + ": " + e.code().message());
  }
  impl->Run();
  return std::unique_ptr<TransferServer>(new TransferServer(std::move(impl)));
}

TransferServer::TransferServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TransferServer::~TransferServer() = default;
uint16_t TransferServer::port() const { return impl_->port(); }
TransferServerSnapshot TransferServer::Snapshot() const { return impl_->Snapshot(); }

}  // namespace airt::objectstore
