// Status and Result<T>: the one error convention of airt (see STYLE.md, rule 2 and 3).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace airt {

// Named by what the caller should do next. Detail goes in the message, which names the thing.
enum class Code : uint8_t {
  kOk,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kCancelled,
  kDeadlineExceeded,    // the caller's timeout passed
  kResourceExhausted,   // full: evict, spill or wait, then retry
  kUnavailable,         // peer down: retry the call
  kFailedPrecondition,  // wrong state: retrying will not help
  kUnimplemented,
  kInternal,
};

// "kNotFound" etc.; "kUnknown(N)" for a value outside the enum (bad input off the wire).
std::string_view CodeName(Code code);

// Ok, or a code with a message. Cheap to copy when ok.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const;
  // "kNotFound: object 00ab... is not in the store"; "ok" when ok.
  std::string ToString() const;

  // Prepends context: "while spilling: <message>".
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message() == b.message();
  }

 private:
  Code code_ = Code::kOk;
  std::shared_ptr<const std::string> message_;  // null when ok
};

inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
inline Status Cancelled(std::string m) { return {Code::kCancelled, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {Code::kDeadlineExceeded, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {Code::kFailedPrecondition, std::move(m)};
}
inline Status Unimplemented(std::string m) { return {Code::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }

// Translates errno once, where it enters our code: "<what>: <strerror>" with a code chosen
// from the errno (ENOSPC -> kResourceExhausted, ENOENT -> kNotFound, ECONNREFUSED/EPIPE ->
// kUnavailable, EINVAL -> kInvalidArgument, otherwise kInternal).
Status ErrnoStatus(std::string_view what, int errno_value);

// A value or the Status saying why there is none. Never holds an ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) v_ = Status(Code::kInternal, "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  // Our own bug to call these when !ok(): they throw std::bad_variant_access.
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace airt

#define AIRT_INTERNAL_CONCAT2(a, b) a##b
#define AIRT_INTERNAL_CONCAT(a, b) AIRT_INTERNAL_CONCAT2(a, b)

// Returns the Status of `expr` from the enclosing function when it is not ok.
#define AIRT_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::airt::Status airt_status_ = (expr);        \
    if (!airt_status_.ok()) return airt_status_; \
  } while (false)

// `AIRT_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a Result's value, or returns its
// Status from the enclosing function.
#define AIRT_ASSIGN_OR_RETURN(lhs, expr) \
  AIRT_INTERNAL_ASSIGN_OR_RETURN(AIRT_INTERNAL_CONCAT(airt_result_, __LINE__), lhs, expr)
#define AIRT_INTERNAL_ASSIGN_OR_RETURN(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
