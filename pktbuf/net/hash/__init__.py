"""Exact-match hash tables with DPDK 22.11 ``rte_hash``'s shape: the CRC32-C hash
(:mod:`.crc`), the bucketized cuckoo table with one writer and lock-free readers
(:mod:`.table`), its pure-Python model (:mod:`.naive`) and the facade :class:`.api.Hash`.
docs/hash.md describes them."""
