// Where primary copies go when the arena is full: the filesystem, behind a small interface so
// tests can run it in memory or inject faults (STYLE.md rule 8). Used from the store's loop
// thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/ids.h"
#include "common/status.h"

namespace airt::objectstore::internal {

class SpillStorage {
 public:
  virtual ~SpillStorage() = default;
  // Stores `bytes` under `id`, replacing any earlier copy. On failure nothing is stored under
  // `id`. kResourceExhausted: the disk is full.
  virtual Status Write(const ObjectId& id, std::span<const uint8_t> bytes) = 0;
  // Fills all of `out` from the copy under `id`. kNotFound: none; kInternal: it is shorter.
  virtual Status Read(const ObjectId& id, std::span<uint8_t> out) = 0;
  // Drops the copy under `id`; ok when there is none.
  virtual Status Remove(const ObjectId& id) = 0;
};

// One file per object, named by its hex id, in a directory this store owns. The directory is
// created if missing; files left from an earlier store in it are removed at start.
class DiskSpillStorage : public SpillStorage {
 public:
  static Result<std::unique_ptr<DiskSpillStorage>> Open(const std::string& dir);

  Status Write(const ObjectId& id, std::span<const uint8_t> bytes) override;
  Status Read(const ObjectId& id, std::span<uint8_t> out) override;
  Status Remove(const ObjectId& id) override;

 private:
  explicit DiskSpillStorage(std::string dir) : dir_(std::move(dir)) {}
  std::string PathOf(const ObjectId& id) const { return dir_ + "/" + id.Hex(); }

  std::string dir_;
};

}  // namespace airt::objectstore::internal
