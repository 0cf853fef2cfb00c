"""The distributor in plain Python: which worker each packet goes to, and what a burst leaves
with the caller, from the definitions alone (no counting sort, no rings).

The tests hold :func:`~pktbuf.net.distrib.kernels.distributor_burst` to it: same workers, same
order inside every worker's ring, same refused packets in the same order.
"""
from __future__ import annotations


def worker_of(hash_or_none, reta) -> int:
    """Worker of a packet: ``reta[hash % len(reta)]``; a packet without an RSS hash (None)
    counts as hash 0.  Entries past the workers never occur (the facade refuses them)."""
    h = 0 if hash_or_none is None else hash_or_none
    return int(reta[h % len(reta)])


def burst(packets, hashes, reta, free_slots):
    """One ``distributor_burst``: ``packets`` (any ids) with their hashes, ``free_slots[w]``
    the room left in worker ``w``'s ring.  Returns (``taken`` per worker in order, the
    ``refused`` packets in order, the updated room)."""
    room = list(free_slots)
    taken = [[] for _ in room]
    refused = []
    # a worker's ring takes the first packets of its group until full -- the group in burst
    # order, whatever the other workers' packets do
    for p, h in zip(packets, hashes):
        w = worker_of(h, reta)
        if room[w] > 0:
            taken[w].append(p)
            room[w] -= 1
        else:
            refused.append(p)
    return taken, refused, room


def returned(queues, start, n):
    """One ``distributor_returned_pkts``: ``queues[w]`` the packets in worker ``w``'s return
    ring (oldest first, consumed here), reading from worker ``start`` on, each ring as far as
    it goes, until ``n``.  Returns (the packets in the order taken, the next start)."""
    nw = len(queues)
    out = []
    w = start
    for _ in range(nw):
        if len(out) >= n:
            break
        k = min(n - len(out), len(queues[w]))
        out += queues[w][:k]
        del queues[w][:k]
        w = (w + 1) % nw
    return out, w
