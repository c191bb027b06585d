"""References inside values (docs/ownership.md) on a local cluster: refs nested in arguments are
not resolved (as in Ray, top-level ones are), they travel as references, and the process that
receives one borrows the object from its owner."""

import gc
import os
import time

import numpy as np
import pytest

import airt
from airt.exceptions import OwnerDiedError


def test_refs_nested_in_arguments_are_refs_and_are_not_waited_for(cluster, tmp_path):
    marker = str(tmp_path / "go")

    @airt.remote
    def slow(path):
        deadline = time.monotonic() + 60
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.01)
        return 7

    @airt.remote(num_cpus=0)  # another shape: not queued behind `slow` on its worker
    def kinds(refs, top):
        return [type(r).__name__ for r in refs], type(top).__name__

    pending = slow.remote(marker)
    block = airt.put(np.zeros(1 << 20, dtype=np.uint8))
    # The nested refs reach the task as refs (one of them to an object not made yet: nothing
    # waits for it, nothing is materialised); the top-level one as its value.
    assert airt.get(kinds.remote([pending, block], block), timeout=60) == (
        ["ObjectRef", "ObjectRef"], "ndarray")
    open(marker, "w").close()
    assert airt.get(pending, timeout=60) == 7


def test_a_task_reads_the_refs_it_was_given_from_their_owner(cluster):
    @airt.remote
    def total(refs):
        return int(sum(a.sum() for a in airt.get(refs)))

    blocks = [airt.put(np.ones(1 << 20, dtype=np.uint8)) for _ in range(3)]
    assert airt.get(total.remote(blocks), timeout=60) == 3 << 20


def test_a_borrowed_object_is_readable_after_its_owner_dropped_its_ref(cluster):
    @airt.remote
    class Keeper:
        def keep(self, refs):
            self.refs = refs
            return len(refs)

        def total(self):
            return int(sum(a.sum() for a in airt.get(self.refs)))

    keeper = Keeper.remote()
    refs = [airt.put(np.ones(1 << 20, dtype=np.uint8))]
    assert airt.get(keeper.keep.remote(refs), timeout=60) == 1
    del refs
    gc.collect()
    assert airt.get(keeper.total.remote(), timeout=60) == 1 << 20


def test_refs_returned_from_a_task_outlive_it(cluster):
    @airt.remote
    def make(n):
        return [airt.put(np.full(1 << 20, i, dtype=np.uint8)) for i in range(n)]

    refs = airt.get(make.remote(3), timeout=60)
    assert [int(airt.get(r)[0]) for r in refs] == [0, 1, 2]


def test_get_of_a_borrowed_object_whose_owner_died_raises_owner_died(cluster):
    @airt.remote
    class Maker:
        def make(self):
            return [airt.put(np.ones(1 << 20, dtype=np.uint8))]

    maker = Maker.remote()
    refs = airt.get(maker.make.remote(), timeout=60)
    assert int(airt.get(refs[0]).sum()) == 1 << 20
    airt.kill(maker)
    deadline = time.monotonic() + 30
    while True:  # the owner's death reaches this process when its connection ends
        try:
            airt.get(refs[0], timeout=30)
        except OwnerDiedError as error:
            assert refs[0].hex() in str(error)
            break
        assert time.monotonic() < deadline, "the owner's death was never noticed"
        time.sleep(0.05)


def test_an_actor_borrowing_from_a_killed_task_gets_owner_died_naming_the_owner(cluster):
    import signal

    @airt.remote
    class Keeper:
        def keep(self, refs):
            self.refs = refs  # borrowed from the task that put them
            return len(refs)

        def read(self):
            try:
                return "read", int(airt.get(self.refs[0], timeout=30).sum())
            except OwnerDiedError as error:
                return "OwnerDiedError", str(error)

    @airt.remote(max_retries=0)
    def owner(keeper):
        ref = airt.put(np.ones(1 << 20, dtype=np.uint8))  # this task's worker owns it
        assert airt.get(keeper.keep.remote([ref]), timeout=60) == 1
        address, _ = airt._airt.owner_of(ref.binary(), False)
        return os.getpid(), address

    keeper = Keeper.remote()
    pid, address = airt.get(owner.remote(keeper), timeout=60)
    assert airt.get(keeper.read.remote(), timeout=60) == ("read", 1 << 20)
    os.kill(pid, signal.SIGKILL)  # the owner's process dies; the actor still holds the ref
    deadline = time.monotonic() + 30
    while True:  # the owner's death reaches the borrower when its connection ends
        kind, text = airt.get(keeper.read.remote(), timeout=60)
        if kind == "OwnerDiedError":
            break
        assert time.monotonic() < deadline, "the borrower never saw its owner die"
        time.sleep(0.05)
    assert address in text and "owner" in text, text


def test_refs_inside_a_cpp_value_arrive_as_object_refs_and_go_back_as_refs(cluster):
    # PutBlocks (tests/e2e/borrow_functions.cc) returns std::vector<ObjectRef<...>>: the C++ task's
    # worker owns the objects, this process borrows them.
    refs = airt.get(airt.cpp_function("PutBlocks").remote(2, 1024), timeout=60)
    assert [type(r).__name__ for r in refs] == ["ObjectRef", "ObjectRef"]
    assert [len(airt.get(r, timeout=60)) for r in refs] == [1024, 1024]
    # Inside an argument they travel as refs again: CountRefs reads none of them.
    assert airt.get(airt.cpp_function("CountRefs").remote(refs), timeout=60) == 2
    assert airt.get(airt.cpp_function("SumRefsAfter").remote(refs, 0), timeout=60) == 2048
