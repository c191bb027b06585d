// The Gloo backend: a gloo::rendezvous::Context over the TCP transport, its full mesh set up
// through the head's KV (a gloo Store over RendezvousKv), and gloo's algorithms for each
// operation. Gloo's exceptions are turned into Status here, where they enter our code.
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include "collective/communicator.h"

namespace airt::collective {
namespace {

// The gloo Store of one group's rendezvous: gloo's keys under `prefix` in the KV. wait() polls
// until the keys are there or the group's timeout passes (gloo::IoException naming the missing
// ranks, whose keys gloo names by rank number).
class KvStore final : public gloo::rendezvous::Store {
 public:
  KvStore(RendezvousKv& kv, std::string prefix, std::chrono::milliseconds timeout)
      : kv_(kv), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Status put = kv_.Put(prefix_ + key, std::string(data.begin(), data.end()));
    if (!put.ok()) throw gloo::IoException(put.ToString());
  }
  std::vector<char> get(const std::string& key) override {
    wait({key});
    Result<std::optional<std::string>> got = kv_.Get(prefix_ + key);
    if (!got.ok()) throw gloo::IoException(got.status().ToString());
    if (!got->has_value()) throw gloo::IoException("rendezvous key " + key + " vanished");
    return std::vector<char>((*got)->begin(), (*got)->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    auto deadline = std::chrono::steady_clock::now() + std::max(timeout, timeout_);
    auto pause = std::chrono::milliseconds(1);
    std::vector<std::string> missing = keys;
    while (true) {
      std::vector<std::string> still;
      for (const std::string& key : missing) {
        Result<std::optional<std::string>> got = kv_.Get(prefix_ + key);
        if (!got.ok()) throw gloo::IoException(got.status().ToString());
        if (!got->has_value()) still.push_back(key);
      }
      if (still.empty()) return;
      missing = std::move(still);
      if (std::chrono::steady_clock::now() >= deadline) {
        std::string names;
        for (const std::string& key : missing) names += (names.empty() ? "" : ", ") + key;
        throw gloo::IoException("ranks " + names + " did not join within " +
                                std::to_string(timeout_.count()) + " ms");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  }

 private:
  RendezvousKv& kv_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

Status FromGloo(const std::exception& e) {
  std::string what = e.what();
  if (what.find("Timed out") != std::string::npos || what.find("timed out") != std::string::npos ||
      what.find("did not join") != std::string::npos) {
    return DeadlineExceeded("gloo: " + what);
  }
  return Unavailable("gloo: " + what);
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
gloo::AllreduceOptions::Func ReduceFunc(ReduceOp op) {
  switch (op) {
    case ReduceOp::PRODUCT: return static_cast<ReduceFn>(&gloo::product<T>);
    case ReduceOp::MIN: return static_cast<ReduceFn>(&gloo::min<T>);
    case ReduceOp::MAX: return static_cast<ReduceFn>(&gloo::max<T>);
    case ReduceOp::SUM:
    case ReduceOp::AVERAGE: break;
  }
  return static_cast<ReduceFn>(&gloo::sum<T>);
}

template <typename T>
void Divide(void* data, size_t count, int by) {
  T* p = static_cast<T*>(data);
  if constexpr (std::is_same_v<T, gloo::float16>) {
    for (size_t i = 0; i < count; ++i) {
      p[i] = gloo::cpu_float2half_rn(gloo::cpu_half2float(p[i]) / static_cast<float>(by));
    }
  } else {
    for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(by));
  }
}

class GlooBackend final : public Backend {
 public:
  GlooBackend(std::shared_ptr<gloo::transport::Device> device,
              std::shared_ptr<gloo::rendezvous::Context> context)
      : device_(std::move(device)), context_(std::move(context)) {}

  Status Run(const Operation& op) override {
    if (context_->size == 1) {  // alone: the result is the input (AVERAGE over one rank too)
      if (op.kind == OpKind::kAllgather || op.kind == OpKind::kReducescatter) {
        std::memcpy(op.output.data, op.input.data, op.output.bytes());
      }
      return Status::Ok();
    }
    try {
      switch (op.input.type) {
        case DataType::kInt8: return Typed<int8_t>(op);
        case DataType::kUint8: return Typed<uint8_t>(op);
        case DataType::kInt32: return Typed<int32_t>(op);
        case DataType::kInt64: return Typed<int64_t>(op);
        case DataType::kFloat16: return Typed<gloo::float16>(op);
        case DataType::kFloat32: return Typed<float>(op);
        case DataType::kFloat64: return Typed<double>(op);
      }
      return InvalidArgument("unknown element type");
    } catch (const std::exception& e) {
      return FromGloo(e);
    }
  }

 private:
  template <typename T>
  Status Typed(const Operation& op) {
    const uint32_t tag = static_cast<uint32_t>(op.tag);
    T* in = static_cast<T*>(op.input.data);
    T* out = static_cast<T*>(op.output.data);
    const int size = context_->size;
    switch (op.kind) {
      case OpKind::kAllreduce: {
        gloo::AllreduceOptions o(context_);
        o.setOutput(out, op.output.count);
        o.setReduceFunction(ReduceFunc<T>(op.op));
        o.setTag(tag);
        o.setTimeout(op.timeout);
        gloo::allreduce(o);
        if (op.op == ReduceOp::AVERAGE) Divide<T>(out, op.output.count, size);
        return Status::Ok();
      }
      case OpKind::kReducescatter:
        RingReduceScatter<T>(op);
        if (op.op == ReduceOp::AVERAGE) Divide<T>(out, op.output.count, size);
        return Status::Ok();
      case OpKind::kBroadcast: {
        gloo::BroadcastOptions o(context_);
        o.setOutput(out, op.output.count);
        o.setRoot(op.peer);
        o.setTag(tag);
        o.setTimeout(op.timeout);
        gloo::broadcast(o);
        return Status::Ok();
      }
      case OpKind::kAllgather: {
        gloo::AllgatherOptions o(context_);
        o.setInput(in, op.input.count);
        o.setOutput(out, op.output.count);
        o.setTag(tag);
        o.setTimeout(op.timeout);
        gloo::allgather(o);
        return Status::Ok();
      }
      case OpKind::kReduce: {
        // The root reduces in place; the others reduce through scratch and keep their data.
        bool root = context_->rank == op.peer;
        scratch_.resize(root ? 0 : op.input.bytes());
        gloo::ReduceOptions o(context_);
        if (!root) o.setInput(in, op.input.count);
        o.setOutput(root ? out : reinterpret_cast<T*>(scratch_.data()), op.output.count);
        o.setRoot(op.peer);
        o.setReduceFunction(ReduceFunc<T>(op.op));
        o.setTag(tag);
        o.setTimeout(op.timeout);
        gloo::reduce(o);
        if (root && op.op == ReduceOp::AVERAGE) Divide<T>(out, op.output.count, size);
        return Status::Ok();
      }
      case OpKind::kSend:
      case OpKind::kRecv: {
        constexpr uint64_t kPointToPointSlot = uint64_t{0x7e} << 56;
        auto buffer = context_->createUnboundBuffer(out, op.output.bytes());
        bool done = false;
        if (op.kind == OpKind::kSend) {
          buffer->send(op.peer, kPointToPointSlot | op.tag);
          done = buffer->waitSend(op.timeout);
        } else {
          buffer->recv(op.peer, kPointToPointSlot | op.tag);
          done = buffer->waitRecv(op.timeout);
        }
        if (!done) return DeadlineExceeded("gloo: timed out");
        return Status::Ok();
      }
      case OpKind::kBarrier: {
        gloo::BarrierOptions o(context_);
        o.setTag(tag);
        o.setTimeout(op.timeout);
        gloo::barrier(o);
        return Status::Ok();
      }
    }
    return InvalidArgument("unknown operation");
  }

  // A ring reduce-scatter over gloo's unbound buffers: each rank sends (size - 1) blocks, half
  // an allreduce's traffic. In step s rank r sends its partial reduction of block r - s - 1 to
  // rank r + 1 and receives rank r - 1's partial of block r - s - 2 (mod size), reducing its own
  // input's block into it; the partial received last is block r over every rank, written into
  // `output`. The input is only read; gloo exceptions (timeouts) propagate to Run.
  template <typename T>
  void RingReduceScatter(const Operation& op) {
    constexpr uint64_t kReduceScatterSlot = uint64_t{0x7d} << 56;
    const int size = context_->size, rank = context_->rank;
    const size_t count = op.output.count, bytes = op.output.bytes();
    const T* in = static_cast<const T*>(op.input.data);
    auto block = [&](int b) {
      return in + static_cast<size_t>(((b % size) + size) % size) * count;
    };
    gloo::AllreduceOptions::Func reduce = ReduceFunc<T>(op.op);
    scratch_.resize(3 * bytes);  // the received block, then two partials in turn
    T* received = reinterpret_cast<T*>(scratch_.data());
    T* partial[2] = {received + count, received + 2 * count};
    for (int s = 0; s + 1 < size; ++s) {
      const T* send = s == 0 ? block(rank - 1) : partial[(s - 1) % 2];
      T* into = s + 2 == size ? static_cast<T*>(op.output.data) : partial[s % 2];
      const uint64_t slot = kReduceScatterSlot | (static_cast<uint64_t>(s) << 32) |
                            (op.tag & 0xffffffffu);
      auto from = context_->createUnboundBuffer(received, bytes);
      auto to = context_->createUnboundBuffer(const_cast<T*>(send), bytes);
      from->recv((rank + size - 1) % size, slot);
      to->send((rank + 1) % size, slot);
      if (!from->waitRecv(op.timeout) || !to->waitSend(op.timeout)) {
        throw gloo::IoException("reducescatter step " + std::to_string(s) + " timed out");
      }
      reduce(into, block(rank - s - 2), received, count);
    }
  }

  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::vector<char> scratch_;
};

}  // namespace

Result<std::unique_ptr<Backend>> ConnectGloo(const GroupOptions& options, RendezvousKv& kv,
                                             const std::string& prefix, const std::string& host) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context =
        std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
    context->setTimeout(std::chrono::milliseconds(options.timeout_ms));
    KvStore store(kv, prefix, std::chrono::milliseconds(options.timeout_ms));
    context->connectFullMesh(store, device);
    return std::unique_ptr<Backend>(new GlooBackend(std::move(device), std::move(context)));
  } catch (const std::exception& e) {
    return FromGloo(e);
  }
}

}  // namespace airt::collective
