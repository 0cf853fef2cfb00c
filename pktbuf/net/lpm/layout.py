"""Block layouts of the LPM tables and their constants (``docs/lpm.md``).

IPv4 (DPDK 22.11 ``lib/lpm/rte_lpm.h``): one 32-bit entry format for tbl24 and tbl8 --
bits 0-23 next hop (or tbl8 group index in a tbl24 pointer), bit 24 ``valid``, bit 25
``valid_group``, bits 26-31 depth.  tbl24 has 2^24 entries at a fixed offset (so a lookup's
first load needs no header read); tbl8 is ``number_tbl8s`` groups of 256.

IPv6 (``lib/lpm/rte_lpm6.h``): bits 0-20 next hop / group index, 21-28 depth, 29 ``valid``,
30 ``valid_group``, 31 ``ext_entry``; tbl24 over address bytes 0-2, then one tbl8 level per
byte.

Both keep their rules in an open-addressing hash (``rules.py``) inside the same block, and
small counters in ``meta`` (word indices ``M_*`` below).  A table is a :class:`~pktbuf.block.Block`,
so it can live in a memfd (``shared=True``) and be mapped by another process.
"""
from __future__ import annotations

import numpy as np

from ...block import Layout

# --- IPv4 ---------------------------------------------------------------------------------
TBL24_ENTRIES = 1 << 24
GROUP_ENTRIES = 256
MAX_DEPTH = 32
MAX_DEPTH_TBL24 = 24
MAX_TBL8_GROUPS = 1 << 24            # RTE_LPM_MAX_TBL8_NUM_GROUPS
NH_MASK = 0x00FFFFFF
VALID = 0x01000000                   # RTE_LPM_LOOKUP_SUCCESS
VALID_GROUP = 0x02000000
VALID_EXT = 0x03000000               # RTE_LPM_VALID_EXT_ENTRY_BITMASK
DEPTH_SHIFT = 26

# meta words (int64), both families
M_MAX_RULES = 0
M_NTBL8 = 1
M_USED_RULES = 2
M_RCAP = 3           # slots of the rule hash
M_TBL8_USED = 4      # groups in use
M_FREE_HINT = 5      # IPv4: first bitmap word that may hold a free group
M_NWORDS = 6         # IPv4: bitmap words
M_DEPTH0 = 8         # meta[M_DEPTH0 + d]: rules of depth d
M_FREE_EPOCH = 56    # IPv4: tbl8 groups freed so far (readers' retry check; own cache line)

LPM4 = Layout("lpm4", [
    ("tbl24", np.uint32, TBL24_ENTRIES),
    ("meta", np.int64, 64),
    ("tbl8", np.uint32, None),       # number_tbl8s * 256
    ("rules", np.uint64, None),      # hash slots: ip | depth << 32 | next_hop << 38; 0 = empty
    ("used8", np.uint64, None),      # bitmap, bit g set = tbl8 group g in use
])

# --- IPv6 ---------------------------------------------------------------------------------
MAX_DEPTH6 = 128
MAX_TBL8_GROUPS6 = 1 << 21           # RTE_LPM6_TBL8_MAX_NUM_GROUPS
NH6_MASK = 0x001FFFFF
DEPTH6_SHIFT = 21
VALID6 = 0x20000000                  # RTE_LPM6_LOOKUP_SUCCESS
VALID_GROUP6 = 0x40000000
EXT6 = 0x80000000
VALID_EXT6 = 0xA0000000              # RTE_LPM6_VALID_EXT_ENTRY_BITMASK
OWNER_TBL24 = -1                     # hdr owner of a group hanging from tbl24
H_OWNER = 0                          # hdr columns
H_ENTRY = 1
H_REF = 2

LPM6 = Layout("lpm6", [
    ("tbl24", np.uint32, TBL24_ENTRIES),
    ("meta", np.int64, 8 + MAX_DEPTH6 + 8),
    ("tbl8", np.uint32, None),       # number_tbl8s * 256
    ("hdr", np.int32, None, (3,)),   # per group: owner group (-1: tbl24), owner entry, ref count
    ("pool", np.int32, None),        # stack of free group indices; meta[M_TBL8_USED] = top
    ("stack", np.int32, None),       # scratch for walking a subtree of groups
    ("rkey", np.uint64, None, (2,)),  # hash slots: address high / low 64 bits (masked)
    ("rval", np.uint32, None),       # depth | next_hop << 8; 0 = empty slot
])


def rule_slots(max_rules: int) -> int:
    """Slots of a rule hash for ``max_rules`` rules: load factor at most 2/3 when full."""
    return int(max_rules) + int(max_rules) // 2 + 1


def create4(max_rules: int, number_tbl8s: int, *, shared: bool = False, name=None):
    """A new, empty IPv4 table block (arguments already validated by the caller)."""
    cap = rule_slots(max_rules)
    nwords = (number_tbl8s + 63) // 64
    blk = LPM4.create({"tbl8": number_tbl8s * GROUP_ENTRIES, "rules": cap, "used8": nwords},
                      shared=shared, name=name or "pktbuf-lpm4")
    m = blk.meta
    m[M_MAX_RULES] = max_rules
    m[M_NTBL8] = number_tbl8s
    m[M_RCAP] = cap
    m[M_NWORDS] = nwords
    return blk


def create6(max_rules: int, number_tbl8s: int, *, shared: bool = False, name=None):
    """A new, empty IPv6 table block (arguments already validated by the caller)."""
    cap = rule_slots(max_rules)
    blk = LPM6.create({"tbl8": number_tbl8s * GROUP_ENTRIES, "hdr": number_tbl8s,
                       "pool": number_tbl8s, "stack": number_tbl8s + 1, "rkey": cap,
                       "rval": cap}, shared=shared, name=name or "pktbuf-lpm6")
    m = blk.meta
    m[M_MAX_RULES] = max_rules
    m[M_NTBL8] = number_tbl8s
    m[M_RCAP] = cap
    blk.pool[:] = np.arange(number_tbl8s, dtype=np.int32)
    return blk


def attach4(mem):
    """The IPv4 table block in ``mem`` (a :class:`~pktbuf.shm.Region` another process made),
    after checking that its header and counters describe a table that fits the memory: the
    bytes are another process's, so nothing in them is trusted.  ``ValueError`` if not."""
    from ...block import HDR_FIELD0
    blk = LPM4.attach(mem)
    hdr = mem.view(np.uint64, 0, HDR_FIELD0 + 2 * len(LPM4.fields))
    m = blk.meta
    mr, nt, cap, nw = int(m[M_MAX_RULES]), int(m[M_NTBL8]), int(m[M_RCAP]), int(m[M_NWORDS])
    if not (1 <= mr < 1 << 32 and 1 <= nt <= MAX_TBL8_GROUPS and cap == rule_slots(mr)
            and nw == (nt + 63) // 64):
        raise ValueError("the table's counters are not those of an IPv4 LPM table")
    places, size = LPM4.place({"tbl8": nt * GROUP_ENTRIES, "rules": cap, "used8": nw})
    got = [(int(hdr[HDR_FIELD0 + 2 * i]), int(hdr[HDR_FIELD0 + 2 * i + 1]))
           for i in range(len(places))]
    if got != places or size > mem.size:
        raise ValueError("the table's header does not match its counters")
    return blk
