// TransferServer and ObjectPuller between two in-process stores, over real TCP on loopback.
#include "objectstore/transfer.h"

#include <unistd.h>

#include <cstring>
#include <thread>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "objectstore/internal/protocol.h"
#include "objectstore/object_store.h"
#include "tests/testing/test_support.h"

namespace airt::objectstore {
namespace {

using airt::testing::TempDir;

ObjectId NewId(uint32_t i) { return ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), i); }

// Two "nodes": stores A and B, A serving transfers, a client on each.
class TransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = StartStore("a", 256 << 20, served_);  // its Stats show what A's transfer service sent
    b_ = StartStore("b", 256 << 20);
    auto server = TransferServer::Start({a_->socket_path(), "127.0.0.1", 0}, served_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    transfer_ = std::move(*server);
    address_ = "127.0.0.1:" + std::to_string(transfer_->port());
    client_a_ = std::move(*StoreClient::Connect(a_->socket_path()));
    client_b_ = std::move(*StoreClient::Connect(b_->socket_path()));
  }
  std::unique_ptr<StoreServer> StartStore(const std::string& name, uint64_t capacity,
                                          std::shared_ptr<TransferCounters> served = nullptr) {
    StoreOptions options;
    options.transfer_counters = std::move(served);
    options.socket_path = dir_.File(name + ".sock");
    options.capacity_bytes = capacity;
    options.max_objects = 4096;
    options.prefault = false;
    auto server = StoreServer::Start(options);
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    return std::move(*server);
  }
  ObjectId PutPattern(uint32_t i, size_t size, size_t metadata_size = 0) {
    ObjectId id = NewId(i);
    auto object = client_a_->Create(id, size, metadata_size);
    EXPECT_TRUE(object.ok()) << object.status().ToString();
    for (size_t b = 0; b < size; ++b) object->data[b] = static_cast<uint8_t>(b * 31 + i);
    for (size_t b = 0; b < metadata_size; ++b) object->metadata[b] = static_cast<uint8_t>(b + 1);
    EXPECT_TRUE(client_a_->Seal(id).ok());
    return id;
  }
  void ExpectPattern(const ObjectId& id, uint32_t i, size_t size, size_t metadata_size = 0) {
    auto pin = client_b_->Get(id, 0);
    ASSERT_TRUE(pin.ok()) << pin.status().ToString();
    ASSERT_EQ(pin->data().size(), size);
    ASSERT_EQ(pin->metadata().size(), metadata_size);
    for (size_t b = 0; b < size; ++b) {
      ASSERT_EQ(pin->data()[b], static_cast<uint8_t>(b * 31 + i)) << "byte " << b;
    }
    for (size_t b = 0; b < metadata_size; ++b) ASSERT_EQ(pin->metadata()[b], b + 1);
  }

  TempDir dir_;
  std::shared_ptr<TransferCounters> served_ = std::make_shared<TransferCounters>();
  std::unique_ptr<StoreServer> a_, b_;
  std::unique_ptr<TransferServer> transfer_;
  std::string address_;
  std::unique_ptr<StoreClient> client_a_, client_b_;
};

TEST_F(TransferTest, StoreStatsCountTheBytesSealedPulledAndServed) {
  ObjectId id = PutPattern(1, 3 << 20, 100);
  ObjectId unread = PutPattern(2, 1 << 20);
  StoreStats a = *client_a_->Stats();
  EXPECT_EQ(a.total_sealed_bytes, (3u << 20) + 100 + (1u << 20));
  EXPECT_EQ(a.total_pulled_bytes, 0u);
  EXPECT_EQ(a.transfer_bytes_served, 0u);
  ObjectPuller puller(client_b_.get());
  ASSERT_TRUE(puller.Pull(address_, id, 10000).ok());
  a = *client_a_->Stats();
  StoreStats b = *client_b_->Stats();
  EXPECT_EQ(a.transfer_objects_served, 1u);
  EXPECT_EQ(a.transfer_bytes_served, (3u << 20) + 100);
  EXPECT_EQ(a.transfer_bytes_served, transfer_->Snapshot().bytes_served);
  EXPECT_EQ(b.total_pulled_bytes, (3u << 20) + 100);
  EXPECT_EQ(b.total_sealed_bytes, b.total_pulled_bytes);
  EXPECT_EQ(b.transfer_bytes_served, 0u);  // B's store has no transfer service
  EXPECT_FALSE(client_b_->Contains(unread));
}

TEST_F(TransferTest, PullCopiesDataAndMetadataByteForByte) {
  ObjectId id = PutPattern(1, 64 << 20, 100);
  ObjectPuller puller(client_b_.get());
  ASSERT_TRUE(puller.Pull(address_, id, 10000).ok());
  ExpectPattern(id, 1, 64 << 20, 100);
  EXPECT_TRUE(puller.Pull(address_, id, 10000).ok());  // already here: nothing to do
}

TEST_F(TransferTest, PulledCopiesAreSecondaryAndEvictedFirst) {
  ObjectId id = PutPattern(1, 100 << 20);
  ASSERT_TRUE(ObjectPuller(client_b_.get()).Pull(address_, id, 10000).ok());
  // Fill B with primaries: without spilling, only the pulled (secondary) copy may make room.
  for (uint32_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(client_b_->Create(NewId(100 + i), 100 << 20).ok());
  }
  EXPECT_FALSE(client_b_->Contains(id));
  EXPECT_EQ(b_->Stats().total_evicted, 1u);
  EXPECT_TRUE(client_a_->Contains(id));  // the primary on A is untouched
}

TEST_F(TransferTest, ManyObjectsArePipelinedOnOneConnection) {
  std::vector<ObjectId> ids;
  for (uint32_t i = 0; i < 200; ++i) ids.push_back(PutPattern(i, 1000 + i));
  ASSERT_TRUE(ObjectPuller(client_b_.get()).Pull(address_, ids, 10000).ok());
  for (uint32_t i = 0; i < 200; ++i) ExpectPattern(ids[i], i, 1000 + i);
}

TEST_F(TransferTest, PullsReuseOnePooledConnectionPerPeer) {
  ObjectPuller puller(client_b_.get());
  for (uint32_t i = 0; i < 5; ++i) {
    ObjectId id = PutPattern(i, 4096);
    Status pulled = puller.Pull(address_, id, 10000);
    ASSERT_TRUE(pulled.ok()) << "pull " << i << ": " << pulled.ToString();
    ExpectPattern(id, i, 4096);
  }
  PullerSnapshot s = puller.Snapshot();
  EXPECT_EQ(s.connections_dialled, 1u);
  EXPECT_EQ(s.connections_open, 1u);
  EXPECT_EQ(s.objects_pulled, 5u);
  EXPECT_EQ(transfer_->Snapshot().connections_accepted, 1u);
  EXPECT_EQ(transfer_->Snapshot().objects_served, 5u);
}

TEST_F(TransferTest, BrokenPooledConnectionIsDroppedAndRedialled) {
  ObjectPuller puller(client_b_.get());
  ASSERT_TRUE(puller.Pull(address_, PutPattern(1, 4096), 10000).ok());
  uint16_t port = transfer_->port();
  transfer_.reset();  // the peer restarts: the pooled connection is cut
  auto server = TransferServer::Start({a_->socket_path(), "127.0.0.1", port});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  transfer_ = std::move(*server);
  ObjectId second = PutPattern(2, 4096);
  Status s = puller.Pull(address_, second, 10000);
  EXPECT_TRUE(s.ok()) << s.ToString();
  ExpectPattern(second, 2, 4096);
  EXPECT_EQ(puller.Snapshot().connections_dialled, 2u);
}

TEST_F(TransferTest, ConcurrentPullsOfOneObjectRequestItOnce) {
  ObjectPuller puller(client_b_.get());
  ObjectId id = PutPattern(1, 8 << 20);
  std::vector<PullRequest> wanted = {{id, address_}, {id, address_}};
  auto first = puller.Start(wanted, 10000);
  auto second = puller.Start(wanted, 10000);
  for (const Status& st : first->Wait()) EXPECT_TRUE(st.ok()) << st.ToString();
  for (const Status& st : second->Wait()) EXPECT_TRUE(st.ok()) << st.ToString();
  ExpectPattern(id, 1, 8 << 20);
  EXPECT_EQ(transfer_->Snapshot().objects_served, 1u);
}

TEST_F(TransferTest, MissingObjectIsNotFoundAndNothingIsCreated) {
  ObjectId present = PutPattern(1, 10);
  ObjectId missing = NewId(2);
  std::vector<ObjectId> ids = {present, missing};
  Status s = ObjectPuller(client_b_.get()).Pull(address_, ids, 10000);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find(missing.Hex()), std::string::npos);
  EXPECT_TRUE(client_b_->Contains(present));  // the others still arrive
  EXPECT_FALSE(client_b_->Contains(missing));
  EXPECT_EQ(b_->Stats().num_creating, 0u);
}

TEST_F(TransferTest, UnreachablePeerIsUnavailable) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);  // a port nobody listens on
  std::string nobody = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  EXPECT_EQ(ObjectPuller(client_b_.get()).Pull(nobody, NewId(1), 5000).code(), Code::kUnavailable);
  EXPECT_EQ(ObjectPuller(client_b_.get()).Pull("no-port", NewId(1), 5000).code(),
            Code::kInvalidArgument);
}

// A fake peer that listens on loopback and runs `behave` on the first connection.
class FakePeer {
 public:
  explicit FakePeer(std::function<void(int)> behave) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listener_, 1);
    socklen_t len = sizeof(addr);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, behave] {
      int conn = ::accept(listener_, nullptr, nullptr);
      if (conn >= 0) {
        behave(conn);
        ::close(conn);
      }
    });
  }
  ~FakePeer() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int listener_;
  uint16_t port_;
  std::thread thread_;
};

std::string OkHeader(uint64_t data_size) {
  std::string h = internal::ReplyBody(Status::Ok());
  internal::WireWriter w(&h);
  w.Put(data_size);
  w.Put(uint64_t{0});
  return h;
}

TEST_F(TransferTest, PeerDyingMidTransferLeavesNoPartialObject) {
  FakePeer peer([](int conn) {
    char request[32];
    ::recv(conn, request, sizeof(request), MSG_WAITALL);
    std::string reply = OkHeader(1 << 20) + std::string(1000, 'x');  // then hangs up
    ::send(conn, reply.data(), reply.size(), 0);
  });
  ObjectId id = NewId(1);
  Status s = ObjectPuller(client_b_.get()).Pull(peer.address(), id, 5000);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find(id.Hex()), std::string::npos);
  EXPECT_FALSE(client_b_->Contains(id));
  EXPECT_EQ(b_->Stats().num_creating, 0u);
  EXPECT_EQ(b_->Stats().num_objects, 0u);
}

TEST_F(TransferTest, SilentPeerGivesDeadlineExceeded) {
  std::atomic<bool> release{false};
  FakePeer peer([&](int conn) {
    char request[32];
    ::recv(conn, request, sizeof(request), MSG_WAITALL);
    airt::testing::WaitUntil([&] { return release.load(); }, std::chrono::seconds(10));
  });
  Status s = ObjectPuller(client_b_.get()).Pull(peer.address(), NewId(1), 100);
  release = true;
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
}

TEST_F(TransferTest, MalformedReplyIsInvalidArgument) {
  FakePeer peer([](int conn) {
    char request[32];
    ::recv(conn, request, sizeof(request), MSG_WAITALL);
    std::string garbage(64, '\xff');  // code 255
    ::send(conn, garbage.data(), garbage.size(), 0);
  });
  EXPECT_EQ(ObjectPuller(client_b_.get()).Pull(peer.address(), NewId(1), 5000).code(),
            Code::kInvalidArgument);
}

TEST_F(TransferTest, ServerAnswersABadRequestAndKeepsServingOthers) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(transfer_->port());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::string junk(32, 'j');
  ::send(fd, junk.data(), junk.size(), 0);
  char reply[5];
  ASSERT_EQ(::recv(fd, reply, sizeof(reply), MSG_WAITALL), 5);
  EXPECT_EQ(reply[0], static_cast<char>(Code::kInvalidArgument));
  ::close(fd);
  ObjectId id = PutPattern(1, 4096);
  EXPECT_TRUE(ObjectPuller(client_b_.get()).Pull(address_, id, 5000).ok());
}

TEST_F(TransferTest, NoRoomOnThePullingNodeIsResourceExhausted) {
  ObjectId id = PutPattern(1, 200 << 20);
  ASSERT_TRUE(client_b_->Create(NewId(9), 100 << 20).ok());  // B has 156 MiB free
  Status s = ObjectPuller(client_b_.get()).Pull(address_, id, 10000);
  EXPECT_EQ(s.code(), Code::kResourceExhausted) << s.ToString();
  EXPECT_FALSE(client_b_->Contains(id));
}

}  // namespace
}  // namespace airt::objectstore
