"""memif shared-memory layout: ring header and descriptor dtypes, region arithmetic.

Facts from DPDK 22.11 ``net_memif`` on x86_64 (64-byte cache lines); docs/memif.md,
"Shared memory", says where they come from:

* a ring is a 128-byte header followed by ``N = 2**log2`` 16-byte descriptors;
* header: ``cookie`` u32 @0, ``flags`` u16 @4 (bit 0 = MASK_INT), ``head`` u16 @6,
  ``tail`` u16 @64 (its own cache line);
* descriptor: ``flags`` u16 (bit 0 = NEXT), ``region`` u16, ``length`` u32, ``offset`` u32,
  ``metadata`` u32;
* a copy-mode client puts every ring and every buffer in region 0: all C2S rings, then all S2C
  rings, then the buffers, slot ``j`` of ring ``g`` (C2S rings first) at
  ``buffers + (g * N + j) * bsize``.

Kernels reach ring fields through ``uint16``/``uint32`` views of the ring (the word indices
below: ``H16_*`` in the u16 view of the header, ``D_W_*`` in the four u32 words of a
descriptor, found with :func:`desc_word`); Python code uses the structured views
:func:`ring_header_view` and :func:`desc_view`.  Word 3 of a descriptor (``metadata``) is
neither read nor written by pktbuf, as by DPDK.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from .proto import COOKIE

CACHE_LINE = 64
RING_HDR_SIZE = 2 * CACHE_LINE
DESC_SIZE = 16

RING_FLAG_MASK_INT = 0x1
DESC_FLAG_NEXT = 0x1

RING_HDR_DTYPE = np.dtype({
    "names": ["cookie", "flags", "head", "tail"],
    "formats": [np.uint32, np.uint16, np.uint16, np.uint16],
    "offsets": [0, 4, 6, CACHE_LINE],
    "itemsize": RING_HDR_SIZE,
})

DESC_DTYPE = np.dtype({
    "names": ["flags", "region", "length", "offset", "metadata"],
    "formats": [np.uint16, np.uint16, np.uint32, np.uint32, np.uint32],
    "offsets": [0, 2, 4, 8, 12],
    "itemsize": DESC_SIZE,
})

# word indices for kernels: u16 view of the header
H16_FLAGS = 2
H16_HEAD = 3
H16_TAIL = CACHE_LINE // 2
# descriptor words in the u32 view of header + descriptors (4 words per descriptor)
D32_BASE = RING_HDR_SIZE // 4      # first descriptor
DESC_WORDS = DESC_SIZE // 4
D_W_FLAGS_REGION = 0               # flags (low half: u16 index 2 * word) | region << 16
D_W_LENGTH = 1
D_W_OFFSET = 2


@kernel(inline="always")
def desc_word(slot):
    """Index of slot ``slot``'s first descriptor word in the u32 view of the ring; its
    ``flags`` are the u16 at twice that index in the u16 view (little-endian)."""
    return D32_BASE + DESC_WORDS * slot


def ring_bytes(log2_ring_size: int) -> int:
    """Bytes of one ring: header plus ``2**log2`` descriptors."""
    return RING_HDR_SIZE + DESC_SIZE * (1 << log2_ring_size)


def copy_region_layout(n_c2s: int, n_s2c: int, log2_ring_size: int, bsize: int) -> dict:
    """Offsets of a copy-mode client's region 0, exactly as a DPDK client lays it out.

    Returns ``{"ring_size", "rings": [(c2s: bool, index, offset)...], "buffers", "size"}``.
    """
    rs = ring_bytes(log2_ring_size)
    rings = [(True, k, k * rs) for k in range(n_c2s)]
    rings += [(False, k, (n_c2s + k) * rs) for k in range(n_s2c)]
    buffers = (n_c2s + n_s2c) * rs
    n = 1 << log2_ring_size
    return {"ring_size": rs, "rings": rings, "buffers": buffers,
            "size": buffers + bsize * n * (n_c2s + n_s2c)}


def buffer_offset(layout: dict, c2s: bool, index: int, n_c2s: int, log2_ring_size: int,
                  bsize: int) -> int:
    """Offset of slot 0's buffer of a ring in a copy-mode region (slot j adds ``j * bsize``)."""
    g = index if c2s else n_c2s + index
    return layout["buffers"] + g * (1 << log2_ring_size) * bsize


def ring_header_view(region_array: np.ndarray, offset: int) -> np.ndarray:
    """A structured view (shape ``()``) of the ring header at ``offset`` of a region."""
    return region_array[offset:offset + RING_HDR_SIZE].view(RING_HDR_DTYPE)[0]


def desc_view(region_array: np.ndarray, offset: int, log2_ring_size: int) -> np.ndarray:
    """A structured view of the ring's ``2**log2`` descriptors."""
    start = offset + RING_HDR_SIZE
    return region_array[start:start + DESC_SIZE * (1 << log2_ring_size)].view(DESC_DTYPE)


def init_ring(region_array: np.ndarray, offset: int, log2_ring_size: int) -> None:
    """Write a fresh ring: cookie, flags 0, head = tail = 0, descriptors zero."""
    region_array[offset:offset + ring_bytes(log2_ring_size)] = 0
    hdr = ring_header_view(region_array, offset)
    hdr["cookie"] = COOKIE
