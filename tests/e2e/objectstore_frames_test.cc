// Malformed and hostile frames written over a raw Unix socket to a real airt-store daemon. The
// frames are encoded here by hand from the protocol's description (objectstore/internal/
// protocol.h), not with the store's own encoder. Each bad frame must get an error reply (or, for
// an unreadable header, an error reply and then a closed connection), and the daemon must go on
// serving a good client.
#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <optional>

#include <sys/socket.h>
#include <sys/un.h>

#include "common/unique_fd.h"
#include "tests/e2e/object_pattern.h"
#include "tests/e2e/store_fixture.h"

namespace airt::e2e {
namespace {

using objectstore::StoreStats;

// Message types and limits as the protocol documents them.
enum : uint16_t {
  kHello = 1,
  kCreate = 2,
  kSeal = 3,
  kAbort = 4,
  kDelete = 5,
  kWait = 6,
  kStats = 8,
  kReply = 100
};
constexpr uint32_t kVersion = 2;
constexpr uint32_t kMaxBody = 16u << 20;

class Bytes {
 public:
  template <typename T>
  Bytes& Le(T v) {
    for (size_t i = 0; i < sizeof(T); ++i)
      s_.push_back(static_cast<char>(static_cast<uint64_t>(v) >> (8 * i)));
    return *this;
  }
  Bytes& Raw(std::string_view b) {
    s_.append(b);
    return *this;
  }
  Bytes& Id(const ObjectId& id) { return Raw(id.Binary()); }
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

std::string Frame(uint16_t type, uint32_t request_id, const std::string& body,
                  std::optional<uint32_t> body_size = std::nullopt, uint32_t reserved = 0) {
  return Bytes()
      .Le(body_size.value_or(static_cast<uint32_t>(body.size())))
      .Le(type)
      .Le(uint16_t{0})
      .Le(request_id)
      .Le(reserved)
      .Raw(body)
      .str();
}

struct Reply {
  uint32_t request_id = 0;
  Code code = Code::kOk;
  std::string message;
  std::string payload;
};

// One raw connection to the store. Descriptors the store sends (Hello's memfd) are closed.
class RawConnection {
 public:
  explicit RawConnection(const std::string& path) {
    fd_.Reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    connected_ = ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  bool connected() const { return connected_; }

  bool Send(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::send(fd_.get(), bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  // The next reply, or nullopt at the deadline or when the store closed the connection.
  std::optional<Reply> Read(std::chrono::milliseconds timeout = 10s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string header;
    if (!ReadExactly(16, deadline, &header)) return std::nullopt;
    uint32_t body_size = Le32(header, 0);
    uint16_t type = static_cast<uint16_t>(Le32(header, 4) & 0xffff);
    Reply reply;
    reply.request_id = Le32(header, 8);
    std::string body;
    if (type != kReply || body_size < 5 || !ReadExactly(body_size, deadline, &body)) {
      ADD_FAILURE() << "bad reply frame: type " << type << ", body " << body_size << " bytes";
      return std::nullopt;
    }
    reply.code = static_cast<Code>(static_cast<uint8_t>(body[0]));
    uint32_t message_size = Le32(body, 1);
    if (5 + uint64_t{message_size} > body.size()) {
      ADD_FAILURE() << "reply message overruns its body";
      return std::nullopt;
    }
    reply.message = body.substr(5, message_size);
    reply.payload = body.substr(5 + message_size);
    return reply;
  }

  // Whether the store closes the connection (EOF) before the deadline, reading nothing.
  bool ClosedByPeer(std::chrono::milliseconds timeout = 10s) {
    std::string ignored;
    bool got = ReadExactly(1, std::chrono::steady_clock::now() + timeout, &ignored);
    return !got && eof_;
  }

  std::optional<Reply> Call(uint16_t type, uint32_t request_id, const std::string& body) {
    if (!Send(Frame(type, request_id, body))) return std::nullopt;
    return Read();
  }
  bool Hello() {
    auto reply = Call(kHello, 1, Bytes().Le(kVersion).Le(static_cast<int32_t>(::getpid())).str());
    return reply && reply->code == Code::kOk && reply->request_id == 1;
  }
  void Close() { fd_.Reset(); }

 private:
  static uint32_t Le32(const std::string& s, size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i)
      v |= static_cast<uint32_t>(static_cast<uint8_t>(s[at + i])) << (8 * i);
    return v;
  }

  bool ReadExactly(size_t n, std::chrono::steady_clock::time_point deadline, std::string* out) {
    while (out->size() < n) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
      iovec iov{buf, std::min(sizeof(buf), n - out->size())};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      ssize_t r = ::recvmsg(fd_.get(), &msg, MSG_CMSG_CLOEXEC);
      if (r == 0) eof_ = true;
      if (r <= 0) return false;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c), sizeof(fd));
          ::close(fd);
        }
      }
      out->append(buf, static_cast<size_t>(r));
    }
    return true;
  }

  UniqueFd fd_;
  bool connected_ = false;
  bool eof_ = false;
};

class ObjectStoreFrames : public StoreFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartStore(
        {"--capacity", "8M", "--max-objects", "1024", "--spill-dir", dir().File("spill")}));
    conn_ = std::make_unique<RawConnection>(socket());
    ASSERT_TRUE(conn_->connected());
  }

  // Expects an error reply with `code` to `request_id`.
  void ExpectError(std::optional<Reply> reply, Code code, uint32_t request_id) {
    ASSERT_TRUE(reply.has_value()) << "no reply";
    EXPECT_EQ(reply->code, code) << CodeName(reply->code) << ": " << reply->message;
    EXPECT_EQ(reply->request_id, request_id);
    EXPECT_FALSE(reply->message.empty());
  }

  // A good client still puts and gets, and the daemon still runs.
  void ExpectStoreStillServes() {
    EXPECT_TRUE(StoreRunning());
    EXPECT_EQ(RunTool("put", {Id(900).Hex(), "65536", "90"}), 0);
    EXPECT_EQ(RunTool("read-verify", {Id(900).Hex(), "65536", "90"}), 0);
    StopStore();
  }

  std::string CreateBody(const ObjectId& id, uint64_t size, uint8_t flags = 0) {
    return Bytes().Id(id).Le(size).Le(uint64_t{0}).Le(flags).str();
  }

  std::unique_ptr<RawConnection> conn_;
};

TEST_F(ObjectStoreFrames, RequestGetsFailedPreconditionWhenSentBeforeHello) {
  ExpectError(conn_->Call(kCreate, 5, CreateBody(Id(1), 64)), Code::kFailedPrecondition, 5);
  ExpectError(conn_->Call(kStats, 6, ""), Code::kFailedPrecondition, 6);
  ASSERT_TRUE(conn_->Hello());
  auto stats = conn_->Call(kStats, 7, "");
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->code, Code::kOk) << stats->message;
  EXPECT_EQ(Stats().num_objects, 0u);
  ExpectStoreStillServes();
}

TEST_F(ObjectStoreFrames, CreateGetsInvalidArgumentWhenItsBodyIsTruncatedOrPadded) {
  ASSERT_TRUE(conn_->Hello());
  std::string body = CreateBody(Id(1), 64);
  ExpectError(conn_->Call(kCreate, 2, body.substr(0, body.size() - 1)), Code::kInvalidArgument, 2);
  ExpectError(conn_->Call(kCreate, 3, body.substr(0, 10)), Code::kInvalidArgument, 3);
  ExpectError(conn_->Call(kCreate, 4, ""), Code::kInvalidArgument, 4);
  ExpectError(conn_->Call(kCreate, 5, body + "x"), Code::kInvalidArgument, 5);
  // Two frames in one write, then a frame one byte per write: all answered in order.
  ASSERT_TRUE(conn_->Send(Frame(kCreate, 6, body.substr(0, 3)) + Frame(kStats, 7, "")));
  ExpectError(conn_->Read(), Code::kInvalidArgument, 6);
  auto stats = conn_->Read();
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->request_id, 7u);
  EXPECT_EQ(stats->code, Code::kOk);
  for (char c : Frame(kStats, 8, "")) ASSERT_TRUE(conn_->Send(std::string(1, c)));
  stats = conn_->Read();
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->request_id, 8u);
  EXPECT_EQ(stats->code, Code::kOk);
  EXPECT_EQ(Stats().num_creating, 0u);
  ExpectStoreStillServes();
}

TEST_F(ObjectStoreFrames, ConnectionIsClosedAfterAnErrorReplyWhenAHeaderAnnouncesOver16MiB) {
  ASSERT_TRUE(conn_->Hello());
  ASSERT_TRUE(WaitForStats([](const StoreStats& s) { return s.num_clients == 2; }));
  ASSERT_TRUE(conn_->Send(Frame(kCreate, 9, "", kMaxBody + 1)));
  ExpectError(conn_->Read(), Code::kInvalidArgument, 9);
  EXPECT_TRUE(conn_->ClosedByPeer());
  // Its client slot is given back.
  EXPECT_TRUE(WaitForStats([](const StoreStats& s) { return s.num_clients == 1; }));
  ExpectStoreStillServes();
}

TEST_F(ObjectStoreFrames, ConnectionIsClosedAfterAnErrorReplyWhenTheReservedFieldIsNotZero) {
  ASSERT_TRUE(conn_->Hello());
  ASSERT_TRUE(conn_->Send(Frame(kStats, 4, "", std::nullopt, /*reserved=*/1)));
  ExpectError(conn_->Read(), Code::kInvalidArgument, 4);
  EXPECT_TRUE(conn_->ClosedByPeer());
  ExpectStoreStillServes();
}

TEST_F(ObjectStoreFrames, RequestGetsInvalidArgumentWhenItsTypeIsUnknown) {
  ASSERT_TRUE(conn_->Hello());
  ExpectError(conn_->Call(77, 2, "xyz"), Code::kInvalidArgument, 2);
  ExpectError(conn_->Call(kReply, 3, ""), Code::kInvalidArgument, 3);
  ExpectError(conn_->Call(0xffff, 4, std::string(1000, 'z')), Code::kInvalidArgument, 4);
  ExpectStoreStillServes();
}

TEST_F(ObjectStoreFrames, HelloGetsFailedPreconditionWhenSentTwice) {
  ASSERT_TRUE(conn_->Hello());
  ExpectError(conn_->Call(kHello, 2, Bytes().Le(kVersion).Le(int32_t{1}).str()),
              Code::kFailedPrecondition, 2);
  ExpectError(conn_->Call(kHello, 3, "abc"), Code::kInvalidArgument, 3);
  ExpectStoreStillServes();
}

TEST_F(ObjectStoreFrames, SealGetsFailedPreconditionWhenTheObjectIsSealedAlready) {
  ASSERT_TRUE(conn_->Hello());
  auto created = conn_->Call(kCreate, 2, CreateBody(Id(1), 128));
  ASSERT_TRUE(created.has_value());
  ASSERT_EQ(created->code, Code::kOk) << created->message;
  EXPECT_EQ(created->payload.size(), 8u);  // the offset
  auto sealed = conn_->Call(kSeal, 3, Bytes().Id(Id(1)).str());
  ASSERT_TRUE(sealed.has_value());
  EXPECT_EQ(sealed->code, Code::kOk) << sealed->message;
  ExpectError(conn_->Call(kSeal, 4, Bytes().Id(Id(1)).str()), Code::kFailedPrecondition, 4);
  ExpectError(conn_->Call(kAbort, 5, Bytes().Id(Id(1)).str()), Code::kFailedPrecondition, 5);
  EXPECT_TRUE(observer().Contains(Id(1)));
  EXPECT_EQ(RunTool("wait-get", {Id(1).Hex(), "1000"}), 0);
  ExpectStoreStillServes();
}

TEST_F(ObjectStoreFrames, SealGetsFailedPreconditionWhenAnotherClientCreatesTheObject) {
  ASSERT_TRUE(conn_->Hello());
  RawConnection other(socket());
  ASSERT_TRUE(other.Hello());
  auto created = conn_->Call(kCreate, 2, CreateBody(Id(1), 64));
  ASSERT_TRUE(created && created->code == Code::kOk);
  ExpectError(other.Call(kSeal, 2, Bytes().Id(Id(1)).str()), Code::kFailedPrecondition, 2);
  ExpectError(other.Call(kAbort, 3, Bytes().Id(Id(1)).str()), Code::kFailedPrecondition, 3);
  ExpectError(other.Call(kDelete, 4, Bytes().Le(uint32_t{1}).Id(Id(1)).str()),
              Code::kFailedPrecondition, 4);
  EXPECT_EQ(Stats().num_creating, 1u);
  // The creator's disconnect aborts it.
  conn_->Close();
  EXPECT_TRUE(WaitForStats([](const StoreStats& s) { return s.num_creating == 0; }));
  ExpectStoreStillServes();
}

TEST_F(ObjectStoreFrames, SealAbortAndDeleteGetNotFoundWhenTheObjectIsUnknown) {
  ASSERT_TRUE(conn_->Hello());
  ExpectError(conn_->Call(kSeal, 2, Bytes().Id(Id(1)).str()), Code::kNotFound, 2);
  ExpectError(conn_->Call(kAbort, 3, Bytes().Id(Id(1)).str()), Code::kNotFound, 3);
  ExpectError(conn_->Call(kDelete, 4, Bytes().Le(uint32_t{1}).Id(Id(1)).str()), Code::kNotFound, 4);
  ExpectStoreStillServes();
}

TEST_F(ObjectStoreFrames, EveryRequestGetsInvalidArgumentWhenItsIdIsShort) {
  ASSERT_TRUE(conn_->Hello());
  std::string short_id = Id(1).Binary().substr(0, 27);
  ExpectError(conn_->Call(kSeal, 2, short_id), Code::kInvalidArgument, 2);
  ExpectError(conn_->Call(kAbort, 3, short_id.substr(0, 5)), Code::kInvalidArgument, 3);
  ExpectError(conn_->Call(kDelete, 4, Bytes().Le(uint32_t{1}).Raw(short_id).str()),
              Code::kInvalidArgument, 4);
  ExpectError(conn_->Call(kDelete, 5, Bytes().Le(uint32_t{2}).Id(Id(1)).str()),
              Code::kInvalidArgument, 5);
  ExpectError(conn_->Call(kWait, 6, Bytes().Le(int64_t{0}).Le(uint32_t{1}).Raw(short_id).str()),
              Code::kInvalidArgument, 6);
  ExpectError(conn_->Call(kCreate, 7, Bytes().Raw(short_id).Le(uint64_t{64}).str()),
              Code::kInvalidArgument, 7);
  // A Wait claiming four billion ids with none sent.
  ExpectError(conn_->Call(kWait, 8, Bytes().Le(int64_t{0}).Le(uint32_t{0xffffffff}).str()),
              Code::kInvalidArgument, 8);
  EXPECT_EQ(Stats().num_objects, 0u);
  ExpectStoreStillServes();
}

TEST_F(ObjectStoreFrames, ClientIsDroppedWhenItHangsUpMidFrame) {
  ASSERT_TRUE(conn_->Hello());
  ASSERT_TRUE(WaitForStats([](const StoreStats& s) { return s.num_clients == 2; }));
  std::string frame = Frame(kCreate, 2, CreateBody(Id(1), 64));
  ASSERT_TRUE(conn_->Send(frame.substr(0, 20)));
  conn_->Close();
  EXPECT_TRUE(WaitForStats([](const StoreStats& s) { return s.num_clients == 1; }));
  EXPECT_EQ(Stats().num_objects, 0u);
  ExpectStoreStillServes();
}

// A size within 63 bytes of 2^64 must be refused like any size over the capacity: without
// evicting or spilling anything first (StoreClient::Create's contract).
TEST_F(ObjectStoreFrames, CreateEvictsAndSpillsNothingWhenItsSizeIsNearTwoToThe64) {
  ASSERT_EQ(RunTool("put", {Id(1).Hex(), "1048576", "1", "--secondary"}), 0);
  ASSERT_EQ(RunTool("put", {Id(2).Hex(), "1048576", "2"}), 0);
  ASSERT_TRUE(conn_->Hello());
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint32_t request = 2;
  for (uint64_t size : {kMax, kMax - 1, kMax - 40, kMax - 63, kMax - 64, uint64_t{1} << 40}) {
    auto reply = conn_->Call(kCreate, request++, CreateBody(Id(3), size));
    ASSERT_TRUE(reply.has_value());
    EXPECT_NE(reply->code, Code::kOk) << "created an object of " << size << " bytes";
    StoreStats stats = Stats();
    ASSERT_EQ(stats.total_evicted + stats.total_spilled, 0u)
        << "a Create of " << size << " bytes, refused with " << CodeName(reply->code) << ": "
        << reply->message << ", evicted " << stats.total_evicted << " and spilled "
        << stats.total_spilled << " objects first";
  }
  EXPECT_TRUE(observer().Contains(Id(1)));
  EXPECT_EQ(RunTool("read-verify", {Id(1).Hex(), "1048576", "1"}), 0);
  EXPECT_EQ(RunTool("read-verify", {Id(2).Hex(), "1048576", "2"}), 0);
  ExpectStoreStillServes();
}

}  // namespace
}  // namespace airt::e2e
