"""A bucketized cuckoo hash table with DPDK 22.11 ``rte_hash``'s shape, one writer and
lock-free readers (``lib/hash/rte_cuckoo_hash.{c,h}``, flag ``RW_CONCURRENCY_LF``).

The whole table is one :class:`~pktbuf.block.Block` (``LAYOUT``, kind ``"net_hash"``), private
or in a memfd :class:`~pktbuf.shm.Region` that other processes map; it holds indices only, never
addresses, so every process may map it anywhere.  Fields:

* ``meta`` -- the parameters (entries, key length, bucket mask, slot stride, hash init, flags);
* ``cnt`` -- ``cnt[0]`` is ``tbl_chng_cnt``, bumped before every cuckoo move (readers' retry
  test), alone on its cache line;
* ``wr`` -- the writer's free-ring head and tail;
* ``bkt`` -- ``nb`` buckets of 16 uint32 = one 64-byte line each: words 0..7 the entries'
  16-bit signatures, words 8..15 their key-store slot (0 = empty);
* ``ks`` -- the key store, ``entries + 1`` slots (slot 0 unused) of ``stride`` uint64 words:
  ``[seq, data, key words...]``, the key zero-padded to whole words;
* ``ring`` -- the free slots, a FIFO filled with 1 .. entries (fresh adds get positions
  0, 1, 2, ...; a freed slot comes back after every never-used one).

A key's hash ``h`` (32 bits) gives its signature ``sig = h >> 16``, its primary bucket
``h & mask`` and its secondary bucket ``(primary ^ sig) & mask``.  Positions (what adds,
lookups and deletes return) are slot - 1, in ``[0, entries)``.

Concurrency (docs/hash.md has the argument): one writer at a time calls the ``add``/``del``/
``free``/``reset`` kernels; any number of readers, in any process, call the lookups at the same
time.  The writer publishes a bucket entry by storing its signature, then its slot with release;
readers load the slot with acquire and compare the full key.  A slot's ``seq`` word is a
sequence lock -- bit 0: being written, bit 1: live, bits 2..: generation -- so a reader never
takes the data of a slot that was freed and refilled under it; that is what lets deletes free
slots at once (DPDK needs ``rte_hash_free_key_with_position`` after a grace period, or RCU).
Lookups that miss re-check ``tbl_chng_cnt`` and retry when a cuckoo move ran meanwhile.

Kernels never raise: positions or counts, or negative codes of :mod:`pktbuf.errors`
(``E_NOENT`` miss, ``E_NOSPC`` full, ``E_INVAL`` bad argument).  Bulks take at most
:data:`LOOKUP_BULK_MAX` keys (``RTE_HASH_LOOKUP_BULK_MAX``).  Keys are uint8 arrays: one key a
1-d array of at least ``key_len`` bytes, a bulk a C-contiguous 2-d array of rows.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

from ..._jit import kernel
from ...atomics import fence_acquire, fence_release, load_acquire, load_relaxed, store_release
from ...block import Layout
from ...errors import E_BUSY, E_INVAL, E_NOENT, E_NOSPC, E_OK, InvalidArgument
from ...rawmem import stack_i32
from .crc import hash_crc_at, load_u64_at, load_u8_at, prefetch_at

__all__ = ["LAYOUT", "ENTRIES_MIN", "ENTRIES_MAX", "BUCKET_ENTRIES", "LOOKUP_BULK_MAX",
           "BFS_QUEUE_MAX_LEN", "F_NO_FREE_ON_DEL", "table_counts", "new_table", "attach_table",
           "hash_init", "hash_hash", "hash_add", "hash_add_key", "hash_add_key_with_hash",
           "hash_add_key_data", "hash_add_key_with_hash_data", "hash_lookup",
           "hash_lookup_with_hash", "hash_lookup_data", "hash_lookup_with_hash_data",
           "hash_lookup_bulk", "hash_lookup_with_hash_bulk", "hash_lookup_bulk_data",
           "hash_lookup_with_hash_bulk_data", "hash_del_key", "hash_del_key_with_hash",
           "hash_free_key_with_position", "hash_get_key_with_position", "hash_iterate",
           "hash_reset", "hash_count", "hash_max_key_id", "hash_key_len"]

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


# ---------------------------------------------------------------------------------------------
# small helpers

@intrinsic
def _stack_u64(typingctx, n):
    """A uint64 array of ``n`` (a literal) elements on the kernel's stack, uninitialised."""
    if not isinstance(n, types.IntegerLiteral):
        return None
    count = n.literal_value
    aryty = types.Array(types.uint64, 1, "C")

    def codegen(context, builder, sig, args):
        ptr = cgutils.alloca_once(builder, ir.IntType(64), size=count)
        intp = context.get_value_type(types.intp)
        ary = context.make_array(aryty)(context, builder)
        populate_array(ary, data=ptr, shape=cgutils.pack_array(builder, [ir.Constant(intp, count)]),
                       strides=cgutils.pack_array(builder, [ir.Constant(intp, 8)]),
                       itemsize=ir.Constant(intp, 8), meminfo=None)
        return ary._getvalue()

    return aryty(n), codegen


@kernel(inline="always")
def _key_word(key, koff, key_len, w):
    """Word ``w`` of the key at byte ``koff`` of ``key``, as the key store holds it (the last
    word zero-padded)."""
    nw = key_len >> 3
    if w < nw:
        return load_u64_at(key, koff + 8 * w)
    rem = key_len & 7
    if key_len >= 8:        # the last 8 bytes, shifted: no byte loop
        return load_u64_at(key, koff + key_len - 8) >> np.uint64(8 * (8 - rem))
    t = _U0
    for b in range(rem):
        t |= np.uint64(load_u8_at(key, koff + b)) << np.uint64(8 * b)
    return t


@kernel(inline="always")
def _key_eq(ks, kb, key, koff, key_len):
    """The key at ``ks[kb:]`` equals the one at byte ``koff`` of ``key``."""
    # (byte-offset loads: no negative-index fix-up on the hot path)
    nw = key_len >> 3
    for w in range(nw):
        if load_u64_at(ks, 8 * (kb + w)) != load_u64_at(key, koff + 8 * w):
            return False
    if key_len & 7:
        return load_u64_at(ks, 8 * (kb + nw)) == _key_word(key, koff, key_len, nw)
    return True


@kernel(inline="always")
def _read_slot(ks, idx, stride, key, koff, key_len):
    """Reader: (True, data) when slot ``idx`` holds this key, live and unchanged while read
    (the sequence check); (False, 0) otherwise -- including a slot rewritten under us, whose
    old key was therefore deleted and whose new key is not linked yet."""
    base = idx * stride
    v1 = load_acquire(ks, base)
    if (v1 & (SEQ_WRITING | SEQ_LIVE)) != SEQ_LIVE:
        return False, _U0
    if not _key_eq(ks, base + 2, key, koff, key_len):
        return False, _U0
    d = load_acquire(ks, base + 1)
    fence_acquire()
    if load_relaxed(ks, base) != v1:
        return False, _U0
    return True, d


@intrinsic
def _sig_mask(typingctx, bkt, b, sig):
    """Bit e set where entry e of bucket ``b`` has signature ``sig``: the 8 signature words
    of the bucket's line loaded as one vector and compared at once (``rte_hash``'s SSE
    ``compare_signatures``).  A plain load: a signature is only a hint, the slot word (loaded
    with acquire) and the full key decide."""
    if not (isinstance(bkt, types.Array) and isinstance(b, types.Integer)
            and isinstance(sig, types.Integer)):
        return None

    def codegen(context, builder, sg, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        a = context.make_array(sg.args[0])(context, builder, args[0])
        bi = context.cast(builder, args[1], sg.args[1], types.int64)
        p = builder.gep(builder.bitcast(a.data, ir.IntType(8).as_pointer()),
                        [builder.mul(bi, ir.Constant(i64, 64))])
        vty = ir.VectorType(i32, BUCKET_ENTRIES)
        v = builder.load(builder.bitcast(p, vty.as_pointer()), align=64)
        s = builder.trunc(context.cast(builder, args[2], sg.args[2], types.int64), i32)
        splat = builder.insert_element(ir.Constant(vty, ir.Undefined), s, ir.Constant(i32, 0))
        splat = builder.shuffle_vector(splat, ir.Constant(vty, ir.Undefined),
                                       ir.Constant(vty, [0] * BUCKET_ENTRIES))
        eq = builder.icmp_unsigned("==", v, splat)
        return builder.zext(builder.bitcast(eq, ir.IntType(BUCKET_ENTRIES)), i64)

    return types.int64(bkt, b, sig), codegen


@kernel(inline="always")
def _search_bucket(bkt, ks, b, m, stride, key, koff, key_len):
    """Reader: the slot of the key among the entries ``m`` of bucket ``b`` (0: none), data."""
    while m:
        e = trailing_zeros(m)
        m &= m - 1
        idx = np.int64(load_acquire(bkt, (b, BUCKET_ENTRIES + e)))
        if idx != 0:
            ok, d = _read_slot(ks, idx, stride, key, koff, key_len)
            if ok:
                return idx, d
    return 0, _U0


@kernel
def _lookup_lf(blk, key, koff, h):
    """Reader: (slot or 0, data) of the key with hash ``h``: both buckets, then the change
    counter -- a miss stands only if no cuckoo move ran during the search."""
    meta = blk.meta
    bkt = blk.bkt
    ks = blk.ks
    cnt = blk.cnt
    mask = meta[M_MASK]
    stride = meta[M_STRIDE]
    key_len = meta[M_KEY_LEN]
    h &= _M32
    sig = h >> 16
    prim = h & mask
    sec = (prim ^ sig) & mask
    # the secondary line is fetched while the primary is searched: a miss (and a key that
    # lives in its secondary bucket) then costs one memory latency, not two in a row
    prefetch_at(bkt, sec * 64)
    while True:
        cb = load_acquire(cnt, 0)
        idx, d = _search_bucket(bkt, ks, prim, _sig_mask(bkt, prim, sig), stride, key, koff,
                                key_len)
        if idx:
            return idx, d
        idx, d = _search_bucket(bkt, ks, sec, _sig_mask(bkt, sec, sig), stride, key, koff,
                                key_len)
        if idx:
            return idx, d
        fence_acquire()
        if load_acquire(cnt, 0) == cb:
            return 0, _U0


@kernel(inline="always")
def _find_w(bkt, ks, b, sig, stride, key, koff, key_len):
    """Writer: the entry of bucket ``b`` holding the key (-1: none).  Only the writer changes
    the table, so it reads without sequence checks."""
    for e in range(BUCKET_ENTRIES):
        idx = np.int64(bkt[b, BUCKET_ENTRIES + e])
        if idx != 0 and bkt[b, e] == sig and _key_eq(ks, idx * stride + 2, key, koff, key_len):
            return e
    return -1


@kernel(inline="always")
def _bump(cnt):
    """``tbl_chng_cnt`` + 1 with release, then a release fence: the move's stores that follow
    are not seen before the new count."""
    store_release(cnt, 0, cnt[0] + np.uint64(1))
    fence_release()


@kernel(inline="always")
def _key_ok(blk, key):
    return key.ndim == 1 and key.size >= blk.meta[M_KEY_LEN]


# ---------------------------------------------------------------------------------------------
# creation

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
# lookup

@kernel
def hash_lookup_with_hash(blk, key, h):
    """``rte_hash_lookup_with_hash``: the key's position or ``E_NOENT``; ``E_INVAL`` for a bad
    key.  Safe while the writer adds and deletes (lock-free)."""
    if not _key_ok(blk, key):
        return E_INVAL
    idx, _ = _lookup_lf(blk, key, 0, h)
    return idx - 1 if idx else E_NOENT


@kernel
def hash_lookup(blk, key):
    """``rte_hash_lookup``: :func:`hash_lookup_with_hash` with the table's hash."""
    if not _key_ok(blk, key):
        return E_INVAL
    h = hash_crc_at(key, 0, blk.meta[M_KEY_LEN], blk.meta[M_INIT])
    idx, _ = _lookup_lf(blk, key, 0, h)
    return idx - 1 if idx else E_NOENT


@kernel
def hash_lookup_with_hash_data(blk, key, h):
    """``rte_hash_lookup_with_hash_data``: ``(position, data)``, or ``(E_NOENT, 0)`` /
    ``(E_INVAL, 0)``."""
    if not _key_ok(blk, key):
        return E_INVAL, _U0
    idx, d = _lookup_lf(blk, key, 0, h)
    return (idx - 1, d) if idx else (E_NOENT, _U0)


@kernel
def hash_lookup_data(blk, key):
    """``rte_hash_lookup_data``: :func:`hash_lookup_with_hash_data` with the table's hash."""
    if not _key_ok(blk, key):
        return E_INVAL, _U0
    h = hash_crc_at(key, 0, blk.meta[M_KEY_LEN], blk.meta[M_INIT])
    idx, d = _lookup_lf(blk, key, 0, h)
    return (idx - 1, d) if idx else (E_NOENT, _U0)


@kernel(inline="always")
def _bulk_ok(blk, keys, n):
    return (keys.ndim == 2 and 0 <= n <= LOOKUP_BULK_MAX and n <= keys.shape[0]
            and keys.shape[1] >= blk.meta[M_KEY_LEN] and keys.strides[1] == 1)


@kernel(inline="always")
def _bulk_buckets(blk, keys, n, hs, prim, sec, compute):
    """Pass 1 of a bulk: each key's hash (computed when ``compute``, else taken from ``hs``),
    both its buckets, and a prefetch of both lines as soon as they are known -- so the first
    keys' lines are on their way while later keys are hashed."""
    meta = blk.meta
    bkt = blk.bkt
    mask = meta[M_MASK]
    key_len = meta[M_KEY_LEN]
    init = meta[M_INIT]
    rs = keys.strides[0]
    for i in range(n):
        if compute:
            h = hash_crc_at(keys, i * rs, key_len, init)
            hs[i] = h
        else:
            h = np.int64(hs[i]) & _M32
        p = h & mask
        s = (p ^ (h >> 16)) & mask
        prim[i] = p
        sec[i] = s
        prefetch_at(bkt, p * 64)
        prefetch_at(bkt, s * 64)


@kernel
def _bulk(blk, keys, hs, prim, sec, n, pos, data):
    """Passes 2 and 3 of the bulk lookup of ``__bulk_lookup_lf`` (pass 1:
    :func:`_bulk_buckets`): (2) signature masks of both buckets, the first candidate's key
    slot prefetched; (3) full key compares.  Keys that missed while ``tbl_chng_cnt`` moved
    are looked up again one by one.  ``pos[i]`` = position or ``E_NOENT``, ``data[i]`` set
    for hits.  Returns ``(hits, hit_mask)``."""
    meta = blk.meta
    bkt = blk.bkt
    ks = blk.ks
    cnt = blk.cnt
    stride = meta[M_STRIDE]
    key_len = meta[M_KEY_LEN]
    rs = keys.strides[0]
    pm = stack_i32(64)
    sm = stack_i32(64)
    cb = load_acquire(cnt, 0)
    for i in range(n):
        sig = (np.int64(hs[i]) & _M32) >> 16
        p = np.int64(prim[i])
        s = np.int64(sec[i])
        a = _sig_mask(bkt, p, sig)
        b = _sig_mask(bkt, s, sig)
        pm[i] = a
        sm[i] = b
        if a:
            prefetch_at(ks, np.int64(bkt[p, BUCKET_ENTRIES + trailing_zeros(a)]) * stride * 8)
        elif b:
            prefetch_at(ks, np.int64(bkt[s, BUCKET_ENTRIES + trailing_zeros(b)]) * stride * 8)
    hits = 0
    hm = _U0
    for i in range(n):
        koff = i * rs
        idx = 0
        d = _U0
        if pm[i]:
            idx, d = _search_bucket(bkt, ks, np.int64(prim[i]), np.int64(pm[i]), stride, keys,
                                    koff, key_len)
        if idx == 0 and sm[i]:
            idx, d = _search_bucket(bkt, ks, np.int64(sec[i]), np.int64(sm[i]), stride, keys,
                                    koff, key_len)
        if idx:
            pos[i] = idx - 1
            data[i] = d
            hits += 1
            hm |= np.uint64(1) << np.uint64(i)
        else:
            pos[i] = E_NOENT
    if hits < n:
        fence_acquire()
        if load_acquire(cnt, 0) != cb:
            for i in range(n):
                if pos[i] < 0:
                    idx, d = _lookup_lf(blk, keys, i * rs, np.int64(hs[i]) & _M32)
                    if idx:
                        pos[i] = idx - 1
                        data[i] = d
                        hits += 1
                        hm |= np.uint64(1) << np.uint64(i)
    return hits, hm


@kernel
def hash_lookup_bulk(blk, keys, n, positions):
    """``rte_hash_lookup_bulk``: ``positions[i]`` (int32) = position of ``keys[i]`` or
    ``E_NOENT``, for ``i < n``.  0, or ``E_INVAL`` (nothing written) when ``n`` is outside
    ``[0, 64]`` or beyond ``keys``' rows or ``positions``, or the rows are shorter than
    ``key_len``."""
    if not _bulk_ok(blk, keys, n) or positions.size < n:
        return E_INVAL
    hs = stack_i32(64)
    prim = stack_i32(64)
    sec = stack_i32(64)
    _bulk_buckets(blk, keys, n, hs, prim, sec, True)
    _bulk(blk, keys, hs, prim, sec, n, positions, _stack_u64(64))
    return E_OK


@kernel
def hash_lookup_with_hash_bulk(blk, keys, hashes, n, positions):
    """``rte_hash_lookup_with_hash_bulk``: :func:`hash_lookup_bulk` with the hashes given
    (``hashes[i]``, low 32 bits, for ``keys[i]``)."""
    if not _bulk_ok(blk, keys, n) or positions.size < n or hashes.size < n:
        return E_INVAL
    hs = stack_i32(64)
    prim = stack_i32(64)
    sec = stack_i32(64)
    for i in range(n):
        hs[i] = np.int64(hashes[i]) & _M32
    _bulk_buckets(blk, keys, n, hs, prim, sec, False)
    _bulk(blk, keys, hs, prim, sec, n, positions, _stack_u64(64))
    return E_OK


@kernel
def hash_lookup_bulk_data(blk, keys, n, hit_mask, data):
    """``rte_hash_lookup_bulk_data``: the number of hits among ``keys[:n]``; bit i of
    ``hit_mask[0]`` (uint64) set and ``data[i]`` (uint64) written for each hit (misses leave
    ``data[i]`` alone).  ``E_INVAL`` as :func:`hash_lookup_bulk`, or when ``hit_mask`` is
    empty or ``data`` shorter than ``n``."""
    if not _bulk_ok(blk, keys, n) or hit_mask.size < 1 or data.size < n:
        return E_INVAL
    hs = stack_i32(64)
    prim = stack_i32(64)
    sec = stack_i32(64)
    _bulk_buckets(blk, keys, n, hs, prim, sec, True)
    d = _stack_u64(64)
    hits, hm = _bulk(blk, keys, hs, prim, sec, n, stack_i32(64), d)
    m = hm
    while m:
        i = trailing_zeros(m)
        m &= m - np.uint64(1)
        data[i] = d[i]
    hit_mask[0] = hm
    return hits


@kernel
def hash_lookup_with_hash_bulk_data(blk, keys, hashes, n, hit_mask, data):
    """``rte_hash_lookup_with_hash_bulk_data``: :func:`hash_lookup_bulk_data` with the hashes
    given."""
    if not _bulk_ok(blk, keys, n) or hit_mask.size < 1 or data.size < n or hashes.size < n:
        return E_INVAL
    hs = stack_i32(64)
    prim = stack_i32(64)
    sec = stack_i32(64)
    for i in range(n):
        hs[i] = np.int64(hashes[i]) & _M32
    _bulk_buckets(blk, keys, n, hs, prim, sec, False)
    d = _stack_u64(64)
    hits, hm = _bulk(blk, keys, hs, prim, sec, n, stack_i32(64), d)
    m = hm
    while m:
        i = trailing_zeros(m)
        m &= m - np.uint64(1)
        data[i] = d[i]
    hit_mask[0] = hm
    return hits


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


@kernel(inline="always")
def _copy_key_out(blk, idx, key_out):
    meta = blk.meta
    ks = blk.ks
    kb = idx * meta[M_STRIDE] + 2
    for i in range(meta[M_KEY_LEN]):
        key_out[i] = np.uint8((ks[kb + (i >> 3)] >> np.uint64(8 * (i & 7))) & np.uint64(0xFF))


@kernel
def hash_get_key_with_position(blk, position, key_out):
    """``rte_hash_get_key_with_position``: copy the key at ``position`` into ``key_out``
    (uint8, ``key_len`` bytes or more).  0; ``E_NOENT`` when no key of the table is there;
    ``E_INVAL`` for a position outside ``[0, entries)`` or a short ``key_out``."""
    meta = blk.meta
    if position < 0 or position >= meta[M_ENTRIES] or key_out.size < meta[M_KEY_LEN]:
        return E_INVAL
    idx = position + 1
    if not blk.ks[idx * meta[M_STRIDE]] & SEQ_LIVE or not _slot_key_linked(blk, idx):
        return E_NOENT
    _copy_key_out(blk, idx, key_out)
    return E_OK


@kernel
def hash_iterate(blk, state, key_out):
    """``rte_hash_iterate``: the next key in bucket order from ``state[0]`` (int64, start at 0;
    advanced past the entry returned): ``(position, data)`` with the key copied into
    ``key_out``; ``(E_NOENT, 0)`` at the end; ``(E_INVAL, 0)`` for a short ``key_out`` or a
    negative state.  Writer side (or no writer): not a consistent snapshot under changes."""
    meta = blk.meta
    bkt = blk.bkt
    if key_out.size < meta[M_KEY_LEN] or state.size < 1 or state[0] < 0:
        return E_INVAL, _U0
    total = meta[M_NB] * BUCKET_ENTRIES
    i = np.int64(state[0])
    while i < total:
        idx = np.int64(load_acquire(bkt, (i >> 3, BUCKET_ENTRIES + (i & 7))))
        i += 1
        if idx:
            state[0] = i
            _copy_key_out(blk, idx, key_out)
            return idx - 1, load_acquire(blk.ks, idx * meta[M_STRIDE] + 1)
    state[0] = total
    return E_NOENT, _U0


@kernel
def hash_count(blk):
    """``rte_hash_count``: keys in the table (with ``F_NO_FREE_ON_DEL``, deleted keys whose
    slot is not yet freed count too, as in DPDK)."""
    wr = blk.wr
    return blk.meta[M_ENTRIES] - (load_relaxed(wr, W_TAIL) - load_relaxed(wr, W_HEAD))


@kernel
def hash_max_key_id(blk):
    """``rte_hash_max_key_id``: the largest position + 1 (= entries, one writer)."""
    return blk.meta[M_ENTRIES]


@kernel
def hash_key_len(blk):
    """The table's key length in bytes."""
    return blk.meta[M_KEY_LEN]
