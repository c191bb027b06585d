"""ObjectRef: a reference to an object this process owns."""

import pickle

import msgpack

from airt import _airt


# An object put with its pickle's out-of-band buffers (airt._airt.put_buffers): the magic, the
# number of buffers and the pickle's length (u64 little-endian each), the pickle, then per buffer
# its length and bytes, each buffer starting at a multiple of 64 bytes.
FRAME_MAGIC = b"AIRTPK5\n"


def decode_pickled(data):
    """A Python value from an object's bytes (bytes, or a PinnedBuffer over the store): a framed
    one's arrays are views of those bytes, not copies."""
    view = memoryview(data)
    if view[:len(FRAME_MAGIC)] == FRAME_MAGIC:
        return _unframe(view)
    return pickle.loads(view)


def _unframe(view):
    at = len(FRAME_MAGIC)
    count = int.from_bytes(view[at:at + 8], "little")
    meta_len = int.from_bytes(view[at + 8:at + 16], "little")
    at += 16
    meta = view[at:at + meta_len]
    at += meta_len
    buffers = []
    for _ in range(count):
        at = (at + 8 + 63) // 64 * 64 - 8
        n = int.from_bytes(view[at:at + 8], "little")
        at += 8
        buffers.append(view[at:at + n])  # no copy: the array is a view of `data`
        at += n
    return pickle.loads(meta, buffers=buffers)


def encode_python_args(args, kwargs, settings=None):
    """A Python call's arguments for airt._airt: each positional one pickled (protocol 5) or, for
    an ObjectRef, its id in a 1-tuple (its value reaches the call); last, the keyword ones and the
    call's settings for the worker (airt._private.options.call_settings), pickled as a pair."""
    ref_kwargs = [k for k, v in kwargs.items() if isinstance(v, ObjectRef)]
    if ref_kwargs:  # an ObjectRef keyword argument is resolved too: it travels as a positional one
        kwargs = dict(kwargs)
        args = list(args) + [kwargs.pop(k) for k in ref_kwargs]
        settings = {**(settings or {}), "ref_kwargs": ref_kwargs}
    encoded = [_encode_ref(a) if isinstance(a, ObjectRef) else pickle.dumps(a, protocol=5)
               for a in args]
    encoded.append(pickle.dumps((kwargs, settings), protocol=5))
    return encoded


def _encode_ref(ref):
    """An ObjectRef argument: its id for the core to resolve, or a filled ref's bytes as they
    are (a pickle, framed or not: what the worker decodes)."""
    if ref._filled is None:
        return (ref.binary(),)
    if ref._filled[0] != "value":
        ref._raise()
    return bytes(ref._filled[1])


def encode_cpp_args(args):
    """A C++ call's arguments: msgpack values, or ObjectRef ids in 1-tuples."""
    return [_encode_ref(a) if isinstance(a, ObjectRef) else msgpack.packb(a, use_bin_type=True)
            for a in args]


def _filled_ref(binary, value_format, filled):
    """An ObjectRef unpickled from a value: it carries what its object held when it was sent."""
    ref = ObjectRef.__new__(ObjectRef)
    ref._reference = None
    ref._id = binary
    ref._format = value_format
    ref._filled = filled
    return ref


class ObjectRef:
    """A reference to an object (a put, or a task's return), as Ray's ObjectRef.

    The object stays while any ObjectRef to it exists in this process (or a task submitted with
    it as an argument has not finished); it is freed from every store after that.

    An ObjectRef inside a value (a list of refs passed to a task, returned from one, put) is
    pickled with its object's bytes, waiting for them if needed, and the receiving process gets
    a "filled" ref: get() and wait() answer from those bytes. Ray sends the id alone and lets the
    receiver borrow the object from its owner; airt's core has no borrowing between processes
    yet, so the value travels eagerly instead (docs/python.md).
    """

    PICKLE = "pickle"    # a Python value
    MSGPACK = "msgpack"  # a C++ function's return

    __slots__ = ("_reference", "_id", "_format", "_filled")

    def __init__(self, binary, value_format):
        self._reference = _airt.hold(binary)
        self._id = binary
        self._format = value_format
        self._filled = None  # ("value", bytes) or ("error", the airt exception)

    def binary(self):
        return self._id

    def hex(self):
        return self._id.hex()

    def _decode(self, data):
        if self._format == ObjectRef.MSGPACK:
            return msgpack.unpackb(data, raw=False, strict_map_key=False)
        return decode_pickled(data)

    def _raise(self):
        raise self._filled[1]

    def _filled_value(self):
        if self._filled[0] != "value":
            self._raise()
        return self._decode(self._filled[1])

    def __await__(self):
        """`await ref` in asyncio: the value, waited for on a thread (the loop runs on)."""
        import asyncio
        import airt
        return asyncio.get_running_loop().run_in_executor(None, airt.get, self).__await__()

    def __reduce__(self):
        filled = self._filled
        if filled is None:
            try:
                filled = ("value", bytes(_airt.get([self._id], None)[0]))
            except _airt.Error as error:  # an airt exception: it pickles as its kind and data
                filled = ("error", error)
        return _filled_ref, (self._id, self._format, filled)

    def __eq__(self, other):
        return isinstance(other, ObjectRef) and other.binary() == self.binary()

    def __hash__(self):
        return hash(self.binary())

    def __repr__(self):
        return f"ObjectRef({self.hex()})"
