#include "common/rpc_status.h"

#include <string>
#include <string_view>

namespace airt {
namespace {
constexpr std::string_view kPrefix = "airt:";
}  // namespace

kj::Exception ToKjException(const Status& status) {
  std::string text =
      std::string(kPrefix) + std::string(CodeName(status.code())) + ": " + status.message();
  return kj::Exception(kj::Exception::Type::FAILED, __FILE__, __LINE__,
                       kj::heapString(text.data(), text.size()));
}

Status FromKjException(const kj::Exception& exception) {
  std::string_view d(exception.getDescription().cStr());
  // Remote exceptions arrive as "remote exception: airt:kNotFound: ...".
  if (auto at = d.find(kPrefix); at != std::string_view::npos) {
    std::string_view rest = d.substr(at + kPrefix.size());
    auto colon = rest.find(": ");
    std::string_view name = rest.substr(0, colon);
    std::string message(colon == std::string_view::npos ? "" : rest.substr(colon + 2));
    for (int c = 1; c <= static_cast<int>(Code::kInternal); ++c) {
      if (CodeName(static_cast<Code>(c)) == name) return Status(static_cast<Code>(c), message);
    }
  }
  switch (exception.getType()) {
    case kj::Exception::Type::DISCONNECTED:
    case kj::Exception::Type::OVERLOADED: return Unavailable(std::string(d));
    case kj::Exception::Type::UNIMPLEMENTED: return Unimplemented(std::string(d));
    default: return Internal(std::string(d));
  }
}

}  // namespace airt
