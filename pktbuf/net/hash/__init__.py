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
