// References inside values (docs/ownership.md): the owner's side (proto::Owner, served on the
// core worker's loop: borrowers register and leave, and ask where an object is) and the
// borrower's (registering at a ref's first reference, asking the owner at Get, releasing at the
// last reference).
#include <string>
#include <vector>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include "api/core_worker/capnp_util.h"
#include "api/core_worker/core_worker_impl.h"
#include "common/logging.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"

namespace airt::core_worker {

// How long a borrower waits for its owner to answer a registration or a location.
constexpr auto kOwnerTimeout = 30 * kj::SECONDS;

// A borrower's registration: when the borrower drops it (or its connection breaks) and it was the
// borrower's last, everything the borrower borrowed is released. Loop thread.
class BorrowLeaseServer final : public proto::BorrowLease::Server {
 public:
  BorrowLeaseServer(CoreWorker::Impl& impl, const WorkerId& borrower)
      : impl_(impl), borrower_(borrower) {
    ++impl_.borrow_leases_[borrower_];
  }
  ~BorrowLeaseServer() noexcept(false) {
    auto it = impl_.borrow_leases_.find(borrower_);
    if (it == impl_.borrow_leases_.end() || --it->second > 0) return;
    impl_.borrow_leases_.erase(it);
    if (!impl_.stopping_) impl_.refs_.RemoveBorrowerEverywhere(borrower_);
  }

 private:
  CoreWorker::Impl& impl_;
  WorkerId borrower_;
};

namespace {

// An id of a request, checked: kInvalidArgument names what is wrong.
ObjectId CheckedObjectId(capnp::Data::Reader raw) {
  if (raw.size() != ObjectId::kSize) {
    throw ToKjException(InvalidArgument("an object id of " + std::to_string(raw.size()) +
                                        " bytes (expected " + std::to_string(ObjectId::kSize) +
                                        ")"));
  }
  return ObjectId::FromRaw(raw.begin());
}

std::vector<ObjectId> CheckedObjectIds(capnp::List<capnp::Data>::Reader raw) {
  std::vector<ObjectId> ids;
  ids.reserve(raw.size());
  for (auto id : raw) ids.push_back(CheckedObjectId(id));
  return ids;
}

WorkerId CheckedWorkerId(capnp::Data::Reader raw) {
  if (raw.size() != WorkerId::kSize) {
    throw ToKjException(InvalidArgument("a borrower id of " + std::to_string(raw.size()) +
                                        " bytes (expected " + std::to_string(WorkerId::kSize) +
                                        ")"));
  }
  return WorkerId::FromRaw(raw.begin());
}

}  // namespace

class OwnerService final : public proto::Owner::Server {
 public:
  explicit OwnerService(CoreWorker::Impl& impl) : impl_(impl) {}

 protected:
  kj::Promise<void> addBorrower(AddBorrowerContext context) override {
    WorkerId borrower = CheckedWorkerId(context.getParams().getBorrowerId());
    auto ids = context.getParams().getObjectIds();
    std::vector<uint32_t> freed;
    for (uint i = 0; i < ids.size(); ++i) {
      if (!impl_.refs_.AddBorrower(CheckedObjectId(ids[i]), borrower)) freed.push_back(i);
    }
    auto results = context.getResults();
    results.setLease(kj::heap<BorrowLeaseServer>(impl_, borrower));
    auto list = results.initFreed(static_cast<uint>(freed.size()));
    for (size_t i = 0; i < freed.size(); ++i) list.set(static_cast<uint>(i), freed[i]);
    return kj::READY_NOW;
  }

  kj::Promise<void> removeBorrower(RemoveBorrowerContext context) override {
    WorkerId borrower = CheckedWorkerId(context.getParams().getBorrowerId());
    for (auto raw : context.getParams().getObjectIds()) {
      impl_.refs_.RemoveBorrower(CheckedObjectId(raw), borrower);
    }
    return kj::READY_NOW;
  }

  kj::Promise<void> getObject(GetObjectContext context) override {
    ObjectId id = CheckedObjectId(context.getParams().getObjectId());
    if (!impl_.refs_.Has(id)) {
      auto results = context.getResults();
      results.setFailed(true);
      auto error = results.initError();
      error.setKind(ErrorKind::OBJECT_LOST);
      error.setMessage("object " + id.Hex() + " was freed by its owner (worker " +
                       impl_.self_.Hex() + " at " + impl_.owner_address_ +
                       ") before it was borrowed: nothing held a reference to it");
      return kj::READY_NOW;
    }
    return impl_.memory_.WhenReady(id).then([context](ObjectEntry entry) mutable {
      auto results = context.getResults();
      if (entry.error) {
        results.setFailed(true);
        auto error = results.initError();
        error.setKind(entry.error->kind);
        error.setFunctionName(entry.error->function_name);
        error.setMessage(entry.error->message);
        error.setData(AsData(entry.error->data));
      } else if (entry.location) {
        auto where = results.initValue().initObject();
        where.setObjectId(AsData(entry.location->id.Binary()));
        where.setTransferAddress(entry.location->transfer_address);
        where.setSize(entry.location->size);
        where.setNodeAddress(entry.location->node_address);
      } else {
        results.initValue().setInline(AsData(entry.value ? *entry.value : std::string()));
      }
    });
  }

  // A node leaving (core_worker_relocation.cc). kInvalidArgument: a malformed id.
  kj::Promise<void> heldObjects(HeldObjectsContext context) override {
    std::vector<ObjectId> ids = CheckedObjectIds(context.getParams().getObjectIds());
    std::vector<bool> held = impl_.HeldObjects(ids);
    auto list = context.getResults().initHeld(static_cast<uint>(held.size()));
    for (size_t i = 0; i < held.size(); ++i) list.set(static_cast<uint>(i), held[i]);
    return kj::READY_NOW;
  }

  kj::Promise<void> objectsMoved(ObjectsMovedContext context) override {
    auto params = context.getParams();
    std::vector<ObjectId> ids = CheckedObjectIds(params.getObjectIds());
    std::vector<bool> taken =
        impl_.ObjectsMoved(params.getFromNode().cStr(), ids, params.getNodeAddress().cStr(),
                           params.getTransferAddress().cStr());
    auto list = context.getResults().initHeld(static_cast<uint>(taken.size()));
    for (size_t i = 0; i < taken.size(); ++i) list.set(static_cast<uint>(i), taken[i]);
    return kj::READY_NOW;
  }

  // A node pulled copies (core_worker_locations.cc). kInvalidArgument: a malformed id.
  kj::Promise<void> addObjectLocations(AddObjectLocationsContext context) override {
    auto params = context.getParams();
    std::vector<ObjectId> ids = CheckedObjectIds(params.getObjectIds());
    std::vector<ObjectLocation> copies;
    copies.reserve(ids.size());
    for (const ObjectId& id : ids) {
      copies.push_back(ObjectLocation{id, params.getTransferAddress().cStr(), 0,
                                      params.getNodeAddress().cStr()});
    }
    impl_.AddCopies(copies);
    return kj::READY_NOW;
  }

  kj::Promise<void> collectiveProgress(CollectiveProgressContext context) override {
    std::optional<CollectiveProgress> progress =
        impl_.CollectiveProgressOf(context.getParams().getGroup().cStr());
    auto results = context.getResults();
    results.setKnown(progress.has_value());
    if (progress) {
      results.setEntered(progress->entered);
      results.setLeft(progress->left);
    }
    return kj::READY_NOW;
  }

 private:
  CoreWorker::Impl& impl_;
};

kj::Promise<void> CoreWorker::Impl::ServeOwner() {
  if (!owner_address_.empty()) return kj::READY_NOW;
  if (!loop_->owner_server) {
    loop_->owner_server = kj::heap<capnp::TwoPartyServer>(kj::heap<OwnerService>(*this));
  }
  return connector_->Listen(loop_->io, options_.node_address)
      .then([this](kj::Own<kj::ConnectionReceiver> listener) {
        if (!owner_address_.empty()) return;  // a call before this one served meanwhile
        owner_address_ = options_.node_address + ":" + std::to_string(listener->getPort());
        loop_->owner_listener = kj::mv(listener);
        loop_->owner_accepting = loop_->owner_server->listen(*loop_->owner_listener)
                                     .eagerlyEvaluate([](kj::Exception&& e) {
                                       AIRT_LOG(ERROR) << "the owner's port stopped accepting: "
                                                       << FromKjException(e).ToString();
                                     });
      });
}

Result<OwnerAddress> CoreWorker::Impl::OwnerOf(const ObjectId& id, bool escrow) {
  OwnerAddress owner;
  Status found = CatchKj([&] {
    OnLoop([&] {
      if (auto it = borrowed_.find(id); it != borrowed_.end()) {
        owner = it->second.owner;
        return kj::Promise<void>(kj::READY_NOW);
      }
      if (escrow) refs_.AddEscrow(id);
      return ServeOwner().then([&] { owner = OwnerAddress{owner_address_, self_}; });
    });
  });
  if (!found.ok()) {
    return found.WithContext("serving proto::Owner for object " + id.Hex() + " on " +
                             options_.node_address);
  }
  return owner;
}

ObjectError CoreWorker::Impl::OwnerDied(const ObjectId& id, const OwnerAddress& owner,
                                        const std::string& why) {
  return ObjectError{ErrorKind::OWNER_DIED, "",
                     "object " + id.Hex() + " cannot be read: its owner (worker " +
                         owner.worker.Hex() + " at " + owner.address +
                         ") died or cannot be reached (" + why +
                         "), and the object went with it. Keep the process that made the object "
                         "(its driver, or the task or actor that put or returned it) alive while "
                         "others use it.",
                     ""};
}

void CoreWorker::Impl::AddBorrowedReference(const ObjectId& id, const OwnerAddress& owner) {
  Status added = CatchKj([&] {
    OnLoop([&]() -> kj::Promise<void> {
      refs_.AddLocal(id);
      if (owner.worker == self_ || borrowed_.count(id) > 0) return kj::READY_NOW;
      borrowed_.emplace(id, Borrowed{owner, false});
      ++num_borrowed_;
      auto request = Connect(owner.address).castAs<proto::Owner>().addBorrowerRequest();
      request.setBorrowerId(AsData(self_.Binary()));
      request.initObjectIds(1).set(0, AsData(id.Binary()));
      kj::Promise<capnp::Response<proto::Owner::AddBorrowerResults>> sent = request.send();
      return loop_->io.provider->getTimer()
          .timeoutAfter(kOwnerTimeout, kj::mv(sent))
          .then(
              [this, id, owner](auto reply) {
                if (loop_->borrow_leases.count(owner.address) == 0) {
                  loop_->borrow_leases.emplace(owner.address, reply.getLease());
                  // The call answered: the owner's peer is connected. Its end is the owner's.
                  auto peer = loop_->peers.find(owner.address);
                  if (peer != loop_->peers.end() && peer->second->rpc) {
                    loop_->tasks.add(peer->second->rpc->onDisconnect().then(
                        [this, address = owner.address] { OwnerLost(address); }));
                  }
                }
                if (reply.getFreed().size() > 0 && borrowed_.count(id) > 0) {
                  memory_.Put(id, ObjectEntry{nullptr, std::nullopt,
                                              ObjectError{ErrorKind::OBJECT_LOST, "",
                                                          "object " + id.Hex() +
                                                              " was freed by its owner (worker " +
                                                              owner.worker.Hex() + " at " +
                                                              owner.address +
                                                              ") before this process borrowed it",
                                                          ""}});
                }
              },
              [this, id, owner](kj::Exception&& e) {
                Forget(owner.address);
                if (borrowed_.count(id) > 0) {
                  memory_.Put(id, ObjectEntry{nullptr, std::nullopt,
                                              OwnerDied(id, owner, FromKjException(e).ToString())});
                }
              });
    });
  });
  if (!added.ok()) AIRT_LOG(WARNING) << "borrowing " << id.Hex() << ": " << added.ToString();
}

void CoreWorker::Impl::OwnerLost(const std::string& address) {
  if (stopping_) return;
  loop_->borrow_leases.erase(address);
  Forget(address);
  for (auto& [id, borrowed] : borrowed_) {
    if (borrowed.owner.address != address) continue;
    borrowed.asked = true;  // nothing to ask any more
    memory_.Erase(id);
    memory_.Put(id, ObjectEntry{nullptr, std::nullopt,
                                OwnerDied(id, borrowed.owner, "its connection ended")});
  }
}

void CoreWorker::Impl::RequestBorrowed(std::span<const ObjectId> ids) {
  if (num_borrowed_.load(std::memory_order_relaxed) == 0) return;
  std::vector<ObjectId> wanted(ids.begin(), ids.end());
  inbox_.Post([this, wanted = std::move(wanted)] {
    for (const ObjectId& id : wanted) AskOwner(id);
  });
}

void CoreWorker::Impl::AskOwner(const ObjectId& id) {
  auto it = borrowed_.find(id);
  if (it == borrowed_.end() || it->second.asked) return;
  it->second.asked = true;
  OwnerAddress owner = it->second.owner;
  auto request = Connect(owner.address).castAs<proto::Owner>().getObjectRequest();
  request.setObjectId(AsData(id.Binary()));
  kj::Promise<capnp::Response<proto::Owner::GetObjectResults>> sent = request.send();
  loop_->tasks.add(
      loop_->io.provider->getTimer()
          .timeoutAfter(kOwnerTimeout, kj::mv(sent))
          .then(
              [this, id](auto reply) {
                if (borrowed_.count(id) == 0) return;  // released meanwhile
                ObjectEntry entry;
                if (reply.getFailed()) {
                  auto error = reply.getError();
                  entry.error = ObjectError{error.getKind(), error.getFunctionName().cStr(),
                                            error.getMessage().cStr(), ToString(error.getData())};
                } else if (reply.getValue().isInline()) {
                  entry.value =
                      std::make_shared<const std::string>(ToString(reply.getValue().getInline()));
                } else {
                  auto where = reply.getValue().getObject();
                  entry.location = ObjectLocation{id, where.getTransferAddress().cStr(),
                                                  where.getSize(), where.getNodeAddress().cStr()};
                }
                memory_.Put(id, std::move(entry));
              },
              [this, id, owner](kj::Exception&& e) {
                Forget(owner.address);
                if (borrowed_.count(id) == 0) return;
                memory_.Put(id, ObjectEntry{nullptr, std::nullopt,
                                            OwnerDied(id, owner, FromKjException(e).ToString())});
              }));
}

void CoreWorker::Impl::ReleaseBorrowed(const ObjectId& id) {
  auto it = borrowed_.find(id);
  OwnerAddress owner = std::move(it->second.owner);
  borrowed_.erase(it);
  --num_borrowed_;
  memory_.Erase(id);
  if (stopping_) return;
  auto request = Connect(owner.address).castAs<proto::Owner>().removeBorrowerRequest();
  request.setBorrowerId(AsData(self_.Binary()));
  request.initObjectIds(1).set(0, AsData(id.Binary()));
  loop_->tasks.add(request.send().ignoreResult().catch_([](kj::Exception&&) {
    // The owner is gone: what it owned went with it.
  }));
}

ReferenceSnapshot CoreWorker::Impl::References(const ObjectId& id) {
  ReferenceSnapshot snapshot;
  OnLoop([&] {
    snapshot.referenced = refs_.Has(id);
    snapshot.borrowed = borrowed_.count(id) > 0;
    snapshot.borrowers = refs_.NumBorrowers(id);
    for (const ObjectLocation& copy : CopiesOf(id)) snapshot.copies.push_back(copy.node_address);
  });
  return snapshot;
}

Result<OwnerAddress> CoreWorker::OwnerOf(const ObjectId& id, bool escrow) {
  return impl_->OwnerOf(id, escrow);
}
void CoreWorker::AddBorrowedReference(const ObjectId& id, const OwnerAddress& owner) {
  impl_->AddBorrowedReference(id, owner);
}
ReferenceSnapshot CoreWorker::References(const ObjectId& id) { return impl_->References(id); }

}  // namespace airt::core_worker
