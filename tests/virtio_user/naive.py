"""A naive model of the front end's driver bookkeeping (split and packed rings): which used
entries are honoured, which one is the first violation, what the driver gets back.  Plain
Python over dicts and lists, no shared memory -- what the kernels in pktbuf/drivers/virtio_user
must agree with."""
from __future__ import annotations

V_USED_IDX, V_USED_ID, V_USED_LEN, V_NUM_BUFFERS = 1, 2, 3, 4
HDR = 12
MIN_FRAME = 14


def tx_reclaim(outstanding: dict, entries: list, delta: int):
    """``outstanding``: head -> packet, the chains the back end holds; ``entries``: the used
    ring's (id, len) from the first unread slot; ``delta``: how far ``used.idx`` moved.
    Returns ``(violation or 0, packets given back in order)``; ``outstanding`` loses them."""
    if delta > len(outstanding):
        return V_USED_IDX, []
    back = []
    for hd, _ln in entries[:delta]:
        if hd not in outstanding:
            return V_USED_ID, back
        back.append(outstanding.pop(hd))
    return 0, back


def tx_reclaim_in_order(outstanding: list, delta: int):
    """IN_ORDER: the used index alone says how many of the oldest chains are done (the ids
    are not read).  ``outstanding``: packets in the order posted."""
    if delta > len(outstanding):
        return V_USED_IDX, []
    back = outstanding[:delta]
    del outstanding[:delta]
    return 0, back


def rx_harvest(posted: dict, entries: list, delta: int, nbufs: dict, mrg: bool, n: int):
    """``posted``: id -> capacity of the buffers the back end holds; ``nbufs``: id ->
    num_buffers the back end wrote into that buffer's header.  Returns ``(violation or 0,
    packets as lists of segment lengths, frames dropped as too short, entries consumed)``."""
    if delta > len(posted):
        return V_USED_IDX, [], 0, 0
    held = len(posted)
    j = 0
    pkts, short = [], 0
    while len(pkts) < n and j < delta:
        hd, ln = entries[j]
        nb = 1
        if mrg:
            if hd not in posted:
                return V_USED_ID, pkts, short, j
            nb = nbufs.get(hd, 0)
            if nb == 0 or nb > held - j:
                return V_NUM_BUFFERS, pkts, short, j
            if nb > delta - j:
                break
        if hd not in posted:
            return V_USED_ID, pkts, short, j
        if ln > posted[hd]:
            return V_USED_LEN, pkts, short, j
        del posted[hd]
        j += 1
        if ln < HDR:
            return V_USED_LEN, pkts, short, j
        segs = [ln - HDR]
        for _ in range(1, nb):
            hd2, ln2 = entries[j]
            if hd2 not in posted:
                return V_USED_ID, pkts, short, j
            if ln2 > posted[hd2]:
                return V_USED_LEN, pkts, short, j
            del posted[hd2]
            j += 1
            segs.append(ln2)
        if sum(segs) < MIN_FRAME:
            short += 1
        else:
            pkts.append(segs)
    return 0, pkts, short, j


# -- packed rings (virtio 1.1 §2.7) ------------------------------------------------------------
V_USED_WRAP = 5
F_AVAIL, F_USED = 1 << 7, 1 << 15
PENDING, USED, BAD = 0, 1, 2


def packed_state(flags: int, wrap: int) -> int:
    """What the driver makes of a descriptor's flags at its used slot, for used wrap ``wrap``."""
    a, u = bool(flags & F_AVAIL), bool(flags & F_USED)
    if a == bool(wrap) and u == bool(wrap):
        return USED
    if a == bool(wrap):
        return PENDING
    return BAD


def _adv(slot, wrap, k, n):
    slot += k
    if slot >= n:
        return slot - n, wrap ^ 1
    return slot, wrap


def packed_tx_reclaim(ring: list, slot: int, wrap: int, outstanding: dict, in_order: bool):
    """``ring``: the N descriptors ``(id, len, flags)`` as the back end left them; ``slot``,
    ``wrap``: the driver's used position; ``outstanding``: id -> (packet, descriptors) in the
    order posted.  Returns ``(violation or 0, packets given back in order, slot, wrap)``."""
    n, back = len(ring), []
    while True:
        bid, _ln, fl = ring[slot]
        s = packed_state(fl, wrap)
        if s == PENDING:
            break
        if not outstanding:
            return (V_USED_IDX if s == USED else 0), back, slot, wrap
        if s == BAD:
            return V_USED_WRAP, back, slot, wrap
        if bid not in outstanding:
            return V_USED_ID, back, slot, wrap
        while True:         # IN_ORDER: the oldest through the one named; else just that one
            k = next(iter(outstanding)) if in_order else bid
            p, nd = outstanding.pop(k)
            back.append(p)
            slot, wrap = _adv(slot, wrap, nd, n)
            if k == bid:
                break
    return 0, back, slot, wrap


def packed_rx_harvest(ring: list, slot: int, wrap: int, posted: dict, nbufs: dict, mrg: bool,
                      n: int):
    """``posted``: id -> capacity of the buffers the back end holds; ``nbufs``: id ->
    num_buffers in that buffer's header.  Returns ``(violation or 0, packets as lists of
    segment lengths, frames dropped as too short)``."""
    size, held, j = len(ring), len(posted), 0
    pkts, short = [], 0
    while len(pkts) < n:
        bid, ln, fl = ring[slot]
        s = packed_state(fl, wrap)
        if s == PENDING:
            break
        if held - j == 0:
            return (V_USED_IDX if s == USED else 0), pkts, short
        if s == BAD:
            return V_USED_WRAP, pkts, short
        nb = 1
        if mrg:
            if bid not in posted:
                return V_USED_ID, pkts, short
            nb = nbufs.get(bid, 0)
            if nb == 0 or nb > held - j:
                return V_NUM_BUFFERS, pkts, short
            s2, w2, wait = slot, wrap, False
            for _ in range(1, nb):          # the whole packet must be used already
                s2, w2 = _adv(s2, w2, 1, size)
                st = packed_state(ring[s2][2], w2)
                if st == PENDING:
                    wait = True
                    break
                if st == BAD:
                    return V_USED_WRAP, pkts, short
            if wait:
                break
        segs = []
        for k in range(nb):
            bid, ln, _ = ring[slot]
            if bid not in posted:
                return V_USED_ID, pkts, short
            if ln > posted[bid]:
                return V_USED_LEN, pkts, short
            del posted[bid]
            j += 1
            slot, wrap = _adv(slot, wrap, 1, size)
            if k == 0 and ln < HDR:
                return V_USED_LEN, pkts, short
            segs.append(ln - HDR if k == 0 else ln)
        if sum(segs) < MIN_FRAME:
            short += 1
        else:
            pkts.append(segs)
    return 0, pkts, short
