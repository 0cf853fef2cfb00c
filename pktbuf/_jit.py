"""The one place where pktbuf's jit options are set.

Every kernel in the package is declared with :func:`kernel` so the options never drift apart:
``cache=True`` (compiled code is written next to the source and reused by later processes),
``nogil=True`` (kernels called from Python threads run in parallel, and a kernel is callable from
a user's own ``@njit(nogil=True)`` code), ``error_model="numpy"`` (no Python exception machinery
for division), and no bounds checking: kernels validate what they are given where it matters
and return error codes instead of raising.

Kernels never raise.  They return ``0`` (or a count) on success and a negative ``errno``-style code
on failure (see :mod:`pktbuf.errors`).  The facade classes turn codes into exceptions.
"""
from __future__ import annotations

from numba import njit

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy", boundscheck=False)


def kernel(fn=None, *, inline: str = "never"):
    """Decorate a kernel: ``@kernel`` or ``@kernel(inline="always")``.

    ``inline="always"`` is for tiny helpers on the per-packet path (field accessors, the
    refcount fast path); Numba then inlines them at the Numba-IR level into every caller.
    """
    def wrap(f):
        return njit(inline=inline, **_OPTIONS)(f)

    return wrap(fn) if fn is not None else wrap
