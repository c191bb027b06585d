// What the GPU plugin's sources share (never the loader's or the node's): the export marker of
// the C ABI of gpu/plugin_abi.h, and writing an error into the caller's buffer.
#pragma once

#include <cstdarg>
#include <cstdio>

#define AIRT_GPU_EXPORT __attribute__((visibility("default")))

namespace airt::gpu_plugin {

// Writes the printf-formatted message into `error` (error_len bytes, NUL-terminated, cut to fit);
// nothing when `error` is null or error_len 0.
inline void SetError(char* error, unsigned long error_len, const char* format, ...)
    __attribute__((format(printf, 3, 4)));
inline void SetError(char* error, unsigned long error_len, const char* format, ...) {
  if (error == nullptr || error_len == 0) return;
  va_list args;
  va_start(args, format);
  std::vsnprintf(error, error_len, format, args);
  va_end(args);
}

}  // namespace airt::gpu_plugin
