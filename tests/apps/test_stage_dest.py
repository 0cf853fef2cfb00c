"""The stage loop's ``dest`` rows: each stream has its own, prefilled with its default Tx port
before the stage runs; a row the stage left as it was is not filled again for the next burst
(``dclean``).  Whatever the stage wrote in one burst must never leak into a later one: every
packet leaves by its own decision, or by its stream's default."""
from __future__ import annotations

import pktbuf
from pktbuf.apps.fwd.forwarder import Forwarder

from . import fwd_stages as S
from .test_fwd_stage import drain, inject, wired


def plain(i: int, tag: int) -> bytes:
    """A frame the parity stage leaves on the default port (byte 4 0, byte 5 even)."""
    f = bytearray(60)
    f[6], f[7] = tag, i & 0xFF
    return bytes(f)


def marked(i: int, tag: int) -> bytes:
    """A frame the parity stage sends to ``state[0]``."""
    f = bytearray(plain(i, tag))
    f[4] = 0xEE
    return bytes(f)


def test_a_rerouted_entry_never_outlives_its_burst():
    # burst A: 32 frames, one rerouted at index 20 (the row is written there); burst B: 8
    # plain frames (the row is clean up to 8 only, entry 20 still says port 2); burst C: 32
    # plain frames -- entry 20 must be filled with the default again, not trusted
    in0, out1, out2 = pktbuf.Ring(1024), pktbuf.Ring(1024), pktbuf.Ring(1024)
    st = S.make()
    st.state[0] = 2
    fw = Forwarder([wired(in0, pktbuf.Ring(64)), wired(pktbuf.Ring(64), out1),
                    wired(pktbuf.Ring(64), out2)], stage=st)
    try:
        a = [marked(i, 1) if i == 20 else plain(i, 1) for i in range(32)]
        b = [plain(i, 2) for i in range(8)]
        c = [plain(i, 3) for i in range(32)]
        d = [plain(i, 4) for i in range(32)]
        for burst in (a, b, c, d):
            inject(fw, in0, burst)
            for _ in range(3):
                fw.run_slice(0.005)
        assert drain(fw, out2) == [a[20]]
        assert drain(fw, out1) == a[:20] + a[21:] + b + c + d
    finally:
        assert fw.close() == 0


def test_two_streams_keep_their_own_defaults_across_mixed_bursts():
    # port 0 -> default 1 and port 1 -> default 0, bursts of every kind interleaved: clean
    # ones (the row is reused), ones with reroutes and drops (the row is refilled), short ones
    in0, in1 = pktbuf.Ring(4096), pktbuf.Ring(4096)
    out0, out1, out2 = pktbuf.Ring(4096), pktbuf.Ring(4096), pktbuf.Ring(4096)
    st = S.make()
    st.state[0] = 2
    fw = Forwarder([wired(in0, out0), wired(in1, out1), wired(pktbuf.Ring(64), out2)],
                   stage=st)
    try:
        want = {0: [], 1: [], 2: []}
        for k, n in enumerate((32, 32, 5, 32, 17, 32, 32, 1, 32)):
            for port, ring, dflt in ((0, in0, 1), (1, in1, 0)):
                burst = []
                for i in range(n):
                    f = bytearray(plain(i, 16 * port + k))
                    if (k + i + port) % 7 == 0 and k % 3 == 1:
                        f[4] = 0xEE                        # to state[0]
                    if (k * i + port) % 11 == 3 and k % 3 == 2:
                        f[5] = 1                           # dropped
                    f = bytes(f)
                    burst.append(f)
                    if not f[5] & 1:
                        want[2 if f[4] == 0xEE else dflt].append(f)
                inject(fw, ring, burst)
            for _ in range(3):
                fw.run_slice(0.005)
        for pid, ring in ((0, out0), (1, out1), (2, out2)):
            got = drain(fw, ring)
            assert sorted(got) == sorted(want[pid])
            for tag in range(32):           # per input stream and burst, in received order
                assert [f for f in got if f[6] == tag] == [f for f in want[pid] if f[6] == tag]
    finally:
        assert fw.close() == 0
