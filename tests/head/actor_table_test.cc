// The actor directory over an in-memory and a fault-injecting MetadataStore, with a job table
// beside it: registration rules, names within namespaces, updates, kills, the end of a job, and
// rows read back by a restarted head.
#include "head/internal/actor_table.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include "head/internal/job_table.h"
#include "head/internal/wire.h"
#include "tests/head/head_doubles.h"

namespace airt::head::internal {
namespace {

class ActorTableTest : public ::testing::Test {
 protected:
  ActorTableTest() { job_ = *commit_(jobs_.Register(100, "10.0.0.1")); }

  // A valid unnamed actor of `job` (job_ when nil).
  ActorRecord Actor(const std::string& name = "", const std::string& ns = "",
                    JobId job = JobId::Nil()) {
    ActorRecord actor;
    actor.job = job.IsNil() ? job_ : job;
    actor.id = ActorId::Of(actor.job);
    actor.name = name;
    actor.ns = ns;
    actor.class_name = "Counter::Create";
    actor.max_restarts = 2;
    return actor;
  }

  // `actor` ALIVE on a worker.
  static ActorRecord Alive(ActorRecord actor) {
    actor.state = ActorState::kAlive;
    actor.worker_address = "10.0.0.2:5000";
    actor.node_address = "10.0.0.2:7000";
    actor.worker_id = WorkerId::FromRandom();
    actor.pid = 4321;
    return actor;
  }

  InMemoryMetadataStore backing_;
  testing::FaultInjectingMetadataStore store_{backing_};
  testing::Committer commit_{store_};
  testing::ManualClock clock_;
  JobTable jobs_{store_, clock_};
  ActorTable actors_{{}, store_, jobs_};
  JobId job_;
};

TEST_F(ActorTableTest, RegisterAddsAPendingActorWhateverItsStateSays) {
  ActorRecord actor = Alive(Actor("counter", "ns"));
  ASSERT_TRUE(commit_(actors_.Register(actor)).ok());
  std::optional<ActorRecord> found = actors_.Find(actor.id);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->state, ActorState::kPending);
  EXPECT_EQ(found->class_name, "Counter::Create");
  EXPECT_EQ(found->worker_address, "10.0.0.2:5000") << "the rest is kept as sent";
  EXPECT_EQ(found->max_restarts, 2);
  EXPECT_EQ(actors_.FindNamed("ns", "counter")->id, actor.id);
  EXPECT_FALSE(actors_.FindNamed("other", "counter").has_value());
}

TEST_F(ActorTableTest, RegisterNeedsARunningJob) {
  JobId unknown = JobIdOf(77);
  Status s = commit_(actors_.Register(Actor("", "", unknown)));
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("job 4d000000, which is not registered"), std::string::npos)
      << s.message();
  ASSERT_TRUE(commit_(jobs_.Finish(job_)).ok());
  s = commit_(actors_.Register(Actor()));
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("which has finished"), std::string::npos) << s.message();
  EXPECT_EQ(actors_.size(), 0u);
}

TEST_F(ActorTableTest, RegisterRefusesAnIdTwiceAndANameTakenInItsNamespace) {
  ActorRecord first = Actor("trainer", "team");
  ASSERT_TRUE(commit_(actors_.Register(first)).ok());
  EXPECT_EQ(commit_(actors_.Register(first)).code(), Code::kAlreadyExists);
  ActorRecord second = Actor("trainer", "team");
  Status taken = commit_(actors_.Register(second));
  EXPECT_EQ(taken.code(), Code::kAlreadyExists);
  EXPECT_EQ(taken.message(), "the actor name 'trainer' in namespace 'team' exists already (actor " +
                                 first.id.Hex() + ")");
  EXPECT_TRUE(commit_(actors_.Register(Actor("trainer", "other-team"))).ok())
      << "another namespace";
  EXPECT_TRUE(commit_(actors_.Register(Actor())).ok()) << "unnamed actors never clash";
  EXPECT_TRUE(commit_(actors_.Register(Actor())).ok());
}

TEST_F(ActorTableTest, ANameIsFreeAgainOnceItsActorIsDead) {
  ActorRecord first = Actor("trainer", "team");
  ASSERT_TRUE(commit_(actors_.Register(first)).ok());
  ASSERT_TRUE(commit_(actors_.Kill(first.id, "ray.kill")).ok());
  EXPECT_FALSE(actors_.FindNamed("team", "trainer").has_value());
  ActorRecord second = Actor("trainer", "team");
  ASSERT_TRUE(commit_(actors_.Register(second)).ok());
  EXPECT_EQ(actors_.FindNamed("team", "trainer")->id, second.id);
  // An update to DEAD frees it too.
  ActorRecord dead = Alive(second);
  dead.state = ActorState::kDead;
  dead.death_cause = "out of restarts";
  ASSERT_TRUE(commit_(actors_.Update(dead)).ok());
  EXPECT_FALSE(actors_.FindNamed("team", "trainer").has_value());
  EXPECT_TRUE(commit_(actors_.Register(Actor("trainer", "team"))).ok());
}

TEST_F(ActorTableTest, UpdateChangesTheOwnersNewsAndKeepsIdJobNameClassAndDetached) {
  ActorRecord actor = Actor("counter", "ns");
  actor.detached = true;
  ASSERT_TRUE(commit_(actors_.Register(actor)).ok());
  ActorRecord news = Alive(actor);
  news.name = "renamed";
  news.ns = "elsewhere";
  news.class_name = "Other::Create";
  news.detached = false;
  news.num_restarts = 1;
  news.max_restarts = -1;
  news.language = 1;
  ASSERT_TRUE(commit_(actors_.Update(news)).ok());
  ActorRecord stored = *actors_.Find(actor.id);
  EXPECT_EQ(stored.state, ActorState::kAlive);
  EXPECT_EQ(stored.worker_address, news.worker_address);
  EXPECT_EQ(stored.node_address, news.node_address);
  EXPECT_EQ(stored.worker_id, news.worker_id);
  EXPECT_EQ(stored.pid, 4321);
  EXPECT_EQ(stored.num_restarts, 1u);
  EXPECT_EQ(stored.max_restarts, -1);
  EXPECT_EQ(stored.language, 1);
  EXPECT_EQ(stored.name, "counter");
  EXPECT_EQ(stored.ns, "ns");
  EXPECT_EQ(stored.class_name, "Counter::Create");
  EXPECT_TRUE(stored.detached);
  EXPECT_EQ(actors_.FindNamed("ns", "counter")->id, actor.id);
}

TEST_F(ActorTableTest, UpdateRefusesAnUnknownOrDeadActor) {
  ActorRecord stranger = Actor();
  Status unknown = commit_(actors_.Update(stranger));
  EXPECT_EQ(unknown.code(), Code::kNotFound);
  EXPECT_EQ(unknown.message(), "actor " + stranger.id.Hex() + " is not registered");
  ActorRecord actor = Actor();
  ASSERT_TRUE(commit_(actors_.Register(actor)).ok());
  ASSERT_TRUE(commit_(actors_.Kill(actor.id, "ray.kill")).ok());
  Status dead = commit_(actors_.Update(Alive(actor)));
  EXPECT_EQ(dead.code(), Code::kFailedPrecondition);
  EXPECT_EQ(dead.message(), "actor " + actor.id.Hex() + " is DEAD (ray.kill); stop its worker");
  EXPECT_EQ(actors_.Find(actor.id)->state, ActorState::kDead);
}

TEST_F(ActorTableTest, KillMarksDeadWithTheCauseAndReturnsTheEntryOnce) {
  ActorRecord actor = Alive(Actor());
  ASSERT_TRUE(commit_(actors_.Register(actor)).ok());
  ASSERT_TRUE(commit_(actors_.Update(actor)).ok());
  Result<ActorRecord> killed = commit_(actors_.Kill(actor.id, "killed by the user"));
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  EXPECT_EQ(killed->state, ActorState::kDead);
  EXPECT_EQ(killed->death_cause, "killed by the user");
  EXPECT_EQ(killed->worker_id, actor.worker_id) << "the caller stops this worker";
  Result<ActorRecord> again = commit_(actors_.Kill(actor.id, "a second cause"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *killed) << "killing a DEAD actor returns it unchanged";
  Status unknown = commit_(actors_.Kill(ActorId::Of(job_), "x")).status();
  EXPECT_EQ(unknown.code(), Code::kNotFound);
}

TEST_F(ActorTableTest, TheEndOfAJobKillsItsActorsButNotDetachedOnesNorOtherJobs) {
  JobId other = *commit_(jobs_.Register(101, "10.0.0.3"));
  ActorRecord plain = Actor("a", "ns");
  ActorRecord detached = Actor("b", "ns");
  detached.detached = true;
  ActorRecord elsewhere = Actor("c", "ns", other);
  ActorRecord killed = Actor();
  for (const ActorRecord& a : {plain, detached, elsewhere, killed}) {
    ASSERT_TRUE(commit_(actors_.Register(a)).ok());
  }
  ASSERT_TRUE(commit_(actors_.Kill(killed.id, "ray.kill")).ok());
  EXPECT_EQ(*commit_(actors_.OnJobFinished(job_)), 1u);
  EXPECT_EQ(actors_.Find(plain.id)->state, ActorState::kDead);
  EXPECT_EQ(actors_.Find(plain.id)->death_cause, "the driver of job " + job_.Hex() + " exited");
  EXPECT_EQ(actors_.Find(killed.id)->death_cause, "ray.kill") << "the first cause stays";
  EXPECT_EQ(actors_.Find(detached.id)->state, ActorState::kPending);
  EXPECT_EQ(actors_.Find(elsewhere.id)->state, ActorState::kPending);
  EXPECT_FALSE(actors_.FindNamed("ns", "a").has_value());
  EXPECT_TRUE(actors_.FindNamed("ns", "b").has_value());
}

TEST_F(ActorTableTest, TheEndOfAJobChangesNothingWhenTheStoreFails) {
  ActorRecord actor = Actor("a", "ns");
  ASSERT_TRUE(commit_(actors_.Register(actor)).ok());
  store_.write_error = Unavailable("injected");
  EXPECT_EQ(commit_(actors_.OnJobFinished(job_)).status().code(), Code::kUnavailable);
  EXPECT_EQ(actors_.Find(actor.id)->state, ActorState::kPending);
  EXPECT_TRUE(actors_.FindNamed("ns", "a").has_value());
}

TEST_F(ActorTableTest, FailedWritesChangeNothing) {
  ActorRecord actor = Actor("a", "ns");
  store_.write_error = Unavailable("injected: redis went away");
  Status s = commit_(actors_.Register(actor));
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_EQ(s.message(), "registering actor " + actor.id.Hex() + ": injected: redis went away");
  EXPECT_EQ(actors_.size(), 0u);
  store_.write_error = Status::Ok();
  ASSERT_TRUE(commit_(actors_.Register(actor)).ok());
  store_.write_error = Unavailable("injected");
  EXPECT_EQ(commit_(actors_.Update(Alive(actor))).code(), Code::kUnavailable);
  EXPECT_EQ(commit_(actors_.Kill(actor.id, "x")).status().code(), Code::kUnavailable);
  EXPECT_EQ(actors_.Find(actor.id)->state, ActorState::kPending);
  EXPECT_TRUE(actors_.FindNamed("ns", "a").has_value());
}

TEST_F(ActorTableTest, ListsInRegistrationOrder) {
  std::vector<ActorId> ids;
  for (int i = 0; i < 5; ++i) {
    ActorRecord actor = Actor();
    ids.push_back(actor.id);
    ASSERT_TRUE(commit_(actors_.Register(actor)).ok());
  }
  std::vector<ActorId> listed;
  for (const ActorRecord& a : actors_.List()) listed.push_back(a.id);
  EXPECT_EQ(listed, ids);
}

TEST_F(ActorTableTest, ForgetsTheEarliestDeadBeyondTheLimit) {
  ActorTable small({/*max_dead_actors=*/2}, store_, jobs_);
  std::vector<ActorId> ids;
  for (int i = 0; i < 4; ++i) {
    ActorRecord actor = Actor();
    ids.push_back(actor.id);
    ASSERT_TRUE(commit_(small.Register(actor)).ok());
  }
  ActorRecord alive = Actor();
  ASSERT_TRUE(commit_(small.Register(alive)).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(commit_(small.Kill(ids[i], "x")).ok());
  EXPECT_FALSE(small.Find(ids[0]).has_value());
  EXPECT_TRUE(small.Find(ids[1]).has_value());
  EXPECT_FALSE(backing_.Get("actor:" + ids[0].Hex())->has_value()) << "its row is gone too";
  EXPECT_EQ(small.size(), 4u);
}

TEST_F(ActorTableTest, ACreationTaskIsKeptInTheRowButLeftOutOfReplies) {
  ActorRecord actor = Actor("keeper", "ns");
  actor.detached = true;
  ASSERT_TRUE(commit_(actors_.Register(actor)).ok());
  ActorRecord alive = Alive(actor);
  alive.creation_task = std::string(16, 'x');
  ASSERT_TRUE(commit_(actors_.Update(alive)).ok());
  ActorRecord restarting = actor;
  restarting.state = ActorState::kRestarting;
  restarting.num_restarts = 1;  // an update without one keeps the one kept
  ASSERT_TRUE(commit_(actors_.Update(restarting)).ok());
  EXPECT_EQ(actors_.Find(actor.id)->creation_task, std::string(16, 'x'));

  JobTable jobs(store_, clock_);
  ASSERT_TRUE(jobs.Load().ok());
  ActorTable restarted({}, store_, jobs);
  ASSERT_TRUE(restarted.Load().ok());
  EXPECT_EQ(restarted.Find(actor.id)->creation_task, std::string(16, 'x'));

  capnp::MallocMessageBuilder message;
  auto reply = message.initRoot<proto::ActorInfo>();
  FillActorInfo(*restarted.Find(actor.id), reply);
  EXPECT_EQ(reply.getCreationTask().size(), 0u);
}

TEST_F(ActorTableTest, LoadRestoresEveryActorAndItsNames) {
  ActorRecord named = Actor("trainer", "team");
  ActorRecord dead = Actor("old", "team");
  ActorRecord updated = Alive(Actor());
  for (const ActorRecord& a : {named, dead, updated})
    ASSERT_TRUE(commit_(actors_.Register(a)).ok());
  ASSERT_TRUE(commit_(actors_.Kill(dead.id, "ray.kill")).ok());
  ASSERT_TRUE(commit_(actors_.Update(updated)).ok());

  JobTable jobs(store_, clock_);
  ASSERT_TRUE(jobs.Load().ok());
  ActorTable restarted({}, store_, jobs);
  ASSERT_TRUE(restarted.Load().ok());
  EXPECT_EQ(restarted.size(), 3u);
  for (const ActorRecord& a : actors_.List()) EXPECT_EQ(*restarted.Find(a.id), a);
  EXPECT_EQ(restarted.FindNamed("team", "trainer")->id, named.id);
  EXPECT_FALSE(restarted.FindNamed("team", "old").has_value());
  EXPECT_EQ(commit_(restarted.Register(Actor("trainer", "team"))).code(), Code::kAlreadyExists);
  // A new actor is listed after the loaded ones.
  ActorRecord later = Actor();
  ASSERT_TRUE(commit_(restarted.Register(later)).ok());
  EXPECT_EQ(restarted.List().back().id, later.id);
}

TEST_F(ActorTableTest, LoadSkipsACorruptRowAndReturnsTheStoreError) {
  ActorRecord actor = Actor();
  ASSERT_TRUE(commit_(actors_.Register(actor)).ok());
  testing::PutRow(backing_, "actor:" + ActorId::Of(job_).Hex(), "not a message");
  ActorRecord mismatched = Actor();
  testing::PutRow(backing_, "actor:" + ActorId::Of(job_).Hex(), EncodeActorRow(mismatched));
  ActorTable restarted({}, store_, jobs_);
  ASSERT_TRUE(restarted.Load().ok());
  EXPECT_EQ(restarted.size(), 1u);
  EXPECT_TRUE(restarted.Find(actor.id).has_value());

  store_.scan_error = Unavailable("injected");
  ActorTable unreachable({}, store_, jobs_);
  EXPECT_EQ(unreachable.Load().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace airt::head::internal
