// What collective groups (airt/collective.h) need of the core worker, below the public API: the
// hung-collective progress board. Not part of the user-facing API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace airt::internal {

// Collective groups (airt/collective.h): this process's progress in `group` (nullopt: it left
// the group), where the others read it (host:port), and reading another rank's: (the last
// operation it entered, whether it left since); nullopt when it never joined such a group. This
// process's node, host:port.
void RecordCollectiveProgress(const std::string& group, std::optional<uint64_t> entered);
std::string CollectiveProgressAddress();
std::optional<std::pair<uint64_t, bool>> QueryCollectiveProgress(const std::string& address,
                                                                 const std::string& group,
                                                                 int64_t timeout_ms);
std::string NodeAddress();

}  // namespace airt::internal
