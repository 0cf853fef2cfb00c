"""A naive model of the front end's driver bookkeeping (split ring): which used entries are
honoured, which one is the first violation, what the driver gets back.  Plain Python over
dicts, no shared memory -- what the kernels in pktbuf/drivers/virtio_user must agree with."""
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
