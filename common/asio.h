// The one way airt includes Boost.Asio. Boost 1.74's asio/awaitable.hpp uses std::exchange
// without including <utility>, which GCC 12 in C++20 mode rejects; including it first fixes that.
#pragma once

#include <cstddef>
#include <utility>

#include <boost/asio.hpp>

namespace airt {

// A completion condition for asio::async_read/async_write that moves up to 16 MiB per system
// call. Asio's transfer_all stops each call at 64 KiB, which costs a gigabyte object 16K send
// and receive calls, each with a trip through the reactor.
struct TransferAllInLargeChunks {
  size_t operator()(const boost::system::error_code& error, size_t) const {
    return error ? 0 : size_t{16} << 20;
  }
};

}  // namespace airt
