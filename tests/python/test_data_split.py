"""streaming_split's OutputSplitter without a cluster: every row goes to exactly one consumer,
equal=True gives each exactly total // n rows, and with locality hints a consumer gets the
blocks of its node first (blocks are names, their nodes a dict, cuts recorded)."""

import random

import pytest

from airt.data._splitter import OutputSplitter


class Blocks:
    """Fake blocks: a name per block, its rows and node; cut() makes a named slice."""

    def __init__(self):
        self.rows, self.node = {}, {}

    def make(self, name, rows, node=None):
        self.rows[name], self.node[name] = rows, node
        return name

    def cut(self, ref, start, rows):
        name = f"{ref}[{start}:{start + rows}]"
        self.rows[name], self.node[name] = rows, self.node[ref]
        return name


def run(splitter, blocks, names):
    got = []
    for name in names:
        got += splitter.add(name, {"num_rows": blocks.rows[name]})
    got += splitter.finish()
    return got


def rows_of(blocks, got, n):
    per = [0] * n
    for i, ref in got:
        per[i] += blocks.rows[ref]
    return per


@pytest.mark.parametrize("hints", [None, ["A", "B", "C"]])
@pytest.mark.parametrize("seed", range(5))
def test_equal_gives_each_consumer_total_floor_n_rows(hints, seed):
    rng = random.Random(seed)
    blocks = Blocks()
    names = [blocks.make(f"b{k}", rng.randint(0, 40), rng.choice("ABC")) for k in range(30)]
    total = sum(blocks.rows[b] for b in names)
    splitter = OutputSplitter(3, True, hints, blocks.node.get, blocks.cut)
    per = rows_of(blocks, run(splitter, blocks, names), 3)
    assert per == [total // 3] * 3


@pytest.mark.parametrize("hints", [None, ["A", "B"]])
def test_not_equal_hands_every_block_on_once(hints):
    blocks = Blocks()
    names = [blocks.make(f"b{k}", 10, "AB"[k % 2]) for k in range(21)]
    got = run(OutputSplitter(2, False, hints, blocks.node.get, blocks.cut), blocks, names)
    assert sorted(ref for _, ref in got) == sorted(names)
    assert all(rows for rows in rows_of(blocks, got, 2))


@pytest.mark.parametrize("equal", [False, True])
def test_a_hinted_consumer_gets_the_blocks_of_its_node(equal):
    rng = random.Random(7)
    blocks = Blocks()
    names = [blocks.make(f"b{k}", 100, rng.choice("AB")) for k in range(60)]
    splitter = OutputSplitter(2, equal, ["A", "B"], blocks.node.get, blocks.cut)
    got = run(splitter, blocks, names)
    local = sum(1 for i, ref in got if blocks.node[ref] == "AB"[i])
    assert splitter.hits == local and splitter.hits + splitter.misses == len(got)
    assert local >= 0.8 * len(got), (local, len(got))
    # The same blocks without hints: about half land on their node.
    plain = run(OutputSplitter(2, equal), blocks, names)
    assert sum(1 for i, ref in plain if blocks.node[ref] == "AB"[i]) < local


def test_a_custom_key_balances_what_is_waiting_also_at_the_end():
    blocks = Blocks()
    names = [blocks.make(f"b{k}", 5, "A") for k in range(8)]
    splitter = OutputSplitter(2, False, ["A", "B"], blocks.node.get, blocks.cut,
                              key=lambda i: 0)  # nothing waiting anywhere
    got = run(splitter, blocks, names)
    assert rows_of(blocks, got, 2) == [20, 20]
