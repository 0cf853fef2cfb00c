"""The writer's side (one at a time): init and reset, add with the cuckoo search for room
(``__rte_hash_add_key_with_hash``, ``rte_hash_cuckoo_make_space_mw``), delete and free."""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import fence_release, store_release
from ...errors import E_BUSY, E_INVAL, E_NOENT, E_NOSPC, E_OK, InvalidArgument
from ...rawmem import stack_i32
from .access import _bump, _find_w, _key_ok, _key_word
from .crc import hash_crc_at
from .layout import (_M32, BFS_QUEUE_MAX_LEN, BUCKET_ENTRIES, ENTRIES_MIN, F_NO_FREE_ON_DEL,
                     FLAGS_KNOWN, LAYOUT, M_ENTRIES, M_FLAGS, M_INIT, M_KEY_LEN, M_KWORDS, M_MASK,
                     M_NB, M_RMASK, M_STRIDE, SEQ_GEN, SEQ_LIVE, SEQ_WRITING, W_HEAD, W_TAIL,
                     table_counts)

# ---------------------------------------------------------------------------------------------
# creation

def new_table(entries: int, key_len: int, init_val: int = 0, flags: int = 0, *,
              shared: bool = False, name: str | None = None):
    """A new empty table block (in a memfd region with ``shared=True``)."""
    blk = LAYOUT.create(table_counts(entries, key_len), shared=shared,
                        name=name or "pktbuf-hash")
    rc = hash_init(blk, int(entries), int(key_len), int(init_val) & _M32, int(flags))
    if rc < 0:
        raise InvalidArgument(f"hash_init failed ({rc})")
    return blk
def attach_table(memory):
    """The table block over ``memory`` (a :class:`~pktbuf.shm.Region` another process made:
    ``Region.attach(fd, size)``)."""
    return LAYOUT.attach(memory)


@kernel
def hash_init(blk, entries, key_len, init_val, flags):
    """Set up a zeroed block made with :func:`table_counts` ``(entries, key_len)``: 0, or
    ``E_INVAL`` when the block's sizes do not fit or ``flags`` has unknown bits."""
    nb = blk.bkt.shape[0]
    if (entries < ENTRIES_MIN or key_len < 1 or nb < 1 or (nb & (nb - 1)) != 0
            or flags & ~FLAGS_KNOWN):
        return E_INVAL
    kw = (key_len + 7) >> 3
    stride = 2 + kw
    stride += stride & 1
    rs = blk.ring.shape[0]
    if nb * BUCKET_ENTRIES < entries // 2 or blk.ks.size < (entries + 1) * stride \
            or rs < entries + 1 or (rs & (rs - 1)) != 0:
        return E_INVAL
    meta = blk.meta
    meta[M_ENTRIES] = entries
    meta[M_KEY_LEN] = key_len
    meta[M_KWORDS] = kw
    meta[M_STRIDE] = stride
    meta[M_NB] = nb
    meta[M_MASK] = nb - 1
    meta[M_INIT] = init_val & _M32
    meta[M_FLAGS] = flags
    meta[M_RMASK] = rs - 1
    return hash_reset(blk)


@kernel
def hash_reset(blk):
    """``rte_hash_reset``: empty the table (every slot free, positions from 0 again).  Not
    for use while readers run: a lookup during a reset may miss keys it would have found.
    Returns 0."""
    meta = blk.meta
    bkt = blk.bkt
    ks = blk.ks
    ring = blk.ring
    wr = blk.wr
    _bump(blk.cnt)
    for b in range(bkt.shape[0]):
        for j in range(2 * BUCKET_ENTRIES):
            store_release(bkt, (b, j), 0)
    entries = meta[M_ENTRIES]
    stride = meta[M_STRIDE]
    for s in range(1, entries + 1):
        v = ks[s * stride]
        if v & SEQ_LIVE:       # unlink the content: a reader inside it sees the change
            store_release(ks, s * stride, (v & ~(SEQ_WRITING | SEQ_LIVE)) + SEQ_GEN)
    for i in range(entries):
        ring[i] = i + 1
    wr[W_HEAD] = 0
    wr[W_TAIL] = entries
    return E_OK


# ---------------------------------------------------------------------------------------------
# add

@kernel(inline="always")
def _take_slot(blk):
    wr = blk.wr
    head = wr[W_HEAD]
    if head == wr[W_TAIL]:
        return 0
    wr[W_HEAD] = head + 1
    return np.int64(blk.ring[head & blk.meta[M_RMASK]])


@kernel(inline="always")
def _put_slot(blk, slot):
    wr = blk.wr
    tail = wr[W_TAIL]
    blk.ring[tail & blk.meta[M_RMASK]] = slot
    wr[W_TAIL] = tail + 1


@kernel
def _move_insert(blk, qb, qprev, qslot, node, leaf_e, sig, slot):
    """Shift the entries along the BFS path ending at ``node`` (whose entry ``leaf_e`` is
    empty) one step towards the leaf, leaf first, then put (sig, slot) in the root's freed
    entry.  Each step copies an entry into its alternative bucket before the old place is
    overwritten, so a moved key is in one of its buckets at every moment; readers that could
    miss it mid-way see ``tbl_chng_cnt`` move and retry."""
    bkt = blk.bkt
    cnt = blk.cnt
    cb = np.int64(qb[node])
    ce = leaf_e
    while qprev[node] >= 0:
        pn = np.int64(qprev[node])
        pb = np.int64(qb[pn])
        pe = np.int64(qslot[node])
        _bump(cnt)
        bkt[cb, ce] = bkt[pb, pe]
        store_release(bkt, (cb, BUCKET_ENTRIES + ce), bkt[pb, BUCKET_ENTRIES + pe])
        cb, ce, node = pb, pe, pn
    _bump(cnt)
    bkt[cb, ce] = sig
    store_release(bkt, (cb, BUCKET_ENTRIES + ce), slot)
    return E_OK


@kernel
def _make_space(blk, root, sig, slot):
    """Breadth-first search from bucket ``root`` for a bucket with an empty entry, through
    the alternative buckets of each entry (``rte_hash_cuckoo_make_space_mw``): a queue of at
    most 1000 nodes, no expansion once it holds 992 -- paths of at most 3 moves.  On success
    the path is shifted and the new entry lands in ``root``: 0; else ``E_NOSPC``."""
    bkt = blk.bkt
    mask = blk.meta[M_MASK]
    qb = stack_i32(1000)
    qprev = stack_i32(1000)
    qslot = stack_i32(1000)
    qb[0] = root
    qprev[0] = -1
    qslot[0] = -1
    tail = 0
    head = 1
    while tail != head and head < BFS_QUEUE_MAX_LEN - BUCKET_ENTRIES:
        node = tail
        b = np.int64(qb[node])
        tail += 1
        for e in range(BUCKET_ENTRIES):
            if bkt[b, BUCKET_ENTRIES + e] == 0:
                return _move_insert(blk, qb, qprev, qslot, node, e, sig, slot)
        for e in range(BUCKET_ENTRIES):
            qb[head] = (b ^ np.int64(bkt[b, e])) & mask
            qprev[head] = node
            qslot[head] = e
            head += 1
    return E_NOSPC


@kernel
def _add(blk, key, koff, h, data):
    """``__rte_hash_add_key_with_hash``: the position of the key (its data replaced when it
    was present), or ``E_NOSPC``."""
    meta = blk.meta
    bkt = blk.bkt
    ks = blk.ks
    mask = meta[M_MASK]
    stride = meta[M_STRIDE]
    key_len = meta[M_KEY_LEN]
    h &= _M32
    sig = h >> 16
    prim = h & mask
    sec = (prim ^ sig) & mask
    data = np.uint64(data)
    # 1. present already: new data (one atomic store: readers see the old or the new)
    for b in (prim, sec):
        e = _find_w(bkt, ks, b, sig, stride, key, koff, key_len)
        if e >= 0:
            idx = np.int64(bkt[b, BUCKET_ENTRIES + e])
            store_release(ks, idx * stride + 1, data)
            return idx - 1
    # 2. a free slot, filled under its sequence lock (it may be a freed slot a reader is in)
    slot = _take_slot(blk)
    if slot == 0:
        return E_NOSPC
    base = slot * stride
    gen = (ks[base] & ~(SEQ_WRITING | SEQ_LIVE)) + SEQ_GEN
    store_release(ks, base, gen | SEQ_WRITING)
    fence_release()
    ks[base + 1] = data
    for w in range(meta[M_KWORDS]):
        ks[base + 2 + w] = _key_word(key, koff, key_len, w)
    store_release(ks, base, gen | SEQ_LIVE)
    # 3. the first empty entry of the primary bucket: sig first, the slot (release) guards it
    for e in range(BUCKET_ENTRIES):
        if bkt[prim, BUCKET_ENTRIES + e] == 0:
            bkt[prim, e] = sig
            store_release(bkt, (prim, BUCKET_ENTRIES + e), slot)
            return slot - 1
    # 4. cuckoo: make room from the primary bucket, then from the secondary one
    if _make_space(blk, prim, sig, slot) == 0 or _make_space(blk, sec, sig, slot) == 0:
        return slot - 1
    # 5. no room: the slot goes back (to the ring's tail, as DPDK's enqueue_slot_back)
    store_release(ks, base, gen + SEQ_GEN)
    _put_slot(blk, slot)
    return E_NOSPC


@kernel
def hash_add(blk, key, h, data):
    """pktbuf's own: add ``key`` with hash ``h`` and ``data`` and return its *position* (the
    call ``rte_hash_add_key_with_hash_data`` would be if it returned what
    ``rte_hash_add_key_with_hash`` does); ``E_NOSPC``, ``E_INVAL`` as the others."""
    if not _key_ok(blk, key):
        return E_INVAL
    return _add(blk, key, 0, h, data)


@kernel
def hash_hash(blk, key):
    """``rte_hash_hash``: the table's hash of ``key`` (CRC32-C with its init value), or
    ``E_INVAL`` when ``key`` is not a 1-d array of ``key_len`` bytes or more."""
    if not _key_ok(blk, key):
        return E_INVAL
    return hash_crc_at(key, 0, blk.meta[M_KEY_LEN], blk.meta[M_INIT])


@kernel
def hash_add_key_with_hash(blk, key, h):
    """``rte_hash_add_key_with_hash``: add ``key`` with hash ``h`` (its low 32 bits) and data 0
    (re-adding a present key clears its data, as in DPDK).  Its position, ``E_NOSPC`` when no
    slot or no bucket entry is left (the table unchanged), ``E_INVAL`` for a bad key."""
    if not _key_ok(blk, key):
        return E_INVAL
    return _add(blk, key, 0, h, 0)


@kernel
def hash_add_key(blk, key):
    """``rte_hash_add_key``: :func:`hash_add_key_with_hash` with the table's hash."""
    if not _key_ok(blk, key):
        return E_INVAL
    return _add(blk, key, 0, hash_crc_at(key, 0, blk.meta[M_KEY_LEN], blk.meta[M_INIT]), 0)


@kernel
def hash_add_key_with_hash_data(blk, key, h, data):
    """``rte_hash_add_key_with_hash_data``: add ``key`` with hash ``h`` and ``data`` (uint64),
    or replace the data of a present key.  **0** on success (not the position, as DPDK),
    ``E_NOSPC``, ``E_INVAL``."""
    if not _key_ok(blk, key):
        return E_INVAL
    rc = _add(blk, key, 0, h, data)
    return rc if rc < 0 else E_OK


@kernel
def hash_add_key_data(blk, key, data):
    """``rte_hash_add_key_data``: :func:`hash_add_key_with_hash_data` with the table's hash."""
    if not _key_ok(blk, key):
        return E_INVAL
    rc = _add(blk, key, 0, hash_crc_at(key, 0, blk.meta[M_KEY_LEN], blk.meta[M_INIT]), data)
    return rc if rc < 0 else E_OK


# ---------------------------------------------------------------------------------------------
# delete, free, iterate

@kernel
def _del(blk, key, h):
    meta = blk.meta
    bkt = blk.bkt
    ks = blk.ks
    mask = meta[M_MASK]
    stride = meta[M_STRIDE]
    key_len = meta[M_KEY_LEN]
    h &= _M32
    sig = h >> 16
    prim = h & mask
    sec = (prim ^ sig) & mask
    for b in (prim, sec):
        e = _find_w(bkt, ks, b, sig, stride, key, 0, key_len)
        if e >= 0:
            idx = np.int64(bkt[b, BUCKET_ENTRIES + e])
            # unlink: the slot word is the guard readers acquire
            store_release(bkt, (b, BUCKET_ENTRIES + e), 0)
            bkt[b, e] = 0
            if not meta[M_FLAGS] & F_NO_FREE_ON_DEL:
                _free_slot(blk, idx)
            return idx - 1
    return E_NOENT


@kernel(inline="always")
def _free_slot(blk, idx):
    """Clear the slot's live bit (a reader inside it sees the sequence word change and drops
    it) and queue it at the ring's tail."""
    ks = blk.ks
    base = idx * blk.meta[M_STRIDE]
    store_release(ks, base, ks[base] & ~SEQ_LIVE)
    _put_slot(blk, idx)


@kernel
def hash_del_key_with_hash(blk, key, h):
    """``rte_hash_del_key_with_hash``: remove the key; its former position, ``E_NOENT`` when
    absent, ``E_INVAL`` for a bad key.  Its slot is free again at once (reused only after every
    other free slot; readers still inside it see its sequence word change), unless the table
    has ``F_NO_FREE_ON_DEL``: then :func:`hash_free_key_with_position` frees it."""
    if not _key_ok(blk, key):
        return E_INVAL
    return _del(blk, key, h)


@kernel
def hash_del_key(blk, key):
    """``rte_hash_del_key``: :func:`hash_del_key_with_hash` with the table's hash."""
    if not _key_ok(blk, key):
        return E_INVAL
    return _del(blk, key, hash_crc_at(key, 0, blk.meta[M_KEY_LEN], blk.meta[M_INIT]))


@kernel(inline="always")
def _slot_key_linked(blk, idx):
    """The key held in slot ``idx`` is in the table at this slot (writer side)."""
    meta = blk.meta
    ks = blk.ks
    stride = meta[M_STRIDE]
    key_len = meta[M_KEY_LEN]
    # the slot's own key bytes, hashed where they lie
    kb = (idx * stride + 2) * 8
    h = hash_crc_at(ks, kb, key_len, meta[M_INIT])
    return _linked_at(blk, idx, h)


@kernel
def _linked_at(blk, idx, h):
    bkt = blk.bkt
    mask = blk.meta[M_MASK]
    # a user hash function may have put the key anywhere: scan both buckets of the CRC hash
    # first, then every bucket (rare: free/get of a position)
    prim = h & mask
    sec = (prim ^ (h >> 16)) & mask
    for b in (prim, sec):
        for e in range(BUCKET_ENTRIES):
            if np.int64(bkt[b, BUCKET_ENTRIES + e]) == idx:
                return True
    for b in range(bkt.shape[0]):
        for e in range(BUCKET_ENTRIES):
            if np.int64(bkt[b, BUCKET_ENTRIES + e]) == idx:
                return True
    return False


@kernel
def hash_free_key_with_position(blk, position):
    """``rte_hash_free_key_with_position``: free the slot of a key deleted from a table with
    ``F_NO_FREE_ON_DEL`` (the caller knows no reader still holds it -- here the sequence word
    makes that unnecessary, the flag exists for DPDK's call shape).  0; ``E_INVAL`` for a
    position outside ``[0, entries)`` or a slot that is free already; ``E_BUSY`` when its key
    is still in the table."""
    meta = blk.meta
    if position < 0 or position >= meta[M_ENTRIES]:
        return E_INVAL
    idx = position + 1
    if not blk.ks[idx * meta[M_STRIDE]] & SEQ_LIVE:
        return E_INVAL
    if _slot_key_linked(blk, idx):
        return E_BUSY
    _free_slot(blk, idx)
    return E_OK
