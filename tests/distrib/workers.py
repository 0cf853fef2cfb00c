"""Worker bodies for the distributor's multi-process tests (module-level: ``spawn`` starts
them as ``target(sd, *args)`` attached to the shared domain)."""
import os
import signal

from pktbuf import Distributor
from pktbuf.idle import idle_backoff


def dist_worker(sd, w, ppid, fd, nbytes, stop_after, conn):
    """Take worker ``w``'s ring, note each packet's sequence number, free it and report it
    done -- until told to stop (a message on ``conn``) and the ring is empty.  With
    ``stop_after`` > 0: after taking at least that many packets, stop dead (SIGSTOP) holding
    the burst just taken, not yet freed: the test kills it there."""
    sd.pool("mbufs")                          # the packets' pool, mapped in this process
    dist = Distributor.attach(sd.domain, fd, nbytes, pid=ppid)
    seen, idle, stopping = [], 0, False
    while True:
        got = dist.worker_burst(w, 32)
        if got.size:
            idle = 0
            seen += [int.from_bytes(_payload(sd, int(h))[42:46], "big") for h in got]
            if stop_after and len(seen) >= stop_after:
                conn.send(("holding", [int(h) for h in got]))
                os.kill(os.getpid(), signal.SIGSTOP)          # killed here
            sd.domain.free_bulk(got)
            dist.worker_done(w, got.size)
            continue
        if not stopping and conn.poll():
            conn.recv()
            stopping = True
        if stopping and dist.pending(w) == 0:
            break
        idle_backoff(idle, 1000)
        idle += 1
    conn.send(("seen", seen))


def _payload(sd, h):
    from pktbuf import Mbuf
    return Mbuf(sd.domain, h).tobytes()
