"""Every kernel a user's own ``@njit`` code may call, under DPDK's names.

    import numpy as np
    from numba import njit
    import pktbuf
    from pktbuf.kernels import pktmbuf_alloc_bulk, pktmbuf_free_bulk

    pool = pktbuf.PktmbufPool(8192, cache_size=256)
    dom, pid = pool.domain.state, pool.id

    @njit(nogil=True)
    def loop(dom, pid, lcore, n):
        burst = np.empty(32, np.int32)
        for _ in range(n):
            if pktmbuf_alloc_bulk(dom, pid, lcore, burst, 32) == 0:
                ...                                   # fill, send, ...
                pktmbuf_free_bulk(dom, lcore, burst, 32)

Conventions: ``dom`` is the domain's handle (``pool.domain.state``, a
:class:`~pktbuf.block.Block` passed to compiled code as one pointer); ``pid`` a pool id
(``pool.id``); ``lcore`` the caller's lcore id (0..127, unique per thread, or ``LCORE_ANY`` =
-1 for no cache); mbufs are ``int32`` handles, ``NULL`` = -1; arrays of handles are
C-contiguous ``int32``.  Calls return counts or 0, or a negative errno on failure (see
:mod:`pktbuf.errors`).  Addresses are plain integers: view memory with :func:`addr_u8`.
Kernels check what they need to stay memory-safe on valid handles (array bounds, counts,
lengths against buffers); they do not check that a handle is a live, allocated mbuf -- the
facade does that (and the debug switch makes the free kernels check it too).

Importing this module installs the free kernels' out-of-line paths in this process (compiled,
or loaded from the cache: :mod:`pktbuf.calltable`), as creating or attaching a
:class:`~pktbuf.Domain` does, so code that maps a domain's memory by hand can free into it.
"""
from .atomics import (cas, compiler_barrier, cpu_pause, exchange, fence, fence_acquire,  # noqa: F401
                      fence_release, fetch_add, fetch_and, fetch_or, fetch_sub, field_cas,
                      field_fetch_add, field_load_acquire, field_store_release, load_acquire,
                      load_relaxed, store_release, store_relaxed)
from .buf.mbuf.check import mbuf_check, mbuf_handle_valid, mbuf_raw_check, pktmbuf_free_check  # noqa: F401
from .buf.mbuf.data import (pktmbuf_adj, pktmbuf_append, pktmbuf_buffer, pktmbuf_chain,  # noqa: F401
                            pktmbuf_copy, pktmbuf_data, pktmbuf_headroom, pktmbuf_is_contiguous,
                            pktmbuf_lastseg, pktmbuf_linearize, pktmbuf_mtod, pktmbuf_mtod_offset,
                            pktmbuf_prepend, pktmbuf_read, pktmbuf_tailroom, pktmbuf_trim)
from .buf.mbuf.dynfield import mbuf_dynfield_read, mbuf_dynfield_write  # noqa: F401
from .buf.mbuf.free import (pktmbuf_free, pktmbuf_free_bulk, pktmbuf_free_bulk_staged,  # noqa: F401
                            pktmbuf_free_seg, pktmbuf_prefree_seg)
from .buf.mbuf.free import install_free_paths as _install_free_paths
from .buf.mbuf.indirect import (mbuf_from_indirect, mbuf_refcnt_read, mbuf_refcnt_set,  # noqa: F401
                                mbuf_refcnt_update, pktmbuf_attach, pktmbuf_clone, pktmbuf_detach,
                                pktmbuf_refcnt_update)
from .buf.mbuf.layout import F_EXTERNAL, F_INDIRECT, NULL, PORT_INVALID  # noqa: F401
from .buf.mbuf.offload import mbuf_tx_offload  # noqa: F401
from .buf.mbuf.raw import (mbuf_raw_alloc, mbuf_raw_alloc_bulk, mbuf_raw_free,  # noqa: F401
                           mbuf_raw_free_bulk, pktmbuf_alloc, pktmbuf_alloc_bulk, pktmbuf_reset)
from .buf.mempool.kernels import (mempool_avail_count, mempool_cache_flush, mempool_get,  # noqa: F401
                                  mempool_get_bulk, mempool_in_use_count, mempool_put,
                                  mempool_put_bulk)
from .lcore import LCORE_ANY, MAX_LCORE  # noqa: F401
from .drivers.memif.datapath import memif_link_up, memif_rx_burst, memif_tx_burst  # noqa: F401
from .drivers.ring.burst import eth_ring_rx_burst, eth_ring_tx_burst  # noqa: F401
from .drivers.af_packet.rx import af_packet_rx_burst, af_packet_rx_wait  # noqa: F401
from .drivers.af_packet.tx import af_packet_tx_burst  # noqa: F401
from .drivers.af_xdp.rx import (af_xdp_fill, af_xdp_rx_burst, af_xdp_rx_count,  # noqa: F401
                                af_xdp_rx_wait)
from .drivers.af_xdp.tx import af_xdp_complete, af_xdp_tx_burst  # noqa: F401
from .ethdev.burst import (eth_domain, rx_burst, rx_queue_eof, rx_queue_error,  # noqa: F401
                           tx_burst, tx_queue_error)
from .drivers.memif.poll import memif_link_wait, memif_rx_wait  # noqa: F401
from .drivers.vhost.wait import vhost_rx_wait  # noqa: F401
from .drivers.virtio_user.wait import virtio_user_rx_wait  # noqa: F401
from .drivers.pcap.rx import pcap_rx_burst, pcap_rx_eof, pcap_rx_error  # noqa: F401
from .drivers.pcap.tx import pcap_tx_burst, pcap_tx_error, pcap_tx_flush  # noqa: F401
from .idle import idle_backoff, sched_yield, usleep  # noqa: F401
from .buf.heap.audit import heap_get_stats, heap_malloc_validate, heap_validate  # noqa: F401
from .buf.heap.kernels import (heap_cache_flush, heap_calloc, heap_free,  # noqa: F401
                               heap_lcore_free, heap_lcore_malloc, heap_lcore_zmalloc, heap_malloc,
                               heap_realloc, heap_zmalloc)
from .buf.pagepool.arena import (alloc_page, alloc_pages_bulk, get_page, page_address,  # noqa: F401
                                 page_ref_count, put_page)
from .buf.pagepool.alloc import page_pool_alloc_pages  # noqa: F401
from .buf.pagepool.kernels import (page_pool_destroy, page_pool_get_dma_addr,  # noqa: F401
                                   page_pool_get_stats, page_pool_inflight, page_pool_release)
from .buf.pagepool.recycle import (page_pool_put_full_page, page_pool_put_page,  # noqa: F401
                                   page_pool_put_page_bulk, page_pool_recycle_direct,
                                   page_pool_ref_page, page_pool_release_page)
from .spinlock import spin_is_locked, spin_lock, spin_trylock, spin_unlock  # noqa: F401
from .rawmem import (addr_u8, copy_in_bounds, fill_in_bounds, load_u8, memcpy,  # noqa: F401
                     move_in_bounds,
                     memmove, memset, stack_i32, store_u8)
from .net.rss.reta import reta_init, reta_queue, reta_update, rss_queue_bulk  # noqa: F401
from .net.rss.thash import (convert_rss_key, softrss, softrss_be, thash_bulk,  # noqa: F401
                            thash_lut, thash_table_init)
from .net.rss.tuple import rss_hash_bulk, rss_hash_frame, rss_parse, rss_tuple  # noqa: F401
from .net.distrib.kernels import (distributor_burst, distributor_ring_count,  # noqa: F401
                                  distributor_return_burst, distributor_returned_pkts,
                                  distributor_worker_burst, distributor_worker_done)
from .buf.ring.kernels import (ring_count, ring_dequeue_bulk, ring_dequeue_burst,  # noqa: F401
                               ring_enqueue_bulk, ring_enqueue_burst, ring_free_count,
                               ring_mc_dequeue_bulk, ring_mc_dequeue_burst, ring_mp_enqueue_bulk,
                               ring_mp_enqueue_burst, ring_sc_dequeue_bulk, ring_sc_dequeue_burst,
                               ring_sp_enqueue_bulk, ring_sp_enqueue_burst)
from .net.lpm.lpm4 import (lpm_add, lpm_delete, lpm_delete_all, lpm_is_rule_present,  # noqa: F401
                          lpm_lookup, lpm_lookup_bulk, lpm_lookupx4)
from .net.lpm.lpm6 import (lpm6_add, lpm6_delete, lpm6_delete_all,  # noqa: F401
                          lpm6_is_rule_present, lpm6_lookup, lpm6_lookup_bulk)
from .net.hash.crc import hash_crc, hash_crc_4byte  # noqa: F401
from .net.hash.table import (hash_add, hash_add_key, hash_add_key_data,  # noqa: F401
                             hash_add_key_with_hash, hash_add_key_with_hash_data, hash_count,
                             hash_del_key, hash_del_key_with_hash, hash_free_key_with_position,
                             hash_get_key_with_position, hash_hash, hash_iterate, hash_key_len,
                             hash_lookup, hash_lookup_bulk, hash_lookup_bulk_data,
                             hash_lookup_data, hash_lookup_with_hash, hash_lookup_with_hash_bulk,
                             hash_lookup_with_hash_bulk_data, hash_lookup_with_hash_data,
                             hash_max_key_id, hash_reset)
from .net.hdr.access import hdr_read, pktmbuf_write  # noqa: F401
from .net.ptype.parse import net_get_ptype_lens  # noqa: F401
from .net.ptype.mbuf import net_get_ptype, net_get_ptype_bulk  # noqa: F401
from .net.cksum.raw import raw_cksum, raw_cksum_mbuf  # noqa: F401
from .net.cksum.ipv4 import (ipv4_cksum, ipv4_cksum_verify, ipv4_udptcp_cksum,  # noqa: F401
                             ipv4_udptcp_cksum_mbuf, ipv4_udptcp_cksum_mbuf_verify,
                             ipv4_udptcp_cksum_verify)
from .net.cksum.ipv6 import (ipv6_udptcp_cksum, ipv6_udptcp_cksum_mbuf,  # noqa: F401
                             ipv6_udptcp_cksum_mbuf_verify, ipv6_udptcp_cksum_verify)
from .net.cksum.incr import cksum_update16, cksum_update32, ipv4_ttl_dec_cksum  # noqa: F401

__all__ = [n for n in dir() if not n.startswith("_")]

_install_free_paths()
