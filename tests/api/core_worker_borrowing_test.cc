// Borrowed references between core workers over RPC: escrow, inline values, broken borrowers,
// dead owners, moved primaries (the fixture: tests/api/core_worker_rpc_fixture.h).
#include "tests/api/core_worker_rpc_fixture.h"

namespace airt::testing {
namespace {

class Borrowing : public CoreWorkerRpc {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(CoreWorkerRpc::SetUp());
    ASSERT_NO_FATAL_FAILURE(StartDriver());
    core_worker::CoreWorkerOptions options;
    options.head_address = head_->address();
    options.node_address = kNodeHost;
    options.connector = network_;
    auto core = core_worker::CoreWorker::Connect(options);
    ASSERT_TRUE(core.ok()) << core.status().ToString();
    borrower_ = std::move(*core);
  }
  void TearDown() override {
    borrower_.reset();
    CoreWorkerRpc::TearDown();
  }

  // A 1 MiB object in the store, owned by the driver, with one local reference; the address a
  // ref to it names.
  ObjectId PutBig(core_worker::OwnerAddress* owner) {
    Result<ObjectId> id = driver_->Put(std::string(1 << 20, 'b'));
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    driver_->AddLocalReference(*id);
    Result<core_worker::OwnerAddress> named = driver_->OwnerOf(*id, false);
    EXPECT_TRUE(named.ok()) << named.status().ToString();
    *owner = *named;
    return *id;
  }
  bool InStore(const ObjectId& id) { return client_->Contains(id); }

  // The borrower's Get of `id`: its size, or its error.
  std::variant<size_t, core_worker::ObjectError, Status> BorrowerGet(const ObjectId& id) {
    std::variant<size_t, core_worker::ObjectError, Status> got = Status::Ok();
    ObjectId ids[] = {id};
    Status s = borrower_->GetEach(ids, 20'000, [&](size_t, core_worker::GotObject& object) {
      if (object.error) {
        got = *object.error;
      } else {
        got = object.bytes().size();
      }
    });
    if (!s.ok()) got = s;
    return got;
  }

  std::unique_ptr<core_worker::CoreWorker> borrower_;
};

TEST_F(Borrowing, ABorrowedObjectOutlivesItsOwnersRefAndGoesWithTheLastBorrow) {
  core_worker::OwnerAddress owner;
  ObjectId id = PutBig(&owner);
  EXPECT_EQ(driver_->References(id).borrowers, 0u);
  borrower_->AddBorrowedReference(id, owner);
  EXPECT_EQ(driver_->References(id).borrowers, 1u);
  EXPECT_TRUE(borrower_->References(id).borrowed);
  driver_->RemoveLocalReference(id);
  EXPECT_TRUE(driver_->References(id).referenced) << "freed while borrowed";
  ASSERT_TRUE(InStore(id));
  auto got = BorrowerGet(id);
  ASSERT_TRUE(std::holds_alternative<size_t>(got));
  EXPECT_EQ(std::get<size_t>(got), 1u << 20);
  borrower_->RemoveLocalReference(id);
  EXPECT_TRUE(WaitFor([&] { return !InStore(id); })) << "kept after the last borrow went";
  EXPECT_FALSE(driver_->References(id).referenced);
}

TEST_F(Borrowing, NodeAddressesOfNamesTheStoreNodeOfWhatTheOwnerHoldsThere) {
  core_worker::OwnerAddress owner;
  ObjectId big = PutBig(&owner);
  Result<ObjectId> small = driver_->Put("small");
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  driver_->AddLocalReference(*small);
  ObjectId unknown = ObjectId::FromRandom();
  ObjectId ids[] = {big, *small, unknown};
  std::vector<std::string> where = driver_->NodeAddressesOf(ids);
  ASSERT_EQ(where.size(), 3u);
  EXPECT_EQ(where[0], driver_->node_address()) << "a 1 MiB put lies in this node's store";
  EXPECT_EQ(where[1], "") << "a small put is held inline";
  EXPECT_EQ(where[2], "") << "an object this process does not know";
  // A borrower's table does not say where the owner's object lies.
  borrower_->AddBorrowedReference(big, owner);
  EXPECT_EQ(borrower_->NodeAddressesOf(std::span<const ObjectId>(&big, 1)).at(0), "");
  borrower_->RemoveLocalReference(big);
  driver_->RemoveLocalReference(*small);
  driver_->RemoveLocalReference(big);
}

TEST_F(Borrowing, ASmallBorrowedValueComesInlineFromItsOwner) {
  Result<ObjectId> id = driver_->Put(Serialize(42));
  ASSERT_TRUE(id.ok());
  driver_->AddLocalReference(*id);
  Result<core_worker::OwnerAddress> owner = driver_->OwnerOf(*id, false);
  ASSERT_TRUE(owner.ok());
  borrower_->AddBorrowedReference(*id, *owner);
  ObjectId ids[] = {*id};
  int value = 0;
  ASSERT_TRUE(borrower_->GetEach(ids, 20'000, [&](size_t, core_worker::GotObject& object) {
                          ASSERT_FALSE(object.error) << object.error->message;
                          value = Deserialize<int>(object.bytes());
                        }).ok());
  EXPECT_EQ(value, 42);
  borrower_->RemoveLocalReference(*id);
  driver_->RemoveLocalReference(*id);
  EXPECT_TRUE(WaitFor([&] { return !driver_->References(*id).referenced; }));
}

TEST_F(Borrowing, ABorrowerWhoseConnectionBreaksReleasesWhatItBorrowed) {
  core_worker::OwnerAddress owner;
  ObjectId id = PutBig(&owner);
  borrower_->AddBorrowedReference(id, owner);
  driver_->RemoveLocalReference(id);
  ASSERT_TRUE(InStore(id));
  // As the borrower's process dying: every connection to the owner is cut.
  EXPECT_GE(network_->Break(owner.address), 1u);
  EXPECT_TRUE(WaitFor([&] { return !InStore(id); })) << "a dead borrower kept the object";
  EXPECT_EQ(driver_->References(id).borrowers, 0u);
}

TEST_F(Borrowing, AnEscrowedRefIsKeptUntilABorrowerRegisters) {
  core_worker::OwnerAddress owner;
  ObjectId id = PutBig(&owner);
  ASSERT_TRUE(driver_->OwnerOf(id, /*escrow=*/true).ok());  // written into a task's return
  driver_->RemoveLocalReference(id);
  EXPECT_TRUE(driver_->References(id).referenced) << "freed before its reader borrowed it";
  borrower_->AddBorrowedReference(id, owner);
  borrower_->RemoveLocalReference(id);
  EXPECT_TRUE(WaitFor([&] { return !InStore(id); }));
}

TEST_F(Borrowing, GetOfABorrowedObjectWhoseOwnerDiedRaisesOwnerDied) {
  core_worker::OwnerAddress owner;
  ObjectId id = PutBig(&owner);
  borrower_->AddBorrowedReference(id, owner);
  ASSERT_TRUE(std::holds_alternative<size_t>(BorrowerGet(id)));
  driver_.reset();  // the owner's process ends: what the borrower found before fails too
  std::variant<size_t, core_worker::ObjectError, Status> got;
  ASSERT_TRUE(WaitFor([&] {
    got = BorrowerGet(id);
    return !std::holds_alternative<size_t>(got);
  }));
  ASSERT_TRUE(std::holds_alternative<core_worker::ObjectError>(got));
  const core_worker::ObjectError& error = std::get<core_worker::ObjectError>(got);
  EXPECT_EQ(error.kind, core_worker::ErrorKind::OWNER_DIED) << error.message;
  EXPECT_NE(error.message.find(id.Hex()), std::string::npos) << error.message;
  EXPECT_NE(error.message.find(owner.address), std::string::npos) << error.message;
  borrower_->RemoveLocalReference(id);
}

TEST_F(Borrowing, BorrowingFromAnOwnerThatIsGoneFailsTheGetNotTheBorrow) {
  core_worker::OwnerAddress gone{kNodeHost + ":999", WorkerId::FromRandom()};
  ObjectId id = ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), 1);
  borrower_->AddBorrowedReference(id, gone);
  auto got = BorrowerGet(id);
  ASSERT_TRUE(std::holds_alternative<core_worker::ObjectError>(got));
  EXPECT_EQ(std::get<core_worker::ObjectError>(got).kind, core_worker::ErrorKind::OWNER_DIED);
  borrower_->RemoveLocalReference(id);
}

// A node leaving (docs/ownership.md "When a node leaves"): a put names its owner in the store;
// the owner says what it still holds and takes a new location for it; a borrower whose copy is
// gone asks the owner again and reads where it points now.
TEST_F(Borrowing, APrimaryNamesItsOwnerWhoTakesItsNewLocationAndTheBorrowerAsksAgain) {
  core_worker::OwnerAddress owner;
  ObjectId id = PutBig(&owner);
  Result<std::vector<objectstore::PrimaryCopy>> listed = client_->ListPrimaries();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  auto mine = std::find_if(listed->begin(), listed->end(),
                           [&](const objectstore::PrimaryCopy& c) { return c.id == id; });
  ASSERT_NE(mine, listed->end());
  EXPECT_EQ(mine->owner, owner.address);
  borrower_->AddBorrowedReference(id, owner);
  ASSERT_TRUE(std::holds_alternative<size_t>(BorrowerGet(id)));  // it knows the old location

  const std::string moved_to = "127.0.0.9:7000";  // nothing serves there
  ObjectId unknown = ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), 1);
  {
    kj::AsyncIoContext io = kj::setupAsyncIo();
    auto stream = network_->Connect(io, owner.address).wait(io.waitScope);
    capnp::TwoPartyClient rpc(*stream);
    auto service = rpc.bootstrap().castAs<proto::Owner>();
    auto held = service.heldObjectsRequest();
    held.initObjectIds(2).set(0, core_worker::AsData(id.Binary()));
    held.getObjectIds().set(1, core_worker::AsData(unknown.Binary()));
    auto answer = held.send().wait(io.waitScope).getHeld();
    ASSERT_EQ(answer.size(), 2u);
    EXPECT_TRUE(answer[0]);
    EXPECT_FALSE(answer[1]);
    auto moved = [&](const std::string& from) {
      auto request = service.objectsMovedRequest();
      request.setFromNode(from);
      request.setNodeAddress(moved_to);
      request.setTransferAddress(moved_to);
      request.initObjectIds(1).set(0, core_worker::AsData(id.Binary()));
      return request.send().wait(io.waitScope).getHeld()[0];
    };
    EXPECT_FALSE(moved("127.0.0.8:1"));  // not where it lies: unchanged
    EXPECT_TRUE(moved(driver_->node_address()));
  }
  ASSERT_TRUE(client_->Delete(id).ok());  // the leaving node's copy goes
  auto got = BorrowerGet(id);
  ASSERT_TRUE(std::holds_alternative<core_worker::ObjectError>(got));
  const core_worker::ObjectError& error = std::get<core_worker::ObjectError>(got);
  EXPECT_EQ(error.kind, core_worker::ErrorKind::OBJECT_LOST) << error.message;
  EXPECT_NE(error.message.find(moved_to), std::string::npos) << error.message;
  borrower_->RemoveLocalReference(id);
}

}  // namespace
}  // namespace airt::testing
