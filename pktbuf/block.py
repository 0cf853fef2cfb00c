"""Blocks: the state of a pktbuf object as one piece of memory, passed to kernels as one word.

A kernel family works on a handful of arrays (a domain has its descriptor table, pool table,
rings, caches, statistics...).  Passed as a tuple of arrays, they cost a kernel call ~7 machine
words each, and a function compiled with Numba's runtime takes a reference on each of them at
every call.  A *block* lays the arrays out in one memory area -- a header page, then each
array at an offset -- and the kernel receives only the block's base address.  Inside compiled
code ``blk.name`` is an array view built from that address: the same syntax as a tuple field,
no reference counting (the view carries no owner), and for arrays whose place does not depend
on the block's sizes the offset is a compile-time constant.

* :class:`Layout` describes one kind of block: its fields in order, each with a dtype, a count
  (fixed for the kind, or chosen when a block is created) and optional trailing dimensions.
  An upper layer may add an *alias*: another dtype over the same bytes as an existing field (the
  mbuf layer views the mempool's object table as mbuf descriptors).
* :class:`Block` is the Python object: pass it to kernels; ``blk.name`` in Python is a NumPy view
  of the same array.  The memory is private (anonymous) or a memfd, optionally placed in a
  :class:`~pktbuf.shm.Window` at a fixed address so that other processes can map it too.

Header (uint64 words): ``[0]`` magic, ``[1]`` layout signature, ``[2]`` total size, ``[3]``
field count, then ``(offset, count)`` of field ``i`` at words ``8 + 2i`` and ``9 + 2i``.  Kernels
read variable offsets and counts from there with ``!invariant.load`` loads, which LLVM may hoist
and merge like constants.
"""
from __future__ import annotations

import zlib

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import (NativeValue, infer_getattr, intrinsic, lower_getattr_generic, models,
                             register_model, typeof_impl, unbox)
from numba.core.typing.templates import AttributeTemplate
from numba.np.arrayobj import populate_array
from numba.np.numpy_support import from_dtype

from . import shm
from .errors import InvalidArgument

__all__ = ["Layout", "Block", "BlockType", "block_at"]

MAGIC = 0x4B434F4C42425450          # "PTBBLOCK"
HDR_FIELD0 = 8                      # header word of field 0's offset
HEADER_BYTES = shm.PAGE
MAX_FIELDS = (HEADER_BYTES // 8 - HDR_FIELD0) // 2
ALIGN = 64                          # every array starts on its own cache line

_LAYOUTS: dict[str, "Layout"] = {}


class _Field:
    __slots__ = ("name", "dtype", "count", "tail", "index", "const_off", "nbtype", "arytype")

    def __init__(self, name, dtype, count, tail, index):
        self.name = name
        self.dtype = np.dtype(dtype)
        self.count = count            # int (fixed for the kind) or None (chosen per block)
        self.tail = tuple(tail)
        self.index = index            # position in the header (aliases share their field's)
        self.const_off = None
        self.nbtype = from_dtype(self.dtype)
        self.arytype = types.Array(self.nbtype, 1 + len(self.tail), "C")

    def inner(self) -> int:
        return int(np.prod(self.tail, dtype=np.int64)) if self.tail else 1


class Layout:
    """A kind of block: ``Layout("domain", [("pools", POOL_DTYPE, 256), ("obj", OBJ, None)])``.

    Each field is ``(name, dtype, count)`` or ``(name, dtype, count, tail_shape)``; ``count``
    ``None`` means the block's creator gives it.  Fields are laid out in order, each aligned to
    64 bytes (``align=`` per field as a fifth element for more, e.g. a page).
    """

    def __init__(self, kind: str, fields):
        if kind in _LAYOUTS:
            raise InvalidArgument(f"block layout {kind!r} exists already")
        if len(fields) > MAX_FIELDS:
            raise InvalidArgument(f"a block has at most {MAX_FIELDS} fields")
        self.kind = kind
        self.fields: list[_Field] = []
        self.aligns: list[int] = []
        self.views: dict[str, _Field] = {}
        off = HEADER_BYTES
        for i, spec in enumerate(fields):
            name, dtype, count = spec[:3]
            tail = spec[3] if len(spec) > 3 else ()
            align = spec[4] if len(spec) > 4 else ALIGN
            f = _Field(name, dtype, count, tail, i)
            if off is not None:
                off = -(-off // align) * align
                f.const_off = off
                off = None if count is None else off + count * f.inner() * f.dtype.itemsize
            self.fields.append(f)
            self.aligns.append(align)
            self.views[name] = f
        sig = repr([(f.name, f.dtype.descr, f.count, f.tail) for f in self.fields])
        self.signature = zlib.crc32(f"{kind}:{sig}".encode())
        self.type = BlockType(kind)
        _LAYOUTS[kind] = self

    def alias(self, name: str, dtype, of: str) -> None:
        """View field ``of`` as ``dtype`` (same item size) under the attribute ``name``."""
        src = self.views[of]
        dtype = np.dtype(dtype)
        if dtype.itemsize != src.dtype.itemsize:
            raise InvalidArgument(f"alias {name!r}: item size {dtype.itemsize} != "
                                  f"{src.dtype.itemsize} of {of!r}")
        old = self.views.get(name)
        if old is not None:
            if old.dtype == dtype and old.index == src.index:
                return
            raise InvalidArgument(f"block {self.kind!r} has a field {name!r} already")
        f = _Field(name, dtype, src.count, src.tail, src.index)
        f.const_off = src.const_off
        self.views[name] = f

    def place(self, counts: dict) -> tuple[list[tuple[int, int]], int]:
        """Offsets and counts of every field for the given variable counts; total size."""
        off = HEADER_BYTES
        out = []
        for f, align in zip(self.fields, self.aligns):
            n = f.count if f.count is not None else counts.get(f.name)
            if n is None or int(n) < 0:
                raise InvalidArgument(f"block {self.kind!r}: field {f.name!r} needs a count")
            off = -(-off // align) * align
            out.append((off, int(n)))
            off += int(n) * f.inner() * f.dtype.itemsize
        return out, shm.page_round(off)

    def create(self, counts: dict | None = None, *, shared: bool = False,
               window: "shm.Window | None" = None, offset: int | None = None,
               name: str | None = None) -> "Block":
        """A new zeroed block: private anonymous memory, or a memfd with ``shared=True``;
        inside ``window`` (at ``offset``) if given."""
        places, size = self.place(counts or {})
        if shared:
            mem = shm.Region(size, name or f"pktbuf-{self.kind}", window=window, offset=offset)
        else:
            mem = _Private(size, window, offset)
        hdr = mem.view(np.uint64, 0, HEADER_BYTES // 8)
        hdr[1] = self.signature
        hdr[2] = size
        hdr[3] = len(self.fields)
        for i, (o, n) in enumerate(places):
            hdr[HDR_FIELD0 + 2 * i] = o
            hdr[HDR_FIELD0 + 2 * i + 1] = n
        hdr[0] = MAGIC
        return Block(self, mem)

    def attach(self, mem) -> "Block":
        """A block over memory that holds one of this kind already (another process's)."""
        hdr = mem.view(np.uint64, 0, HEADER_BYTES // 8)
        if int(hdr[0]) != MAGIC or int(hdr[1]) != self.signature or int(hdr[2]) > mem.size:
            raise InvalidArgument(f"the memory does not hold a {self.kind!r} block of this "
                                  "version of pktbuf")
        return Block(self, mem)


class _Private:
    """Anonymous private memory, committed on first touch, for a block of one process."""

    def __init__(self, size, window=None, offset=None):
        if window is not None:
            self._map = window.map_anonymous(size, offset=offset)
        else:
            self._map = shm.Mapping(shm._mmap(None, size, shm._RW, shm._ANON_NONE), size)
        self.address = self._map.address
        self.size = size

    def view(self, dtype, offset, count):
        return self._map.view(dtype, offset, count)


class Block:
    """One block: pass it to kernels; ``blk.<field>`` is a NumPy view in Python too.

    ``memory`` is what holds the bytes (a :class:`~pktbuf.shm.Region` when shared: its ``fd``
    and ``address`` are what another process needs).
    """

    __slots__ = ("layout", "memory", "_base", "_views")

    def __init__(self, layout: Layout, memory):
        self.layout = layout
        self.memory = memory
        self._base = memory.address
        self._views = {}

    @property
    def _numba_type_(self):
        return self.layout.type

    @property
    def address(self) -> int:
        return self._base

    def __getattr__(self, name):
        try:
            return self._views[name]
        except (KeyError, AttributeError):
            pass
        f = self.layout.views.get(name) if name != "_views" else None
        if f is None:
            raise AttributeError(f"{self.layout.kind} block has no field {name!r}")
        hdr = self.memory.view(np.uint64, 0, HEADER_BYTES // 8)
        off = int(hdr[HDR_FIELD0 + 2 * f.index])
        n = int(hdr[HDR_FIELD0 + 2 * f.index + 1])
        v = self.memory.view(f.dtype, off, n * f.inner()).reshape((n,) + f.tail)
        self._views[name] = v
        return v

    def __iter__(self):
        """The fields' arrays in layout order (as the fields of a tuple would be)."""
        return (getattr(self, f.name) for f in self.layout.fields)

    def __repr__(self) -> str:
        return f"<pktbuf {self.layout.kind} block at {self._base:#x}>"


# ---------------------------------------------------------------------------------------------
# Numba side

class BlockType(types.Type):
    """The Numba type of every block of one layout: a single pointer."""

    def __init__(self, kind: str):
        self.kind = kind
        super().__init__(name=f"pktbuf.Block[{kind}]")

    @property
    def layout(self) -> Layout:
        return _LAYOUTS[self.kind]


@register_model(BlockType)
class _BlockModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.IntType(8).as_pointer())


@typeof_impl.register(Block)
def _typeof_block(val, c):
    return val.layout.type


@unbox(BlockType)
def _unbox_block(typ, obj, c):
    # an object without ``_base`` (only possible through an unchecked entry point) gives an
    # AttributeError, never a wild pointer
    res = cgutils.alloca_once_value(c.builder, ir.Constant(ir.IntType(8).as_pointer(), None))
    addr = c.pyapi.object_getattr_string(obj, "_base")
    with c.builder.if_then(cgutils.is_not_null(c.builder, addr), likely=True):
        c.builder.store(c.pyapi.long_as_voidptr(addr), res)
        c.pyapi.decref(addr)
    return NativeValue(c.builder.load(res), is_error=c.pyapi.c_api_error())


@infer_getattr
class _BlockAttributes(AttributeTemplate):
    key = BlockType

    def generic_resolve(self, ty, attr):
        f = ty.layout.views.get(attr)
        return f.arytype if f is not None else None


_I64 = ir.IntType(64)


def _header_word(builder, base, word):
    p = builder.bitcast(builder.gep(base, [ir.Constant(_I64, 8 * word)]), _I64.as_pointer())
    v = builder.load(p, align=8)
    v.set_metadata("invariant.load", builder.module.add_metadata([]))
    return v


@lower_getattr_generic(BlockType)
def _lower_block_attr(context, builder, typ, value, attr):
    f = typ.layout.views[attr]
    if f.const_off is not None:
        off = ir.Constant(_I64, f.const_off)
    else:
        off = _header_word(builder, value, HDR_FIELD0 + 2 * f.index)
    if f.count is not None:
        n = ir.Constant(_I64, f.count)
    else:
        n = _header_word(builder, value, HDR_FIELD0 + 2 * f.index + 1)
    aryty = f.arytype
    dty = context.get_data_type(aryty.dtype)
    data = builder.bitcast(builder.gep(value, [off], inbounds=True), dty.as_pointer())
    item = f.dtype.itemsize
    shape = [n] + [ir.Constant(_I64, d) for d in f.tail]
    strides = []
    acc = item
    for d in reversed(f.tail):
        strides.append(ir.Constant(_I64, acc))
        acc *= d
    strides.append(ir.Constant(_I64, acc))
    strides.reverse()
    ary = context.make_array(aryty)(context, builder)
    populate_array(ary, data=data, shape=shape, strides=strides,
                   itemsize=ir.Constant(_I64, item), meminfo=None)
    return ary._getvalue()


@intrinsic
def block_at(typingctx, addr, kind):
    """In compiled code: the block of layout ``kind`` (a string constant) at address ``addr``.

    The inverse of passing a :class:`Block`: a table that stores blocks' addresses (the port
    table stores each queue's) turns one back into a typed block, one pointer, no checks --
    the caller stores only addresses of live blocks of that kind.
    """
    if not (isinstance(addr, types.Integer) and isinstance(kind, types.StringLiteral)):
        return None
    if kind.literal_value not in _LAYOUTS:
        return None
    bt = _LAYOUTS[kind.literal_value].type

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], ir.IntType(8).as_pointer())

    return bt(addr, kind), codegen
