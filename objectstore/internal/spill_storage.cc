#include "objectstore/internal/spill_storage.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "common/unique_fd.h"

namespace airt::objectstore::internal {

Result<std::unique_ptr<DiskSpillStorage>> DiskSpillStorage::Open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoStatus("create spill directory " + dir, ec.value());
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().size() == 2 * ObjectId::kSize) {
      std::filesystem::remove(entry.path(), ec);
    }
  }
  return std::unique_ptr<DiskSpillStorage>(new DiskSpillStorage(dir));
}

Status DiskSpillStorage::Write(const ObjectId& id, std::span<const uint8_t> bytes) {
  std::string path = PathOf(id);
  std::string tmp = path + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus("open spill file " + tmp, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = ErrnoStatus("write spill file " + tmp, errno);
      ::unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  fd.Reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = ErrnoStatus("rename spill file " + tmp, errno);
    ::unlink(tmp.c_str());
    return s;
  }
  return Status::Ok();
}

Status DiskSpillStorage::Read(const ObjectId& id, std::span<uint8_t> out) {
  std::string path = PathOf(id);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open spill file " + path, errno);
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read spill file " + path, errno);
    }
    if (n == 0) {
      return Internal("spill file " + path + " has " + std::to_string(done) + " bytes, expected " +
                      std::to_string(out.size()));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status DiskSpillStorage::Remove(const ObjectId& id) {
  std::string path = PathOf(id);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus("remove spill file " + path, errno);
  }
  return Status::Ok();
}

}  // namespace airt::objectstore::internal
