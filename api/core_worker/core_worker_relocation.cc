// A node that leaves on purpose (idle scale-down, a drain) moves its primary copies to other
// nodes and tells their owners (docs/ownership.md "When a node leaves"): the owner's side, and
// the owner address its primary copies name in the store. The node's side is
// worker/internal/object_evacuator.h.
#include "api/core_worker/core_worker_impl.h"
#include "common/logging.h"

namespace airt::core_worker {

std::string CoreWorker::Impl::OwnerTag() {
  {
    std::lock_guard<std::mutex> lock(owner_tag_mu_);
    if (!owner_tag_.empty() || owner_tag_failed_) return owner_tag_;
  }
  Result<OwnerAddress> me = OwnerOf(ObjectId(), /*escrow=*/false);
  std::lock_guard<std::mutex> lock(owner_tag_mu_);
  if (me.ok()) {
    owner_tag_ = me->address;
  } else if (!owner_tag_failed_) {
    owner_tag_failed_ = true;
    AIRT_LOG(WARNING) << "this process's objects name no owner in the store (a node that leaves "
                         "cannot move them): "
                      << me.status().ToString();
  }
  return owner_tag_;
}

std::vector<bool> CoreWorker::Impl::HeldObjects(std::span<const ObjectId> ids) const {
  std::vector<bool> held;
  held.reserve(ids.size());
  for (const ObjectId& id : ids) held.push_back(refs_.Has(id));
  return held;
}

std::vector<bool> CoreWorker::Impl::ObjectsMoved(const std::string& from_node,
                                                 std::span<const ObjectId> ids,
                                                 const std::string& node_address,
                                                 const std::string& transfer_address) {
  std::vector<bool> taken;
  taken.reserve(ids.size());
  size_t moved = 0;
  for (const ObjectId& id : ids) {
    bool ok = false;
    if (refs_.Has(id)) {
      if (std::optional<ObjectEntry> entry = memory_.Peek(id); entry && entry->location) {
        ObjectLocation to = *entry->location;
        to.transfer_address = transfer_address;
        to.node_address = node_address;
        ok = memory_.Relocate(id, from_node, to);
        // A copy the new primary's node held before is that primary now.
        if (auto c = copies_.find(id); ok && c != copies_.end()) {
          std::erase_if(c->second,
                        [&](const ObjectLocation& l) { return l.node_address == node_address; });
          if (c->second.empty()) copies_.erase(c);
        }
      }
    }
    moved += ok ? 1 : 0;
    taken.push_back(ok);
  }
  AIRT_LOG(INFO) << "node " << from_node << " is leaving: " << moved << " of " << ids.size()
                 << " objects of this process moved to node " << node_address;
  return taken;
}

}  // namespace airt::core_worker
