"""The table's block: constants (DPDK's ``RTE_HASH_*``), the layout and its sizes, creating
and attaching a table.  The design is in the package docstring."""
from __future__ import annotations

import numpy as np

from ...block import Layout
from ...errors import InvalidArgument


BUCKET_ENTRIES = 8              # RTE_HASH_BUCKET_ENTRIES
ENTRIES_MIN = BUCKET_ENTRIES
ENTRIES_MAX = 1 << 30           # RTE_HASH_ENTRIES_MAX
LOOKUP_BULK_MAX = 64            # RTE_HASH_LOOKUP_BULK_MAX
BFS_QUEUE_MAX_LEN = 1000        # RTE_HASH_BFS_QUEUE_MAX_LEN
KEY_LEN_MAX = 1 << 16           # ours: DPDK's key_len is a uint32 with no stated bound
F_NO_FREE_ON_DEL = 0x10         # RTE_HASH_EXTRA_FLAGS_NO_FREE_ON_DEL
FLAGS_KNOWN = F_NO_FREE_ON_DEL

# meta words
M_ENTRIES, M_KEY_LEN, M_KWORDS, M_STRIDE, M_NB, M_MASK, M_INIT, M_FLAGS, M_RMASK = range(9)
W_HEAD, W_TAIL = 0, 1           # wr words
SEQ_WRITING = np.uint64(1)
SEQ_LIVE = np.uint64(2)
SEQ_GEN = np.uint64(4)
_M32 = 0xFFFFFFFF
_U0 = np.uint64(0)

LAYOUT = Layout("net_hash", [
    ("meta", np.int64, 16),
    ("cnt", np.uint64, 8),
    ("wr", np.int64, 8),
    ("bkt", np.uint32, None, (16,)),
    ("ks", np.uint64, None),
    ("ring", np.uint32, None),
])


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def slot_words(key_len: int) -> int:
    """uint64 words per key-store slot: seq, data, the key; rounded to 16 bytes as DPDK's
    ``align16(8 + key_len)`` slots are."""
    w = 2 + (int(key_len) + 7) // 8
    return w + (w & 1)


def table_counts(entries: int, key_len: int) -> dict:
    """The block's field counts for a table of ``entries`` keys of ``key_len`` bytes
    (``InvalidArgument`` outside ``[8, 2**30]`` / ``[1, 65536]``)."""
    if not ENTRIES_MIN <= int(entries) <= ENTRIES_MAX:
        raise InvalidArgument(f"entries must be in [{ENTRIES_MIN}, {ENTRIES_MAX}], got {entries}")
    if not 1 <= int(key_len) <= KEY_LEN_MAX:
        raise InvalidArgument(f"key_len must be in [1, {KEY_LEN_MAX}], got {key_len}")
    nb = _pow2_at_least(entries) // BUCKET_ENTRIES
    return {"bkt": nb, "ks": (int(entries) + 1) * slot_words(key_len),
            "ring": _pow2_at_least(int(entries) + 1)}
