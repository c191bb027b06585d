// The owner's location table beyond the primary copy (docs/ownership.md "Copies"): the nodes that
// pulled a copy of an object this process owns tell it (through the submitter of the task they
// pulled it for, or through the reader's core worker), so that when the primary's node dies a
// surviving copy becomes the primary instead of the object counting as lost. Loop thread.
#include <algorithm>
#include <map>
#include <tuple>

#include "api/core_worker/capnp_util.h"
#include "api/core_worker/core_worker_impl.h"
#include "common/logging.h"

namespace airt::core_worker {
namespace {

// How long the node of a promoted copy may take to keep it as its primary copy.
constexpr uint64_t kPromoteTimeoutMs = 10'000;

}  // namespace

void CoreWorker::Impl::AddCopies(const std::vector<ObjectLocation>& copies) {
  // Borrowed ones go on to their owners, one call per owner and node.
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<ObjectId>> forward;
  for (const ObjectLocation& copy : copies) {
    if (copy.node_address.empty() || copy.transfer_address.empty()) continue;
    if (auto b = borrowed_.find(copy.id); b != borrowed_.end()) {
      if (b->second.owner.address.empty() || b->second.copy_reported.count(copy.node_address) > 0) {
        continue;
      }
      b->second.copy_reported.insert(copy.node_address);
      forward[{b->second.owner.address, copy.node_address, copy.transfer_address}].push_back(
          copy.id);
      continue;
    }
    if (!refs_.Has(copy.id) || dead_nodes_.count(copy.node_address) > 0) continue;
    std::optional<ObjectEntry> entry = memory_.Peek(copy.id);
    if (!entry || !entry->location || entry->location->node_address == copy.node_address) {
      continue;  // an inline value or an error has no copies; the primary is not one
    }
    std::vector<ObjectLocation>& at = copies_[copy.id];
    bool known = std::any_of(at.begin(), at.end(), [&](const ObjectLocation& l) {
      return l.node_address == copy.node_address;
    });
    if (known) continue;
    ObjectLocation location = copy;
    location.size = entry->location->size;
    at.push_back(std::move(location));
  }
  for (auto& [key, ids] : forward) {
    const auto& [owner, node, transfer] = key;
    auto request = Connect(owner).castAs<proto::Owner>().addObjectLocationsRequest();
    request.setNodeAddress(node);
    request.setTransferAddress(transfer);
    auto list = request.initObjectIds(static_cast<unsigned>(ids.size()));
    for (size_t i = 0; i < ids.size(); ++i) list.set(static_cast<unsigned>(i), AsData(ids[i].Binary()));
    // An owner that cannot be reached loses nothing of ours: its objects fail with OWNER_DIED.
    loop_->tasks.add(request.send().ignoreResult().catch_([](kj::Exception&&) {}));
  }
}

void CoreWorker::Impl::ReportLocalCopies(std::vector<ObjectId> ids) {
  if (ids.empty()) return;
  inbox_.Post([this, ids = std::move(ids)] {
    std::vector<ObjectLocation> copies;
    copies.reserve(ids.size());
    for (const ObjectId& id : ids) {
      copies.push_back(ObjectLocation{id, transfer_address_, 0, node_address_});
    }
    AddCopies(copies);
  });
}

std::vector<ObjectLocation> CoreWorker::Impl::CopiesOf(const ObjectId& id) const {
  auto it = copies_.find(id);
  return it == copies_.end() ? std::vector<ObjectLocation>{} : it->second;
}

void CoreWorker::Impl::DropCopiesAt(const std::string& node) {
  for (auto it = copies_.begin(); it != copies_.end();) {
    std::erase_if(it->second, [&](const ObjectLocation& l) { return l.node_address == node; });
    it = it->second.empty() ? copies_.erase(it) : std::next(it);
  }
}

void CoreWorker::Impl::FreeCopies(const ObjectId& id) {
  auto it = copies_.find(id);
  if (it == copies_.end()) return;
  for (const ObjectLocation& copy : it->second) {
    if (copy.node_address == node_address_) continue;  // Free deleted this node's copy
    if (remote_frees_.empty()) loop_->tasks.add(kj::evalLater([this] { FlushRemoteFrees(); }));
    remote_frees_[copy.node_address].push_back(id);
  }
  copies_.erase(it);
}

bool CoreWorker::Impl::Promote(const ObjectId& id, const std::string& from) {
  auto it = copies_.find(id);
  if (it == copies_.end()) return false;
  std::vector<ObjectLocation>& at = it->second;
  std::erase_if(at, [&](const ObjectLocation& l) {
    return l.node_address == from || dead_nodes_.count(l.node_address) > 0;
  });
  // This node's copy first (a Get here reads it without a pull), else the oldest.
  auto pick = std::find_if(at.begin(), at.end(),
                           [&](const ObjectLocation& l) { return l.node_address == node_address_; });
  if (pick == at.end()) pick = at.begin();
  if (pick == at.end()) {
    copies_.erase(it);
    return false;
  }
  ObjectLocation to = *pick;
  at.erase(pick);
  if (at.empty()) copies_.erase(it);
  if (!memory_.Relocate(id, from, to)) return false;
  AIRT_LOG(INFO) << "object " << id.Hex() << ": its primary copy on node " << from
                 << " is gone; the copy on node " << to.node_address << " is its primary now";
  // That node keeps it as a primary copy from now on (spilled, never evicted). When it cannot
  // (it dropped the copy meanwhile), the object is recovered again from what is left.
  if (to.node_address == node_address_) {
    Status kept = store_->MakePrimary(id, owner_address_);
    if (!kept.ok()) {
      loop_->tasks.add(kj::evalLater([this, id, to, why = kept.ToString()] {
        Recover(id, to.node_address, "which no longer holds it (" + why + ")");
      }));
    }
    return true;
  }
  auto request = Connect(to.node_address).castAs<proto::Node>().pullPrimariesRequest();
  request.setFromTransfer(to.transfer_address);
  request.initObjects(1).set(0, AsData(id.Binary()));
  request.initOwners(1).set(0, owner_address_);
  request.setTimeoutMs(kPromoteTimeoutMs);
  loop_->tasks.add(request.send().then(
      [this, id, to](auto reply) {
        auto errors = reply.getErrors();
        if (errors.size() == 1 && errors[0].size() == 0) return;
        std::string why = errors.size() == 1 ? errors[0].cStr() : "no answer for it";
        Recover(id, to.node_address, "which no longer holds it (" + why + ")");
      },
      [](kj::Exception&&) {
        // The node cannot be reached: when it died, the head's feed says so (NodeDied); while it
        // lives, its copy stays the primary, evictable.
      }));
  return true;
}

}  // namespace airt::core_worker
