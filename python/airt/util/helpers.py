"""as_completed and map_unordered: results as their tasks finish, as Ray's ray.util helpers."""

import airt

DEFAULT_CHUNK_SIZE = 10
DEFAULT_BACKPRESSURE_SIZE = 100


def _check(chunk_size, kwargs):
    if chunk_size < 1:
        raise ValueError("`chunk_size` must be >= 1")
    if "num_returns" in kwargs:
        raise ValueError("Use the `chunk_size` argument instead of `num_returns`.")


def _next_batch(refs, chunk_size, yield_obj_refs, kwargs):
    """(up to chunk_size finished results or refs, the refs still pending), after one wait."""
    ready, pending = airt.wait(refs, num_returns=min(chunk_size, len(refs)), **kwargs)
    return (ready if yield_obj_refs else airt.get(ready)), pending


def as_completed(refs, *, chunk_size=DEFAULT_CHUNK_SIZE, yield_obj_refs=False, **kwargs):
    """Yields the values of `refs` (or, with yield_obj_refs, the refs) as they finish, waiting
    for chunk_size at a time. kwargs go to wait() (timeout=, fetch_local=)."""
    _check(chunk_size, kwargs)
    pending = list(refs)
    while pending:
        done, pending = _next_batch(pending, chunk_size, yield_obj_refs, kwargs)
        yield from done


def map_unordered(fn, items, *, backpressure_size=DEFAULT_BACKPRESSURE_SIZE,
                  chunk_size=DEFAULT_CHUNK_SIZE, yield_obj_refs=False, **kwargs):
    """Submits fn.remote(item) for each item, at most backpressure_size pending at once (None: no
    limit), and yields the results as they finish."""
    if backpressure_size is not None and backpressure_size <= 0:
        raise ValueError("backpressure_size must be positive.")
    _check(chunk_size, kwargs)
    limit = float("inf") if backpressure_size is None else backpressure_size
    pending = []
    for item in items:
        pending.append(fn.remote(item))
        if len(pending) >= limit:
            done, pending = _next_batch(pending, chunk_size, yield_obj_refs, kwargs)
            yield from done
    yield from as_completed(pending, chunk_size=chunk_size, yield_obj_refs=yield_obj_refs,
                            **kwargs)
