#include "objectstore/internal/fallback_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include <sys/mman.h>

#include "common/logging.h"
#include "common/unique_fd.h"
#include "objectstore/internal/layout.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace airt::objectstore::internal {
namespace {

constexpr char kPrefix[] = "airt-fallback-";

std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

}  // namespace

std::string FallbackPath(const std::string& dir, const ObjectId& id, uint64_t number) {
  return dir + "/" + kPrefix + std::to_string(number) + "-" + id.Hex();
}

uint64_t FallbackFootprint(uint64_t size) {
  if (size == 0) return kPageSize;
  if (size > ~uint64_t{0} - kPageSize) return ~uint64_t{0};
  return AlignUp(size, kPageSize);
}

Result<std::unique_ptr<FallbackFiles>> FallbackFiles::Open(std::string dir, uint64_t limit_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoStatus("create the fallback folder " + dir, ec.value());
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind(kPrefix, 0) == 0) {
      std::filesystem::remove(entry.path(), ec);
    }
  }
  if (ec) return ErrnoStatus("list the fallback folder " + dir, ec.value());
  return std::unique_ptr<FallbackFiles>(new FallbackFiles(std::move(dir), limit_bytes));
}

FallbackFiles::~FallbackFiles() {
  for (const auto& [number, id] : live_) ::unlink(FallbackPath(dir_, id, number).c_str());
}

std::string FallbackFiles::Describe() const {
  return Bytes(used_) + " in use" +
         (limit_ == kNoLimit ? ", no limit but the disk" : " of a limit of " + Bytes(limit_));
}

Result<uint64_t> FallbackFiles::Create(const ObjectId& id, uint64_t size) {
  uint64_t need = FallbackFootprint(size);
  if (limit_ != kNoLimit && (need > limit_ || used_ > limit_ - need)) {
    return ResourceExhausted("the fallback limit is reached (" + Describe() + ")");
  }
  uint64_t number = next_number_++;
  std::string path = FallbackPath(dir_, id, number);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus("create fallback file " + path, errno);
  // posix_fallocate reserves the blocks (emulating by writes where the filesystem cannot).
  int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(need));
  if (err != 0) {
    ::unlink(path.c_str());
    Status s = ErrnoStatus("reserve " + Bytes(need) + " for fallback file " + path, err);
    if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
      return ResourceExhausted("the disk of " + dir_ + " is full: " + s.message());
    }
    return s;
  }
  used_ += need;
  live_.emplace(number, id);
  return number;
}

void FallbackFiles::Remove(const ObjectId& id, uint64_t number, uint64_t size) {
  auto it = live_.find(number);
  AIRT_CHECK(it != live_.end() && it->second == id)
      << "fallback file " << number << " of " << id.Hex() << " is not live";
  live_.erase(it);
  used_ -= FallbackFootprint(size);
  std::string path = FallbackPath(dir_, id, number);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    AIRT_LOG(WARNING) << ErrnoStatus("remove fallback file " + path, errno).ToString();
  }
}

Result<FallbackMapping> FallbackMapping::Map(const std::string& path, uint64_t size,
                                             bool writable) {
  UniqueFd fd(::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open fallback file " + path, errno);
  uint64_t length = FallbackFootprint(size);
  int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
  void* p = ::mmap(nullptr, length, prot, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return ErrnoStatus("map fallback file " + path, errno);
  // Faulting the pages in at once costs far less than one fault per page as they are touched;
  // older kernels without these advices fault on touch.
  (void)::madvise(p, length, writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
  return FallbackMapping(static_cast<uint8_t*>(p), length);
}

FallbackMapping::FallbackMapping(FallbackMapping&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), length_(std::exchange(other.length_, 0)) {}

FallbackMapping& FallbackMapping::operator=(FallbackMapping&& other) noexcept {
  if (this != &other) {
    if (base_) ::munmap(base_, length_);
    base_ = std::exchange(other.base_, nullptr);
    length_ = std::exchange(other.length_, 0);
  }
  return *this;
}

FallbackMapping::~FallbackMapping() {
  if (base_) ::munmap(base_, length_);
}

}  // namespace airt::objectstore::internal
