"""Stages the tests of ``pktbuf fwd --stage`` load by name (``tests.apps.fwd_stages:...``), in
this process, in ``pktbuf fwd`` subprocesses and in their workers.

``parity``: a packet whose byte 5 (the last byte of its destination MAC) is odd is dropped
(reason 0, ``odd``); one whose byte 4 is 0xEE goes to port ``state[0]`` (the stage's routing
choice, past the default); every packet counts in ``seen``, and ``state[1 + rx_port]`` counts
the packets of each Rx port (state the user owns and reads back).
"""
from __future__ import annotations

import os

import numpy as np
from numba import njit

from pktbuf.apps.stage.abi import stage_drop
from pktbuf.apps.stage.api import Stage, export_fd, import_fd
from pktbuf.net.hash.api import Hash
from pktbuf.net.hash.table import hash_lookup_data
from pktbuf.rawmem import addr_u8

COUNTERS = ("seen", "rerouted")
DROP_REASONS = ("odd",)


@njit(inline="always")
def _byte_ptr(m):
    return addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), 6)


@njit(nogil=True, cache=True)
def parity(state, dom, rx_port, pkts, n, dest, cnt):
    mb = dom.mb
    for i in range(n):
        m = mb[pkts[i]]
        p = _byte_ptr(m)
        b5 = p[5]
        if b5 & 1:
            dest[i] = stage_drop(0)
        elif p[4] == 0xEE:
            dest[i] = state[0]
            cnt[1] += 1
        cnt[0] += 1
    state[1 + rx_port] += n


def make(worker=None):
    """``--stage tests.apps.fwd_stages:make``: the parity stage with its state; rerouted
    packets go to port ``$FWD_STAGE_REROUTE`` (default 0)."""
    st = np.zeros(1 + 64, np.int64)
    st[0] = int(os.environ.get("FWD_STAGE_REROUTE", "0"))
    return Stage(parity, state=st, counters=COUNTERS, drop_reasons=DROP_REASONS)


@njit(nogil=True, cache=True)
def six_params(state, dom, rx_port, pkts, n, dest):
    return


def not_jitted(state, dom, rx_port, pkts, n, dest, cnt):
    return


@njit(nogil=True, cache=True)
def bad_types(state, dom, rx_port, pkts, n, dest, cnt):
    for i in range(n):
        dest[i] = state.no_such_field


def returns_int():
    return 3


# -- a table the workers share: a pktbuf Hash in shared memory, filled by the parent ----------
KNOWN = {bytes([0, 1, 2, 3, 0, 0]): 0, bytes([0, 1, 2, 3, 0xEE, 2]): 0}    # dst MAC -> Tx port
_tables = []


@njit(nogil=True, cache=True)
def mac_table(state, dom, rx_port, pkts, n, dest, cnt):
    mb = dom.mb
    for i in range(n):
        m = mb[pkts[i]]
        pos, port = hash_lookup_data(state, _byte_ptr(m))
        if pos >= 0:
            dest[i] = np.int32(port)
            cnt[0] += 1
        else:
            dest[i] = stage_drop(0)


def make_shared(worker=None):
    """The parent (``worker`` None) makes and fills the table and offers its memfd; each
    worker attaches to it -- it never fills it."""
    if worker is None:
        h = Hash(64, 6, shared=True)
        for k, port in KNOWN.items():
            h.add(k, port)
        export_fd("fwd_test_macs", h.fd)
    else:
        h = Hash.attach(import_fd("fwd_test_macs"))
    _tables.append(h)
    return Stage(mac_table, state=h.block, counters=("known",), drop_reasons=("unknown",))
