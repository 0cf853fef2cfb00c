"""The one copy both directions make per segment: record bytes <-> mbuf data."""
from __future__ import annotations

from ..._jit import kernel
from ...rawmem import copy_in_bounds

SHORT = 64          # copies up to this size may become one fixed-size copy


@kernel(inline="always")
def copy_seg(dst, dst_base, dst_size, src, src_base, src_size, n):
    """Copy ``n`` bytes from ``src`` to ``dst``, which lie in the buffers ``[*_base, *_base +
    *_size)``.  When ``n <= SHORT`` and both buffers hold SHORT bytes from ``src``/``dst``, copy
    exactly SHORT bytes: LLVM then emits a few vector moves instead of a call to libc's memcpy
    (the call dominates the cost of a 64-byte frame).  The extra bytes stay inside both buffers
    and land beyond ``n`` at the destination, where nothing reads them: in an mbuf past
    ``data_len``; in the Tx buffer where the next record (or nothing yet) goes -- the caller
    writes what follows afterwards."""
    if n <= SHORT and dst + SHORT <= dst_base + dst_size and src + SHORT <= src_base + src_size:
        copy_in_bounds(dst, dst_base, dst_size, src, src_base, src_size, SHORT)
    else:
        copy_in_bounds(dst, dst_base, dst_size, src, src_base, src_size, n)
