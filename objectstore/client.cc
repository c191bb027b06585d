#include <unistd.h>

#include <chrono>
#include <cstring>
#include <unordered_map>

#include "common/logging.h"
#include "objectstore/internal/arena_mapping.h"
#include "objectstore/internal/fallback_files.h"
#include "objectstore/internal/protocol.h"
#include "objectstore/internal/shared_index.h"
#include "objectstore/internal/stream_copy.h"
#include "objectstore/internal/unix_socket.h"
#include "objectstore/object_store.h"

namespace airt::objectstore {

using internal::FrameHeader;
using internal::MessageType;
using internal::WireReader;
using internal::WireWriter;

// The fallback files this client has mapped: one per object it is creating there (dropped at Seal
// or Abort), one per index slot it pins (dropped with its last pin there).
struct StoreClient::FallbackViews {
  std::unordered_map<ObjectId, internal::FallbackMapping> creating;  // guarded by socket_mu_
  std::unordered_map<uint32_t, internal::FallbackMapping> pinned;    // guarded by pins_mu_
};

namespace {
constexpr size_t kMaxWaitIds = 100000;  // 2.8 MB of ids, well under internal::kMaxBodySize

Status CheckOwnerSize(const ObjectId& id, std::string_view owner) {
  if (owner.size() <= kMaxOwnerBytes) return Status::Ok();
  return InvalidArgument("the owner of object " + id.Hex() + " is " +
                         std::to_string(owner.size()) + " bytes, over the limit of " +
                         std::to_string(kMaxOwnerBytes));
}
}  // namespace

ObjectPin::ObjectPin(ObjectPin&& other) noexcept { *this = std::move(other); }

ObjectPin& ObjectPin::operator=(ObjectPin&& other) noexcept {
  if (this != &other) {
    Release();
    client_ = std::exchange(other.client_, nullptr);
    slot_ = other.slot_;
    id_ = other.id_;
    data_ = other.data_;
    metadata_ = other.metadata_;
  }
  return *this;
}

void ObjectPin::Release() {
  if (client_ == nullptr) return;
  std::exchange(client_, nullptr)->ReleasePin(slot_, id_);
  data_ = {};
  metadata_ = {};
}

Result<std::unique_ptr<StoreClient>> StoreClient::Connect(const std::string& socket_path) {
  return Connect(socket_path, Options());
}

Result<std::unique_ptr<StoreClient>> StoreClient::Connect(const std::string& socket_path,
                                                          Options options) {
  AIRT_ASSIGN_OR_RETURN(UniqueFd fd, internal::ConnectUnix(socket_path));
  std::string hello;
  WireWriter w(&hello);
  w.Put(internal::kProtocolVersion);
  w.Put(static_cast<int32_t>(::getpid()));
  AIRT_RETURN_IF_ERROR(
      internal::SendAll(fd.get(), internal::MakeFrame(MessageType::kHello, 0, 0, hello)));

  char header_bytes[internal::kHeaderSize];
  FrameHeader h;
  // A refused Hello comes without a descriptor: read the header plainly then.
  Result<UniqueFd> memfd = internal::RecvWithFd(fd.get(), header_bytes, internal::kHeaderSize);
  if (!memfd.ok() && memfd.status().code() != Code::kInternal) return memfd.status();
  AIRT_RETURN_IF_ERROR(internal::DecodeHeader(header_bytes, &h));
  std::string body(h.body_size, '\0');
  AIRT_RETURN_IF_ERROR(internal::RecvAll(fd.get(), body.data(), body.size()));
  WireReader r(body);
  AIRT_RETURN_IF_ERROR(internal::ParseReplyStatus(&r).WithContext(
      "connecting to the object store at " + socket_path));
  if (!memfd.ok()) return memfd.status();
  uint32_t slot;
  uint64_t file_size;
  uint32_t dir_size;
  std::string_view fallback_dir;
  if (!r.Get(&slot) || !r.Get(&file_size) || !r.Get(&dir_size) ||
      !r.GetBytes(dir_size, &fallback_dir)) {
    return Internal("truncated Hello reply from the store");
  }
  AIRT_ASSIGN_OR_RETURN(internal::ArenaMapping mapping,
                        internal::ArenaMapping::Attach(std::move(memfd).value()));
  if (mapping.size() != file_size || slot >= mapping.header()->max_clients) {
    return Internal("the store's Hello reply does not match its memory file");
  }
  auto owned = std::make_unique<internal::ArenaMapping>(std::move(mapping));
  auto client =
      std::unique_ptr<StoreClient>(new StoreClient(fd.Release(), std::move(owned), slot, options));
  client->fallback_dir_ = std::string(fallback_dir);
  return client;
}

StoreClient::StoreClient(int fd, std::unique_ptr<internal::ArenaMapping> mapping, uint32_t slot,
                         Options options)
    : fd_(fd),
      options_(options),
      mapping_(std::move(mapping)),
      client_slot_(slot),
      fallback_(std::make_unique<FallbackViews>()) {
  internal::ArenaHeader* h = mapping_->header();
  index_ = std::make_unique<internal::SharedIndex>(h, mapping_->slots(), h->index_slots);
  pins_ = std::make_unique<internal::PinTable>(mapping_->PinTableOf(slot), h->pin_slots_per_client);
  if (options_.prefault)
    populator_ =
        std::make_unique<internal::BackgroundPopulator>(mapping_.get(), options_.prefault_data);
}

StoreClient::~StoreClient() {
  populator_.reset();
  ::close(fd_);  // the store undoes our pins and aborts our creates
}

Status StoreClient::Send(uint16_t type, std::string_view body) {
  return internal::SendAll(
      fd_, internal::MakeFrame(static_cast<MessageType>(type), 0, next_request_id_++, body));
}

// Caller holds socket_mu_.
Result<std::string> StoreClient::Call(uint16_t type, std::string_view body) {
  uint32_t request_id = next_request_id_;
  AIRT_RETURN_IF_ERROR(Send(type, body));
  char header_bytes[internal::kHeaderSize];
  AIRT_RETURN_IF_ERROR(
      internal::RecvAll(fd_, header_bytes, internal::kHeaderSize, options_.spin_us));
  FrameHeader h;
  AIRT_RETURN_IF_ERROR(internal::DecodeHeader(header_bytes, &h));
  if (h.type != static_cast<uint16_t>(MessageType::kReply) || h.request_id != request_id) {
    return Internal("the object store answered request " + std::to_string(h.request_id) +
                    " while " + std::to_string(request_id) + " was expected");
  }
  std::string reply(h.body_size, '\0');
  AIRT_RETURN_IF_ERROR(internal::RecvAll(fd_, reply.data(), reply.size(), options_.spin_us));
  return reply;
}

Result<MutableObject> StoreClient::Create(const ObjectId& id, uint64_t data_size,
                                          uint64_t metadata_size, bool secondary,
                                          std::string_view owner) {
  AIRT_RETURN_IF_ERROR(CheckOwnerSize(id, owner));
  std::string body;
  WireWriter w(&body);
  w.PutId(id);
  w.Put(data_size);
  w.Put(metadata_size);
  w.Put(static_cast<uint8_t>(secondary ? internal::kCreateSecondary : 0));
  if (!owner.empty() && !secondary) {
    w.Put(static_cast<uint32_t>(owner.size()));
    w.PutBytes(owner);
  }
  std::lock_guard<std::mutex> lock(socket_mu_);
  AIRT_ASSIGN_OR_RETURN(std::string reply, Call(static_cast<uint16_t>(MessageType::kCreate), body));
  WireReader r(reply);
  AIRT_RETURN_IF_ERROR(internal::ParseReplyStatus(&r));
  uint64_t offset;
  if (!r.Get(&offset) ||
      (!internal::IsFallback(offset) && offset + data_size + metadata_size > mapping_->size())) {
    return Internal("the object store's Create reply for " + id.Hex() + " is malformed");
  }
  uint8_t* base = nullptr;
  if (!internal::IsFallback(offset)) {
    base = mapping_->base() + offset;
  } else {
    Result<internal::FallbackMapping> file = internal::FallbackMapping::Map(
        internal::FallbackPath(fallback_dir_, id, internal::FallbackNumber(offset)),
        data_size + metadata_size, /*writable=*/true);
    if (!file.ok()) {
      // Give the object back; the store aborts it at disconnect if this fails too.
      std::string abort;
      WireWriter(&abort).PutId(id);
      (void)Call(static_cast<uint16_t>(MessageType::kAbort), abort);
      return file.status().WithContext("creating object " + id.Hex() + " in fallback memory");
    }
    base = file->data();
    fallback_->creating.insert_or_assign(id, std::move(*file));
  }
  return MutableObject{id, {base, data_size}, {base + data_size, metadata_size}};
}

// Seal or Abort: both end the object's creation, waiting for the answer (once Seal returns, every
// client of this store sees the object).
Status StoreClient::EndCreation(uint16_t type, const ObjectId& id) {
  std::string body;
  WireWriter(&body).PutId(id);
  std::lock_guard<std::mutex> lock(socket_mu_);
  AIRT_ASSIGN_OR_RETURN(std::string reply, Call(type, body));
  WireReader r(reply);
  Status ended = internal::ParseReplyStatus(&r);
  if (ended.ok()) fallback_->creating.erase(id);
  return ended;
}

Status StoreClient::Seal(const ObjectId& id) {
  return EndCreation(static_cast<uint16_t>(MessageType::kSeal), id);
}

Status StoreClient::Abort(const ObjectId& id) {
  return EndCreation(static_cast<uint16_t>(MessageType::kAbort), id);
}

void CopyToObject(uint8_t* dst, const uint8_t* src, size_t n) { internal::StreamCopy(dst, src, n); }

Status StoreClient::Put(const ObjectId& id, std::span<const uint8_t> data,
                        std::span<const uint8_t> metadata, std::string_view owner) {
  AIRT_ASSIGN_OR_RETURN(MutableObject object,
                        Create(id, data.size(), metadata.size(), /*secondary=*/false, owner));
  internal::StreamCopy(object.data.data(), data.data(), data.size());
  internal::StreamCopy(object.metadata.data(), metadata.data(), metadata.size());
  return Seal(id);
}

Result<std::vector<ObjectPin>> StoreClient::Get(std::span<const ObjectId> ids, int64_t timeout_ms) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  std::vector<ObjectPin> pins(ids.size());
  std::vector<size_t> missing;
  for (;;) {
    missing.clear();
    {
      std::lock_guard<std::mutex> lock(pins_mu_);
      for (size_t i = 0; i < ids.size(); ++i) {
        if (pins[i].valid()) continue;
        internal::SlotView view;
        if (index_->TryPin(ids[i], &view) != internal::SharedIndex::PinOutcome::kPinned) {
          missing.push_back(i);
          continue;
        }
        if (!pins_->Add(view.slot)) {
          index_->Unpin(view.slot);
          return ResourceExhausted("this client already pins " +
                                   std::to_string(mapping_->header()->pin_slots_per_client) +
                                   " distinct objects; release some before getting " +
                                   ids[i].Hex());
        }
        ObjectPin& pin = pins[i];
        pin.client_ = this;
        pin.slot_ = view.slot;
        pin.id_ = ids[i];
        const uint8_t* base = nullptr;
        if (!internal::IsFallback(view.offset)) {
          base = mapping_->base() + view.offset;
        } else {
          // Mapped with this client's first pin of the slot; `pins` gives the pin back on error.
          auto mapped = fallback_->pinned.find(view.slot);
          if (mapped == fallback_->pinned.end()) {
            Result<internal::FallbackMapping> file = internal::FallbackMapping::Map(
                internal::FallbackPath(fallback_dir_, ids[i],
                                       internal::FallbackNumber(view.offset)),
                view.data_size + view.metadata_size, /*writable=*/false);
            if (!file.ok()) {
              return file.status().WithContext("reading object " + ids[i].Hex() +
                                               " from fallback memory");
            }
            mapped = fallback_->pinned.emplace(view.slot, std::move(*file)).first;
          }
          base = mapped->second.data();
        }
        pin.data_ = {base, view.data_size};
        pin.metadata_ = {base + view.data_size, view.metadata_size};
      }
    }
    if (missing.empty()) return pins;

    int64_t left_ms = -1;
    if (timeout_ms >= 0) {
      left_ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left_ms < 0) left_ms = 0;
    }
    // One Wait frame carries at most kMaxWaitIds ids (the frame limit); the rest go next pass.
    if (missing.size() > kMaxWaitIds) missing.resize(kMaxWaitIds);
    std::string body;
    WireWriter w(&body);
    w.Put(left_ms);
    w.Put(static_cast<uint32_t>(missing.size()));
    for (size_t i : missing) w.PutId(ids[i]);
    std::string reply;
    {
      std::lock_guard<std::mutex> lock(socket_mu_);
      AIRT_ASSIGN_OR_RETURN(reply, Call(static_cast<uint16_t>(MessageType::kWait), body));
    }
    WireReader r(reply);
    AIRT_RETURN_IF_ERROR(internal::ParseReplyStatus(&r));
    uint32_t n;
    if (!r.Get(&n) || n != missing.size()) return Internal("malformed Wait reply from the store");
    for (size_t k = 0; k < n; ++k) {
      uint8_t code;
      if (!r.Get(&code)) return Internal("malformed Wait reply from the store");
      if (code == static_cast<uint8_t>(Code::kDeadlineExceeded)) {
        return DeadlineExceeded("object " + ids[missing[k]].Hex() + " is not in the store after " +
                                std::to_string(timeout_ms) + " ms");
      }
      if (code != static_cast<uint8_t>(Code::kOk)) {
        return Status(static_cast<Code>(code <= static_cast<uint8_t>(Code::kInternal) ? code : 10),
                      "getting object " + ids[missing[k]].Hex());
      }
    }
    // Everything is sealed and in memory now: pin it through the index on the next pass.
  }
}

Result<ObjectPin> StoreClient::Get(const ObjectId& id, int64_t timeout_ms) {
  AIRT_ASSIGN_OR_RETURN(std::vector<ObjectPin> pins,
                        Get(std::span<const ObjectId>(&id, 1), timeout_ms));
  return std::move(pins[0]);
}

bool StoreClient::Contains(const ObjectId& id) const { return index_->ContainsSealed(id); }

Status StoreClient::Delete(const ObjectId& id) {
  std::string body;
  WireWriter w(&body);
  w.Put(uint32_t{1});
  w.PutId(id);
  std::lock_guard<std::mutex> lock(socket_mu_);
  AIRT_ASSIGN_OR_RETURN(std::string reply, Call(static_cast<uint16_t>(MessageType::kDelete), body));
  WireReader r(reply);
  return internal::ParseReplyStatus(&r);
}

Result<uint64_t> StoreClient::DeleteJob(const JobId& job) {
  std::string body;
  WireWriter(&body).PutBytes(job.Binary());
  std::lock_guard<std::mutex> lock(socket_mu_);
  AIRT_ASSIGN_OR_RETURN(std::string reply,
                        Call(static_cast<uint16_t>(MessageType::kDeleteJob), body));
  WireReader r(reply);
  AIRT_RETURN_IF_ERROR(internal::ParseReplyStatus(&r));
  uint64_t deleted;
  if (!r.Get(&deleted)) return Internal("malformed DeleteJob reply from the store");
  return deleted;
}

Result<std::vector<PrimaryCopy>> StoreClient::ListPrimaries(bool* more) {
  std::lock_guard<std::mutex> lock(socket_mu_);
  AIRT_ASSIGN_OR_RETURN(std::string reply,
                        Call(static_cast<uint16_t>(MessageType::kListPrimaries), ""));
  WireReader r(reply);
  AIRT_RETURN_IF_ERROR(internal::ParseReplyStatus(&r));
  uint8_t cut;
  uint32_t n;
  if (!r.Get(&cut) || !r.Get(&n)) return Internal("malformed ListPrimaries reply from the store");
  std::vector<PrimaryCopy> out;
  for (uint32_t i = 0; i < n; ++i) {
    PrimaryCopy p;
    uint32_t owner_size;
    std::string_view owner;
    if (!r.GetId(&p.id) || !r.Get(&p.size) || !r.Get(&owner_size) ||
        !r.GetBytes(owner_size, &owner)) {
      return Internal("malformed ListPrimaries reply from the store");
    }
    p.owner = std::string(owner);
    out.push_back(std::move(p));
  }
  if (more != nullptr) *more = cut != 0;
  return out;
}

Status StoreClient::MakePrimary(const ObjectId& id, std::string_view owner) {
  AIRT_RETURN_IF_ERROR(CheckOwnerSize(id, owner));
  std::string body;
  WireWriter w(&body);
  w.PutId(id);
  w.Put(static_cast<uint32_t>(owner.size()));
  w.PutBytes(owner);
  std::lock_guard<std::mutex> lock(socket_mu_);
  AIRT_ASSIGN_OR_RETURN(std::string reply,
                        Call(static_cast<uint16_t>(MessageType::kMakePrimary), body));
  WireReader r(reply);
  return internal::ParseReplyStatus(&r);
}

void StoreClient::ReleasePin(uint32_t slot, const ObjectId& id) {
  uint64_t word;
  {
    std::lock_guard<std::mutex> lock(pins_mu_);
    // Unmapped before the unpin: once unpinned, the slot may come to hold another object.
    if (pins_->Remove(slot) == 0) fallback_->pinned.erase(slot);
    word = index_->Unpin(slot);
  }
  if (internal::SlotWord::Pins(word) == 0 && internal::SlotWord::DeletePending(word)) {
    std::string body;
    WireWriter(&body).PutId(id);
    std::lock_guard<std::mutex> lock(socket_mu_);
    Status s = Send(static_cast<uint16_t>(MessageType::kReleased), body);
    if (!s.ok()) AIRT_LOG(WARNING) << "telling the store of a release: " << s.ToString();
  }
}

std::vector<PinInfo> StoreClient::Pins() const {
  std::vector<PinInfo> out;
  std::lock_guard<std::mutex> lock(pins_mu_);
  pins_->ForEach([&](uint32_t slot, uint32_t count) {
    out.push_back({index_->IdAt(slot), count});
  });
  return out;
}

Result<StoreStats> StoreClient::Stats() {
  std::lock_guard<std::mutex> lock(socket_mu_);
  AIRT_ASSIGN_OR_RETURN(std::string reply, Call(static_cast<uint16_t>(MessageType::kStats), {}));
  WireReader r(reply);
  AIRT_RETURN_IF_ERROR(internal::ParseReplyStatus(&r));
  StoreStats stats;
  if (!internal::GetStats(&r, &stats)) return Internal("malformed Stats reply from the store");
  return stats;
}

void StoreClient::Warm() {
  populator_.reset();
  const internal::ArenaHeader& h = *mapping_->header();
  mapping_->Populate(0, h.pins_offset);
  mapping_->Populate(h.data_offset, h.file_size - h.data_offset);
}

std::span<const uint8_t> StoreClient::mapping() const {
  return {mapping_->base(), mapping_->size()};
}

}  // namespace airt::objectstore
