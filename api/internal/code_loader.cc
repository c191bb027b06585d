#include "api/internal/code_loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "common/logging.h"

namespace airt::internal {
namespace {

namespace fs = std::filesystem;

bool LooksLikeLibrary(const fs::path& path) {
  std::string name = path.filename().string();
  return (name.size() > 3 && name.ends_with(".so")) || name.find(".so.") != std::string::npos;
}

LoadedLibrary Open(const std::string& path) {
  LoadedLibrary loaded{path, ""};
  ::dlerror();
  if (::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) {
    const char* error = ::dlerror();
    loaded.error = error ? error : "dlopen failed";
    AIRT_LOG(ERROR) << "cannot load " << path << ", skipped: " << loaded.error;
  } else {
    AIRT_LOG(INFO) << "loaded " << path;
  }
  return loaded;
}

}  // namespace

std::vector<LoadedLibrary> LoadCodeSearchPath(std::string_view search_path) {
  std::vector<LoadedLibrary> loaded;
  size_t start = 0;
  while (start <= search_path.size()) {
    size_t colon = search_path.find(':', start);
    if (colon == std::string_view::npos) colon = search_path.size();
    std::string entry(search_path.substr(start, colon - start));
    start = colon + 1;
    if (entry.empty()) continue;

    std::error_code ec;
    fs::file_status status = fs::status(entry, ec);
    if (ec || !fs::exists(status)) {
      std::string why = "no such file or directory";
      AIRT_LOG(ERROR) << "code search path entry " << entry << " skipped: " << why;
      loaded.push_back({entry, why});
      continue;
    }
    if (!fs::is_directory(status)) {
      loaded.push_back(Open(entry));
      continue;
    }
    std::vector<std::string> libraries;
    for (fs::directory_iterator it(entry, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code type_ec;
      if (it->is_regular_file(type_ec) && LooksLikeLibrary(it->path())) {
        libraries.push_back(it->path().string());
      }
    }
    if (ec) {
      AIRT_LOG(ERROR) << "cannot list " << entry << ", skipped: " << ec.message();
      loaded.push_back({entry, ec.message()});
      continue;
    }
    std::sort(libraries.begin(), libraries.end());
    for (const std::string& library : libraries) loaded.push_back(Open(library));
  }
  return loaded;
}

}  // namespace airt::internal
