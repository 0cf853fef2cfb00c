"""The table's kernels and constants in one namespace (``from pktbuf.net.hash import table as T``;
``pktbuf.kernels`` re-exports the verbs).  They live in :mod:`.layout` (constants, sizes),
:mod:`.access` (what the verbs share), :mod:`.write` (create, add, delete: the one writer),
:mod:`.lookup` (the readers) and :mod:`.iterate`; the design is in the package docstring."""
from __future__ import annotations

from .layout import (BFS_QUEUE_MAX_LEN, BUCKET_ENTRIES, ENTRIES_MAX, ENTRIES_MIN,  # noqa: F401
                     FLAGS_KNOWN, F_NO_FREE_ON_DEL, KEY_LEN_MAX, LAYOUT, LOOKUP_BULK_MAX,
                     M_ENTRIES, M_FLAGS, M_INIT, M_KEY_LEN, M_KWORDS, M_MASK, M_NB,
                     M_RMASK, M_STRIDE, SEQ_GEN, SEQ_LIVE, SEQ_WRITING, W_HEAD, W_TAIL,
                     slot_words, table_counts)
from .write import (attach_table, hash_add, hash_add_key, hash_add_key_data,  # noqa: F401
                    hash_add_key_with_hash, hash_add_key_with_hash_data, hash_del_key,
                    hash_del_key_with_hash, hash_free_key_with_position, hash_hash,
                    hash_init, hash_reset, new_table)
from .lookup import (hash_lookup, hash_lookup_bulk, hash_lookup_bulk_data,  # noqa: F401
                     hash_lookup_data, hash_lookup_with_hash, hash_lookup_with_hash_bulk,
                     hash_lookup_with_hash_bulk_data, hash_lookup_with_hash_data)
from .iterate import (hash_count, hash_get_key_with_position, hash_iterate, hash_key_len,  # noqa: F401
                      hash_max_key_id)

__all__ = [n for n in dir() if not n.startswith("_") and n != "annotations"]
