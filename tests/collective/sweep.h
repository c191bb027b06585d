// Every collective, element type and reduce op on one rank of a group, checked against the values
// every rank computes alike: the unit tests (threads as ranks) and the end-to-end tests (tasks as
// ranks) run the same sweep. Returns what went wrong, empty when all agreed.
#pragma once

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gloo/types.h>

#include "collective/communicator.h"

namespace airt::collective::testing {

// Rank r's i-th element: a small integer, exact in every type (products of 4 ranks fit int8).
inline double Value(int r, size_t i) { return static_cast<double>((r + i) % 3 + 1); }

template <typename T>
T Make(double v) {
  if constexpr (std::is_same_v<T, Float16>) {
    gloo::float16 h = gloo::cpu_float2half_rn(static_cast<float>(v));
    Float16 out;
    std::memcpy(&out, &h, 2);
    return out;
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
double Read(T v) {
  if constexpr (std::is_same_v<T, Float16>) {
    gloo::float16 h;
    std::memcpy(&h, &v, 2);
    return gloo::cpu_half2float(h);
  } else {
    return static_cast<double>(v);
  }
}

template <typename T>
double Expected(ReduceOp op, int world, size_t i) {
  double acc = Value(0, i);
  for (int r = 1; r < world; ++r) {
    double v = Value(r, i);
    if (op == ReduceOp::SUM || op == ReduceOp::AVERAGE) acc += v;
    if (op == ReduceOp::PRODUCT) acc *= v;
    if (op == ReduceOp::MIN) acc = std::min(acc, v);
    if (op == ReduceOp::MAX) acc = std::max(acc, v);
  }
  if (op == ReduceOp::AVERAGE) {
    acc = std::is_integral_v<T> ? std::trunc(acc / world) : acc / world;
  }
  return acc;
}

template <typename T>
bool Near(T got, double want) {
  double tolerance = std::is_same_v<T, Float16> ? 1e-2 : 1e-6;
  return std::fabs(Read(got) - want) <= tolerance * std::max(1.0, std::fabs(want));
}

template <typename T>
void SweepType(Communicator& c, size_t count, std::vector<std::string>& errors) {
  const int w = c.options().world_size, r = c.options().rank;
  const std::string where = std::string(DataTypeName(DataTypeOf<T>())) + " x" +
                            std::to_string(count) + ": ";
  auto fill = [&](std::vector<T>& v, int rank) {
    v.resize(count);
    for (size_t i = 0; i < count; ++i) v[i] = Make<T>(Value(rank, i));
  };
  auto check = [&](const Status& s, const std::string& what) {
    if (!s.ok()) errors.push_back(where + what + ": " + s.ToString());
    return s.ok();
  };
  std::vector<T> data;
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX,
                      ReduceOp::AVERAGE}) {
    fill(data, r);
    std::string name = "allreduce op " + std::to_string(static_cast<int>(op));
    if (!check(c.Allreduce(View(std::span<T>(data)), op), name)) return;
    for (size_t i = 0; i < count; ++i) {
      if (!Near(data[i], Expected<T>(op, w, i))) {
        errors.push_back(where + name + " element " + std::to_string(i) + " is " +
                         std::to_string(Read(data[i])) + ", not " +
                         std::to_string(Expected<T>(op, w, i)));
        break;
      }
    }
  }
  fill(data, r);
  if (!check(c.Broadcast(View(std::span<T>(data)), w - 1), "broadcast")) return;
  for (size_t i = 0; i < count; ++i) {
    if (!Near(data[i], Value(w - 1, i))) {
      errors.push_back(where + "broadcast element " + std::to_string(i));
      break;
    }
  }
  fill(data, r);
  std::vector<T> all(count * w);
  if (!check(c.Allgather(View(std::span<T>(data)), View(std::span<T>(all))), "allgather")) return;
  for (int k = 0; k < w; ++k) {
    if (!Near(all[k * count + count - 1], Value(k, count - 1)) || !Near(all[k * count], Value(k, 0))) {
      errors.push_back(where + "allgather block " + std::to_string(k));
    }
  }
  // reducescatter: block k of every rank's input is Value(rank, k*count + i).
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX}) {
    std::vector<T> in(count * w), out(count);
    for (size_t i = 0; i < in.size(); ++i) in[i] = Make<T>(Value(r, i));
    if (!check(c.Reducescatter(View(std::span<T>(in)), View(std::span<T>(out)), op),
               "reducescatter")) {
      return;
    }
    for (size_t i = 0; i < count; ++i) {
      if (!Near(out[i], Expected<T>(op, w, r * count + i))) {
        errors.push_back(where + "reducescatter element " + std::to_string(i));
        break;
      }
    }
  }
  fill(data, r);
  if (!check(c.Reduce(View(std::span<T>(data)), 0, ReduceOp::SUM), "reduce")) return;
  for (size_t i = 0; i < count; ++i) {
    double want = r == 0 ? Expected<T>(ReduceOp::SUM, w, i) : Value(r, i);
    if (!Near(data[i], want)) {
      errors.push_back(where + "reduce element " + std::to_string(i) + " on rank " +
                       std::to_string(r));
      break;
    }
  }
  if (w > 1) {  // a ring: even ranks send first, odd ones receive first
    std::vector<T> mine, got(count);
    fill(mine, r);
    int next = (r + 1) % w, prev = (r + w - 1) % w;
    auto send = [&] { return check(c.Send(View(std::span<T>(mine)), next), "send"); };
    auto recv = [&] { return check(c.Recv(View(std::span<T>(got)), prev), "recv"); };
    if (r % 2 == 0 ? !(send() && recv()) : !(recv() && send())) return;
    for (size_t i = 0; i < count; ++i) {
      if (!Near(got[i], Value(prev, i))) {
        errors.push_back(where + "recv element " + std::to_string(i));
        break;
      }
    }
  }
  check(c.Barrier(), "barrier");
}

// Every type at 1, 7 and up to `max_bytes` elements' worth.
inline std::vector<std::string> Sweep(Communicator& c, size_t max_bytes = 64 << 10) {
  std::vector<std::string> errors;
  for (size_t bytes : {size_t{0}, size_t{7}, max_bytes}) {
    SweepType<int8_t>(c, std::max<size_t>(1, bytes / 1), errors);
    SweepType<uint8_t>(c, std::max<size_t>(1, bytes / 1), errors);
    SweepType<int32_t>(c, std::max<size_t>(1, bytes / 4), errors);
    SweepType<int64_t>(c, std::max<size_t>(1, bytes / 8), errors);
    SweepType<Float16>(c, std::max<size_t>(1, bytes / 2), errors);
    SweepType<float>(c, std::max<size_t>(1, bytes / 4), errors);
    SweepType<double>(c, std::max<size_t>(1, bytes / 8), errors);
    if (!errors.empty()) break;
  }
  return errors;
}

}  // namespace airt::collective::testing
