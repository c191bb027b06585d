#include "objectstore/internal/store_loop.h"
#include "objectstore/object_store.h"

namespace airt::objectstore {

Result<std::unique_ptr<StoreServer>> StoreServer::Start(StoreOptions options) {
  std::unique_ptr<internal::SpillStorage> spill;
  if (!options.spill_dir.empty()) {
    AIRT_ASSIGN_OR_RETURN(spill, internal::DiskSpillStorage::Open(options.spill_dir));
  }
  return Start(std::move(options), std::move(spill));
}

Result<std::unique_ptr<StoreServer>> StoreServer::Start(
    StoreOptions options, std::unique_ptr<internal::SpillStorage> spill) {
  AIRT_ASSIGN_OR_RETURN(auto loop,
                        internal::StoreLoop::Start(std::move(options), std::move(spill)));
  return std::unique_ptr<StoreServer>(new StoreServer(std::move(loop)));
}

StoreServer::StoreServer(std::unique_ptr<internal::StoreLoop> loop) : loop_(std::move(loop)) {}
StoreServer::~StoreServer() = default;

const std::string& StoreServer::socket_path() const { return loop_->socket_path(); }
StoreStats StoreServer::Stats() const { return loop_->Stats(); }

}  // namespace airt::objectstore
