// Status <-> kj::Exception, translated once where RPC enters and leaves our code (STYLE.md 5).
// A server method that fails throws ToKjException(status); the client's FromKjException gives
// back the same code and message. A dropped connection is kUnavailable on the client.
#pragma once

#include <utility>

#include <kj/exception.h>

#include "common/status.h"

namespace airt {

// A kj::Exception whose description is "airt:<code name>: <message>".
kj::Exception ToKjException(const Status& status);
// The Status a kj::Exception carries: the airt code when it came from ToKjException;
// kUnavailable for DISCONNECTED or OVERLOADED; kUnimplemented for UNIMPLEMENTED; else kInternal.
Status FromKjException(const kj::Exception& exception);

// Runs `fn`, turning a thrown kj::Exception into its Status. For client calls:
//   Status s = CatchKj([&] { request.send().wait(waitScope); });
template <typename Fn>
Status CatchKj(Fn&& fn) {
  kj::Maybe<kj::Exception> caught = kj::runCatchingExceptions([&] { std::forward<Fn>(fn)(); });
  KJ_IF_MAYBE (e, caught) {
    return FromKjException(*e);
  }
  return Status::Ok();
}

}  // namespace airt
