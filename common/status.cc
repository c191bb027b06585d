#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace airt {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "kOk";
    case Code::kInvalidArgument: return "kInvalidArgument";
    case Code::kNotFound: return "kNotFound";
    case Code::kAlreadyExists: return "kAlreadyExists";
    case Code::kCancelled: return "kCancelled";
    case Code::kDeadlineExceeded: return "kDeadlineExceeded";
    case Code::kResourceExhausted: return "kResourceExhausted";
    case Code::kUnavailable: return "kUnavailable";
    case Code::kFailedPrecondition: return "kFailedPrecondition";
    case Code::kUnimplemented: return "kUnimplemented";
    case Code::kInternal: return "kInternal";
  }
  return "kUnknown";
}

Status::Status(Code code, std::string message)
    : code_(code),
      message_(code == Code::kOk ? nullptr
                                 : std::make_shared<const std::string>(std::move(message))) {}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return message_ ? *message_ : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string out(CodeName(code_));
  out += ": ";
  out += message();
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message();
  return Status(code_, std::move(m));
}

Status ErrnoStatus(std::string_view what, int errno_value) {
  std::string m(what);
  m += ": ";
  m += std::strerror(errno_value);
  switch (errno_value) {
    case ENOSPC:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EDQUOT: return Status(Code::kResourceExhausted, std::move(m));
    case ENOENT: return Status(Code::kNotFound, std::move(m));
    case EEXIST: return Status(Code::kAlreadyExists, std::move(m));
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case ENOTCONN: return Status(Code::kUnavailable, std::move(m));
    case EINVAL: return Status(Code::kInvalidArgument, std::move(m));
    case ETIMEDOUT: return Status(Code::kDeadlineExceeded, std::move(m));
    default: return Status(Code::kInternal, std::move(m));
  }
}

}  // namespace airt
