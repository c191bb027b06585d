"""Which of streaming_split's n consumers gets each block (Ray Data's OutputSplitter).

Blocks are handed on whole (by reference): the consumer chosen first is the one that asked for
the least so far (`key`, by default the rows it was given); it gets a block of the buffer that
lies on its hinted node when one does (locality_hints), else the oldest. With hints, 2 × n
blocks are kept in the buffer before any is handed on, so that most consumers find a block of
their node there. With equal=True a block goes out only when the rows still buffered can bring
every other consumer up to the most-fed one; at the end the buffer is cut so that each consumer
has exactly total // n rows (the last total % n are dropped, as Ray's). Every other row goes to
exactly one consumer.
"""


class OutputSplitter:
    def __init__(self, n, equal, hints=None, location=None, cut=None, key=None):
        """location(ref) -> the node id holding the block, or None; cut(ref, start, rows) ->
        the ref of that slice of the block; key(i) -> how much consumer i has waiting (the
        lowest, counting what this call hands it, goes first, ties to the least fed); without
        it, the least fed goes first."""
        self.n, self.equal = n, equal
        self.hints = list(hints) if hints else None
        self.location = location or (lambda ref: None)
        self.cut = cut
        self.key = key
        self.fed = [0] * n
        self.buffer = []  # [ref, rows, node]
        self.min_buffer = 2 * n if self.hints else 0
        self.hits = self.misses = 0

    def add(self, ref, meta):
        """Buffers a block; the (consumer, ref) pairs that may be handed on now."""
        node = self.location(ref) if self.hints else None
        self.buffer.append([ref, meta["num_rows"], node])
        return self._dispatch(everything=False)

    def finish(self):
        """The input is over: the (consumer, ref) pairs of what is left in the buffer."""
        if not self.equal:
            return self._dispatch(everything=True)
        out = self._dispatch(everything=True)  # what may still go out whole
        top = max(self.fed)
        need = [top - f for f in self.fed]
        rest = sum(b[1] for b in self.buffer) - sum(need)
        assert rest >= 0, (rest, self.fed, self.buffer)
        need = [k + rest // self.n for k in need]
        for i in sorted(range(self.n), key=lambda i: need[i]):
            while need[i] > 0:
                block = self._pop_for(i)
                ref, rows, node = block
                if rows <= need[i]:
                    out.append((i, ref))
                else:  # cut: the head goes to i, the tail back to the buffer
                    out.append((i, self.cut(ref, 0, need[i])))
                    self.buffer.insert(0, [self.cut(ref, need[i], rows - need[i]),
                                           rows - need[i], node])
                    rows = need[i]
                self._count(i, node)
                self.fed[i] += rows
                need[i] -= rows
        self.buffer = []  # under n rows: dropped
        return out

    def _pop_for(self, i):
        if self.hints is not None:
            for at, block in enumerate(self.buffer):
                if block[2] is not None and block[2] == self.hints[i]:
                    return self.buffer.pop(at)
        return self.buffer.pop(0)

    def _count(self, i, node):
        if self.hints is not None:
            if node is not None and node == self.hints[i]:
                self.hits += 1
            else:
                self.misses += 1

    def _dispatch(self, everything):
        out, given = [], [0] * self.n
        while self.buffer and (everything or len(self.buffer) >= self.min_buffer):
            if self.key is None:
                i = min(range(self.n), key=lambda k: (self.fed[k], k))
            else:
                i = min(range(self.n), key=lambda k: (self.key(k) + given[k], self.fed[k], k))
            block = self._pop_for(i)
            if not self._safe(i, block[1]):
                self.buffer.insert(0, block)
                break
            out.append((i, block[0]))
            given[i] += 1
            self.fed[i] += block[1]
            self._count(i, block[2])
        return out

    def _safe(self, i, rows):
        """Whether giving consumer i `rows` more leaves enough buffered to equalize the rest."""
        if not self.equal:
            return True
        fed = list(self.fed)
        fed[i] += rows
        top = max(fed)
        return sum(b[1] for b in self.buffer) >= sum(top - f for f in fed)
