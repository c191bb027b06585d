"""ObjectRef: a reference to an object, owned by this process or borrowed from its owner."""

import pickle
import threading

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


class _Collecting:
    """While active on a thread, the ObjectRefs pickled there are collected (an argument's: its
    task holds them until done) instead of being kept by their owner until someone borrows them."""

    _local = threading.local()

    def __enter__(self):
        self._outer = getattr(_Collecting._local, "ids", None)
        self.ids = []
        _Collecting._local.ids = self.ids
        return self

    def __exit__(self, *exc):
        _Collecting._local.ids = self._outer

    @staticmethod
    def current():
        return getattr(_Collecting._local, "ids", None)


def _encode_value(value):
    """A pickled argument: bytes, or (bytes, [ids of the refs inside]) when it holds refs."""
    with _Collecting() as contained:
        data = pickle.dumps(value, protocol=5)
    return (data, contained.ids) if contained.ids else data


def encode_python_args(args, kwargs, settings=None):
    """A Python call's arguments for airt._airt: each positional one pickled (protocol 5) or, for
    an ObjectRef, its id in a 1-tuple (its value reaches the call); last, the keyword ones and the
    call's settings for the worker (airt._private.options.call_settings), pickled as a pair. Refs
    nested inside an argument are not resolved (as in Ray): they travel as references, and the
    worker borrows them from their owner (docs/ownership.md)."""
    ref_kwargs = [k for k, v in kwargs.items() if isinstance(v, ObjectRef)]
    if ref_kwargs:  # an ObjectRef keyword argument is resolved too: it travels as a positional one
        kwargs = dict(kwargs)
        args = list(args) + [kwargs.pop(k) for k in ref_kwargs]
        settings = {**(settings or {}), "ref_kwargs": ref_kwargs}
    encoded = [(a.binary(),) if isinstance(a, ObjectRef) else _encode_value(a) for a in args]
    encoded.append(_encode_value((kwargs, settings)))
    return encoded


def encode_cpp_args(args):
    """A C++ call's arguments: msgpack values, or ObjectRef ids in 1-tuples."""
    return [(a.binary(),) if isinstance(a, ObjectRef) else encode_msgpack(a) for a in args]


def _pack_ref(value):
    """An ObjectRef inside a msgpack value, as C++ writes one (airt/driver.h's adaptor): [id,
    owner address, owner worker id]; the object is kept until the reader borrows it."""
    if isinstance(value, ObjectRef):
        address, worker = _airt.owner_of(value.binary(), True)
        return [value.binary(), address, worker]
    raise TypeError(f"cannot encode a {type(value).__name__} as msgpack for C++")


def _ref_or_list(items):
    """A list read from a msgpack value, or the ref C++ wrote there ([28-byte id, owner address,
    owner worker id]), borrowed from its owner as an ObjectRef of a msgpack value."""
    if (len(items) == 3 and type(items[0]) is bytes and len(items[0]) == 28
            and type(items[1]) is str and type(items[2]) is bytes and len(items[2]) in (0, 28)):
        return _borrowed_ref(items[0], ObjectRef.MSGPACK, items[1], items[2])
    return items


def encode_msgpack(value):
    """`value` as msgpack for C++; ObjectRefs inside it travel as refs."""
    return msgpack.packb(value, use_bin_type=True, default=_pack_ref)


def decode_msgpack(data):
    """A msgpack value from C++; the refs inside it arrive as ObjectRefs (borrowed)."""
    return msgpack.unpackb(data, raw=False, strict_map_key=False, list_hook=_ref_or_list)


def _borrowed_ref(binary, value_format, owner_address, owner_worker):
    """An ObjectRef unpickled from a value: borrowed from its owner (registered with it while this
    process holds the ref), unless this process owns it."""
    ref = ObjectRef.__new__(ObjectRef)
    ref._reference = _airt.borrow(binary, owner_address, owner_worker)
    ref._id = binary
    ref._format = value_format
    return ref


class ObjectRef:
    """A reference to an object (a put, or a task's return), as Ray's ObjectRef.

    The object stays while any ObjectRef to it exists in this process (or a task submitted with
    it as an argument has not finished); it is freed from every store after that.

    An ObjectRef inside a value (a list of refs passed to a task, returned from one, put) is
    pickled as its id and its owner's address, never as the object's bytes: the process that
    unpickles it borrows the object from its owner (docs/ownership.md), and the object lives while
    the owner or any borrower holds a ref to it.
    """

    PICKLE = "pickle"    # a Python value
    MSGPACK = "msgpack"  # a C++ function's return

    __slots__ = ("_reference", "_id", "_format")

    def __init__(self, binary, value_format):
        self._reference = _airt.hold(binary)
        self._id = binary
        self._format = value_format

    def binary(self):
        return self._id

    def hex(self):
        return self._id.hex()

    def _decode(self, data):
        if self._format == ObjectRef.MSGPACK:
            return decode_msgpack(data)
        return decode_pickled(data)

    def __await__(self):
        """`await ref` in asyncio: the value, waited for on a thread (the loop runs on)."""
        import asyncio
        import airt
        return asyncio.get_running_loop().run_in_executor(None, airt.get, self).__await__()

    def __reduce__(self):
        contained = _Collecting.current()
        if contained is not None:
            contained.append(self._id)
        address, worker = _airt.owner_of(self._id, contained is None)
        return _borrowed_ref, (self._id, self._format, address, worker)

    def __eq__(self, other):
        return isinstance(other, ObjectRef) and other.binary() == self.binary()

    def __hash__(self):
        return hash(self.binary())

    def __repr__(self):
        return f"ObjectRef({self.hex()})"
