"""What a searcher or a scheduler optimises, shared by both bases."""


class Objective:
    """`metric` and `mode` ("min" or "max"; None until the tuner's TuneConfig gives them)."""

    def __init__(self, metric=None, mode=None):
        if mode not in (None, "min", "max"):
            raise ValueError("mode must be 'min' or 'max'")
        self._metric, self._mode = metric, mode

    @property
    def metric(self):
        return self._metric

    @property
    def mode(self):
        return self._mode
