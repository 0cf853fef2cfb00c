"""Which compiled specialisations the facade's kernels have, to prove odd arguments never make
new ones.

A facade normalises every argument before a kernel sees it: integers become Python ints (Numba:
``int64``), flags Python bools, arrays 1-d C-contiguous writeable arrays of the kernel's dtype.
A float, a string, a NumPy scalar of another width, a read-only or strided array reaching a
kernel would compile a new specialisation (seconds, and a cache entry per variant) -- and
through the facade's direct entry points (``FastCall``) would be misread.
"""
from __future__ import annotations

import importlib

from numba.core import types
from numba.core.registry import CPUDispatcher

FACADE_KERNEL_MODULES = (
    "pktbuf.buf.domain.entry", "pktbuf.buf.mbuf.data", "pktbuf.buf.mbuf.indirect", "pktbuf.buf.mbuf.raw",
    "pktbuf.buf.mbuf.check", "pktbuf.buf.mbuf.free", "pktbuf.buf.mbuf.dynfield", "pktbuf.buf.mbuf.offload",
    "pktbuf.buf.mempool.kernels", "pktbuf.buf.ring.kernels",
    "pktbuf.buf.heap.kernels", "pktbuf.buf.heap.elem", "pktbuf.buf.heap.audit",
    "pktbuf.buf.pagepool.kernels", "pktbuf.buf.pagepool.pages", "pktbuf.buf.pagepool.alloc",
    "pktbuf.buf.pagepool.recycle", "pktbuf.buf.pagepool.arena",
)

_OK_INTS = (types.int64, types.uint64)


def dispatchers(modules=FACADE_KERNEL_MODULES) -> list:
    seen, out = set(), []
    for name in modules:
        mod = importlib.import_module(name)
        for obj in vars(mod).values():
            if isinstance(obj, CPUDispatcher) and id(obj) not in seen:
                seen.add(id(obj))
                out.append(obj)
    return out


def signatures(disps) -> dict:
    return {d: set(d.overloads) for d in disps}


def _bad_type(t) -> str | None:
    if isinstance(t, types.Literal):
        return None      # a constant from a jitted caller, never from Python
    if isinstance(t, types.Boolean):
        return None
    if isinstance(t, types.Integer):
        return None if t in _OK_INTS else f"integer {t}"
    if isinstance(t, types.Float) or isinstance(t, types.Complex):
        return f"number {t}"
    if isinstance(t, (types.UnicodeType, types.CharSeq, types.UnicodeCharSeq)):
        return f"string {t}"
    if isinstance(t, types.Array):
        if t.layout != "C" or not t.mutable or t.ndim != 1:
            return f"array {t}"
        return None
    if isinstance(t, types.BaseTuple):
        for e in t:
            bad = _bad_type(e)
            if bad:
                return bad
        return None
    if isinstance(t, (types.NoneType, types.Omitted, types.Optional, types.PyObject)):
        return f"{t}"
    return None


def new_signatures(before: dict) -> list:
    """(dispatcher name, signature, reason) for every signature added since ``before``."""
    out = []
    for d, old in before.items():
        for sig in set(d.overloads) - old:
            reasons = [r for r in map(_bad_type, sig) if r]
            out.append((d.py_func.__qualname__, sig, reasons))
    return out


def run_battery_without_new_specialisations(battery) -> None:
    """Run ``battery()`` twice: the first run may compile what its valid calls need (and
    those signatures must be canonical); the second must compile nothing at all."""
    disps = dispatchers()
    before = signatures(disps)
    battery()
    first = new_signatures(before)
    bad = [x for x in first if x[2]]
    assert not bad, f"odd arguments reached kernels: {bad}"
    again = signatures(disps)
    battery()
    second = new_signatures(again)
    assert not second, f"a repeated battery compiled new specialisations: {second}"
