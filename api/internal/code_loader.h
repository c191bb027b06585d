// Loading users' code: the shared libraries on the code search path, whose AIRT_REMOTE functions
// register themselves as they load.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace airt::internal {

struct LoadedLibrary {
  std::string path;
  std::string error;  // empty when it loaded; else dlerror() or why the entry was skipped
};

// Opens (dlopen, RTLD_NOW | RTLD_LOCAL) every library named by `search_path`, "ENTRY[:ENTRY...]",
// each entry a directory or a library file. In a directory, the regular files whose names end in
// ".so" or contain ".so." are opened in name order; subdirectories are not searched. A library
// that fails to load, or an entry that does not exist, is logged (with dlerror) and skipped.
// Libraries are never closed. Call from one thread at a time.
std::vector<LoadedLibrary> LoadCodeSearchPath(std::string_view search_path);

}  // namespace airt::internal
