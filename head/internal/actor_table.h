// The actor directory: every actor the head knows, in registration order, found by id or by name
// within its namespace. Each actor's owner registers it and keeps its entry current; ray.kill and
// the end of its job mark it DEAD. Rows go through the MetadataStore ("actor:<actor id hex>", a
// proto::ActorInfo message). Confined to the head's loop thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "head/internal/change.h"
#include "head/internal/job_table.h"
#include "head/internal/records.h"
#include "head/metadata_store.h"

namespace airt::head::internal {

// A name is unique within its namespace among the actors not DEAD; once its actor is DEAD the
// name is free again. A mutating method validates against memory and returns a staged Change
// (change.h): nothing changes until the caller applies it once its rows are written.
class ActorTable {
 public:
  struct Options {
    // DEAD actors kept; beyond this the earliest registered are forgotten (rows deleted).
    size_t max_dead_actors = 10000;
  };

  // `store` and `jobs` must outlive the table.
  ActorTable(Options options, MetadataStore& store, const JobTable& jobs);

  // Reads the rows an earlier head left. They are listed before any actor registered later,
  // ordered by job id, then actor id (a row does not record when it was registered). A corrupt
  // row, or one whose name another loaded actor not DEAD holds, is logged and skipped. DEAD
  // actors beyond max_dead_actors are forgotten with the next death. The store's error when it
  // cannot be read.
  Status Load();

  // Adds `actor`, PENDING whatever its state says. kFailedPrecondition: its job is not
  // registered or has finished. kAlreadyExists: its id is registered already, or its name is
  // taken in its namespace by an actor not DEAD (the message names both).
  Result<Change> Register(ActorRecord actor);
  // Takes from `news` what an owner's update may change (state, the worker's addresses, id and
  // pid, restarts, death cause, language, and a creation task when it has one) for the actor of
  // its id; id, job, name, namespace,
  // class, detached, max_task_retries, resources, accelerator type and node stay. kNotFound: no
  // such actor. kFailedPrecondition: the actor is DEAD (killed, or its job ended); its owner
  // stops the worker.
  Result<Change> Update(const ActorRecord& news);
  // Records that the head placed the actor on `node` (its next worker is leased there).
  // kNotFound: no such actor. kFailedPrecondition: it is DEAD.
  Result<Change> Place(const ActorId& id, const NodeId& node);
  // Marks the actor DEAD with `cause` and returns its entry; a DEAD actor is returned unchanged
  // (with an empty change). kNotFound: no such actor.
  Result<Staged<ActorRecord>> Kill(const ActorId& id, std::string cause);
  // Marks DEAD every actor of `job` that is neither detached nor DEAD, with the cause "the driver
  // of job <hex> exited"; returns how many.
  Staged<size_t> OnJobFinished(const JobId& job);

  std::optional<ActorRecord> Find(const ActorId& id) const;
  // The actor not DEAD named `name` in `ns`.
  std::optional<ActorRecord> FindNamed(std::string_view ns, std::string_view name) const;
  // Every actor, in registration order.
  std::vector<ActorRecord> List() const;
  size_t size() const { return by_seq_.size(); }

 private:
  using NameKey = std::pair<std::string, std::string>;  // namespace, name

  static std::string RowKey(const ActorId& id);
  // Adds a row read or registered; `seq` orders it.
  void Insert(uint64_t seq, ActorRecord actor);
  // Replaces the stored entry of `actor.id` with `actor` (the name index follows the state).
  void Replace(const ActorRecord& actor);
  // Stages the rows of `dying` (marked DEAD) and the forgetting of the earliest registered DEAD
  // actors beyond max_dead_actors once they are dead.
  void StageDeaths(std::vector<ActorRecord> dying, Change& change);

  Options options_;
  MetadataStore& store_;
  const JobTable& jobs_;
  std::map<uint64_t, ActorRecord> by_seq_;  // registration order
  std::unordered_map<ActorId, uint64_t> seq_of_;
  std::map<NameKey, ActorId> named_;  // named actors not DEAD
  size_t dead_ = 0;
  uint64_t next_seq_ = 1;
};

}  // namespace airt::head::internal
