#include "objectstore/internal/arena_mapping.h"

#include <cerrno>
#include <utility>

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "common/logging.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace airt::objectstore::internal {

Result<ArenaMapping> ArenaMapping::Create(const Layout& layout) {
  UniqueFd fd(::memfd_create("airt-object-store", MFD_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("memfd_create", errno);
  if (::ftruncate(fd.get(), static_cast<off_t>(layout.file_size)) != 0) {
    return ErrnoStatus("size the store's memory to " + std::to_string(layout.file_size) + " bytes",
                       errno);
  }
  void* p = ::mmap(nullptr, layout.file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return ErrnoStatus("map the store's memory", errno);
  ArenaMapping mapping(std::move(fd), static_cast<uint8_t*>(p), layout.file_size);
  ArenaHeader* h = mapping.header();
  h->magic = kArenaMagic;
  h->version = kLayoutVersion;
  h->max_clients = layout.max_clients;
  h->index_offset = layout.index_offset;
  h->index_slots = layout.index_slots;
  h->pins_offset = layout.pins_offset;
  h->pin_slots_per_client = layout.pin_slots_per_client;
  h->data_offset = layout.data_offset;
  h->data_capacity = layout.data_capacity;
  h->file_size = layout.file_size;
  h->access_clock.store(1);
  return mapping;
}

Result<ArenaMapping> ArenaMapping::Attach(UniqueFd fd) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat the store's memory", errno);
  auto size = static_cast<uint64_t>(st.st_size);
  if (size < kPageSize) return Internal("the store's memory file is too small to be an arena");
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return ErrnoStatus("map the store's memory", errno);
  ArenaMapping mapping(std::move(fd), static_cast<uint8_t*>(p), size);
  const ArenaHeader* h = mapping.header();
  Layout expect = Layout::Compute(h->data_capacity, h->index_slots / 2, h->max_clients,
                                  h->pin_slots_per_client);
  if (h->magic != kArenaMagic || h->version != kLayoutVersion || h->file_size != size ||
      expect.file_size != size || expect.index_slots != h->index_slots ||
      expect.data_offset != h->data_offset || expect.pins_offset != h->pins_offset) {
    return Internal("the store's memory file does not hold an arena of layout version " +
                    std::to_string(kLayoutVersion));
  }
  return mapping;
}

ArenaMapping::ArenaMapping(ArenaMapping&& other) noexcept
    : fd_(std::move(other.fd_)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

ArenaMapping& ArenaMapping::operator=(ArenaMapping&& other) noexcept {
  if (this != &other) {
    if (base_) ::munmap(base_, size_);
    fd_ = std::move(other.fd_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

ArenaMapping::~ArenaMapping() {
  if (base_) ::munmap(base_, size_);
}

void ArenaMapping::Populate(uint64_t offset, uint64_t length) const {
  if (offset >= size_) return;
  if (length > size_ - offset) length = size_ - offset;
  uint64_t start = offset / kPageSize * kPageSize;
  uint64_t end = AlignUp(offset + length, kPageSize);
  if (::madvise(base_ + start, end - start, MADV_POPULATE_WRITE) == 0) return;
  // Older kernels: a read fault maps a shared page without changing it.
  for (uint64_t p = start; p < end; p += kPageSize) {
    (void)*static_cast<volatile uint8_t*>(base_ + p);
  }
}

BackgroundPopulator::BackgroundPopulator(const ArenaMapping* mapping, bool data) {
  thread_ = std::thread([this, mapping, data] {
    // Only idle CPU: a busy machine serves requests first and maps the rest later (every client
    // process populates its own page tables, which for a large store is seconds of kernel time).
    sched_param idle{};
    (void)::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &idle);
    constexpr uint64_t kChunk = 32ull << 20;
    const ArenaHeader& h = *mapping->header();
    // The header and index first (every lookup touches them), then the data arena.
    for (auto [begin, end] :
         {std::pair{uint64_t{0}, h.pins_offset},
          std::pair{h.data_offset, data ? h.file_size : h.data_offset}}) {
      for (uint64_t off = begin; off < end && !stop_.load(std::memory_order_relaxed);
           off += kChunk) {
        uint64_t n = std::min(kChunk, end - off);
        mapping->Populate(off, n);
        done_.fetch_add(n, std::memory_order_relaxed);
      }
    }
  });
}

void BackgroundPopulator::Wait() {
  if (thread_.joinable()) thread_.join();
}

BackgroundPopulator::~BackgroundPopulator() {
  stop_.store(true);
  Wait();
}

}  // namespace airt::objectstore::internal
