"""A receiver asleep in ``port.rx_wait`` woken by testpmd's io echo of a frame we send: the
peer notified us (testpmd's virtio_user kicks, its vhost calls) because we asked, and only
while we slept."""
from __future__ import annotations

import threading
import time


def echo_wakes_the_sleeper(port, pool, waits_word, make_packet, frames, rounds=3):
    """Per round: ``port`` sleeps in rx_wait (seen in its Rx queue's ``waits_word``); one
    frame sent on ``port``; testpmd (io mode) echoes it; the wait returns 1 well before its
    timeout and the frame comes back byte-exact.  Returns the frames received."""
    q = port.rx_queue(0)
    back = []
    for k in range(rounds):
        res = {}
        w0 = int(q.st[waits_word])
        th = threading.Thread(target=lambda: res.__setitem__("r", port.rx_wait(0, 20000)))
        t = time.monotonic()
        th.start()
        end = time.monotonic() + 10
        while q.st[waits_word] == w0 and time.monotonic() < end:
            time.sleep(0.002)
        time.sleep(0.05)
        assert q.st[waits_word] == w0 + 1 and th.is_alive()      # asleep in poll()
        h = make_packet(pool, frames[k], 1 + k % 2)
        assert port.tx_burst([h]) == 1
        th.join(20)
        assert not th.is_alive() and res["r"] == 1
        assert time.monotonic() - t < 15, "slept through: the peer did not notify"
        end = time.monotonic() + 10
        while len(back) <= k and time.monotonic() < end:
            hs = port.rx_burst(32)
            back += [pool.mbuf(int(x)).tobytes() for x in hs]
            pool.free_bulk(hs)
    port.tx_burst([])
    return back
