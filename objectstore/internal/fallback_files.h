// Fallback memory: an object that does not fit in the arena even after eviction and spilling (or
// that is larger than the whole arena) lives in a file of its own in the store's fallback folder,
// mapped by the store and by each client that writes or reads it, as Ray's plasma fallback
// allocation does. The index slot of such an object holds kFallbackBit | the file's number in
// place of an arena offset (layout.h); FallbackPath turns that into the file's path, the same way
// in the store and in every client.
//
// A file's disk blocks are reserved when it is created (fallocate), so writing through a mapping
// never meets a full disk (which would be a SIGBUS in the writer): a full disk is a
// kResourceExhausted from Create instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "common/ids.h"
#include "common/status.h"

namespace airt::objectstore::internal {

// The path of fallback file `number`, holding object `id`, in `dir`.
std::string FallbackPath(const std::string& dir, const ObjectId& id, uint64_t number);

// The bytes the file of an object of `size` bytes takes: whole pages, at least one.
uint64_t FallbackFootprint(uint64_t size);

// The store's fallback folder: creates and removes its files and keeps their total under a
// limit. Confined to the store's loop thread.
class FallbackFiles {
 public:
  static constexpr uint64_t kNoLimit = ~uint64_t{0};

  // Creates `dir` if missing and removes the fallback files an earlier store left in it.
  // `limit_bytes`: the most the files may hold at once (kNoLimit: what the disk holds).
  // An error when the folder cannot be made or listed.
  static Result<std::unique_ptr<FallbackFiles>> Open(std::string dir, uint64_t limit_bytes);
  // Removes the files still there (clients' mappings of them stay valid until unmapped).
  ~FallbackFiles();
  FallbackFiles(const FallbackFiles&) = delete;
  FallbackFiles& operator=(const FallbackFiles&) = delete;

  // Creates the file of an object of `size` bytes, its blocks reserved; returns its number.
  // kResourceExhausted when the limit would be passed or the disk is full (the message says
  // which, with the folder); nothing is left behind then.
  Result<uint64_t> Create(const ObjectId& id, uint64_t size);
  // Removes file `number` of `id`, made by Create for an object of `size` bytes.
  void Remove(const ObjectId& id, uint64_t number, uint64_t size);

  const std::string& dir() const { return dir_; }
  uint64_t used_bytes() const { return used_; }
  uint64_t limit_bytes() const { return limit_; }
  uint64_t num_files() const { return live_.size(); }
  // "N bytes in use of a limit of M" or "N bytes in use, no limit but the disk".
  std::string Describe() const;

 private:
  FallbackFiles(std::string dir, uint64_t limit) : dir_(std::move(dir)), limit_(limit) {}

  std::string dir_;
  uint64_t limit_;
  uint64_t used_ = 0;
  uint64_t next_number_ = 1;
  std::unordered_map<uint64_t, ObjectId> live_;  // number -> object
};

// A fallback file mapped into this process, unmapped when destroyed. Move-only.
class FallbackMapping {
 public:
  // Maps the file at `path` holding an object of `size` bytes, writable or read-only, and
  // faults its pages in. kNotFound when the file is gone; other errors from open or mmap.
  static Result<FallbackMapping> Map(const std::string& path, uint64_t size, bool writable);

  FallbackMapping() = default;
  FallbackMapping(FallbackMapping&& other) noexcept;
  FallbackMapping& operator=(FallbackMapping&& other) noexcept;
  ~FallbackMapping();

  uint8_t* data() const { return base_; }

 private:
  FallbackMapping(uint8_t* base, uint64_t length) : base_(base), length_(length) {}
  uint8_t* base_ = nullptr;
  uint64_t length_ = 0;
};

}  // namespace airt::objectstore::internal
