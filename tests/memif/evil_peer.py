"""A hostile memif peer, pure Python (no numba): run as a separate process by test_hostile.py.

It does the handshake correctly, moves some legitimate traffic, and then -- while traffic runs
-- scribbles random values into ring indices, descriptors, flags and cookies.  Whenever pktbuf
drops it, it connects again (client) or accepts again (server), until its time is up.
Prints one line of counters at the end.

usage: python evil_peer.py client|server SOCKET SECONDS SEED
"""
import array
import mmap
import os
import random
import socket
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from pktbuf.drivers.memif import layout as L  # noqa: E402
from pktbuf.drivers.memif import proto as P  # noqa: E402
from pktbuf.fdwait import readable  # noqa: E402

LOG2 = 6
N = 1 << LOG2
BSIZE = 2048


def send(sock, msg, fd=None):
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]).tobytes())] if fd else []
    sock.sendmsg([msg], anc)


def recv(sock, timeout=5.0):
    r = readable([sock], timeout)
    if not r:
        raise TimeoutError
    data, anc, _, _ = sock.recvmsg(256, socket.CMSG_SPACE(64))
    fds = []
    for lvl, typ, cdata in anc:
        if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            a = array.array("i")
            a.frombytes(cdata[:len(cdata) - len(cdata) % 4])
            fds += list(a)
    if not data:
        raise ConnectionError("eof")
    return P.parse(data), fds


def dropped(sock):
    """True if pktbuf sent DISCONNECT or closed."""
    r = readable([sock], 0)
    if not r:
        return False
    try:
        data = sock.recv(256)
    except OSError:
        return True
    return True if not data or P.parse(data).type == P.MSG_DISCONNECT else False


class Rings:
    def __init__(self, arr, c2s_off, s2c_off, buffers):
        self.arr = arr
        self.c2s = L.ring_header_view(arr, c2s_off)
        self.s2c = L.ring_header_view(arr, s2c_off)
        self.dc2s = L.desc_view(arr, c2s_off, LOG2)
        self.ds2c = L.desc_view(arr, s2c_off, LOG2)
        self.buffers = buffers

    def scribble(self, rng, size):
        what = rng.randrange(9)
        big = [0, 1, 2047, 2048, 2049, 65535, 65536, size - 1, size, size + 1, 2**31, 2**32 - 1]
        ring = self.dc2s if rng.random() < 0.5 else self.ds2c
        s = rng.randrange(N)
        if what == 0:
            self.c2s["head"] = rng.randrange(65536)
        elif what == 1:
            self.s2c["tail"] = rng.randrange(65536)
        elif what == 2:
            ring[s]["region"] = rng.choice([0, 1, 2, 255, 65535])
        elif what == 3:
            ring[s]["offset"] = rng.choice(big + [rng.randrange(2**32)])
        elif what == 4:
            ring[s]["length"] = rng.choice(big + [rng.randrange(2**32)])
        elif what == 5:
            ring[s]["flags"] = rng.randrange(65536)
        elif what == 6:
            (self.c2s if rng.random() < 0.5 else self.s2c)["cookie"] = rng.randrange(2**32)
        elif what == 7:
            self.c2s["tail"] = rng.randrange(65536)
        else:
            self.s2c["head"] = rng.randrange(65536)


def run_client(path, deadline, rng, stats):
    while time.monotonic() < deadline:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect("\0" + path)
        except OSError:
            sock.close()
            time.sleep(0.05)
            continue
        try:
            hello, _ = recv(sock)
            lay = L.copy_region_layout(1, 1, LOG2, BSIZE)
            fd = os.memfd_create("evil", os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, lay["size"])
            mm = mmap.mmap(fd, lay["size"])
            arr = np.frombuffer(mm, np.uint8)
            arr[lay["buffers"]:] = 0xA5
            for c2s, k, off in lay["rings"]:
                L.init_ring(arr, off, LOG2)
                d = L.desc_view(arr, off, LOG2)
                g = 0 if c2s else 1
                d["offset"] = lay["buffers"] + (g * N + np.arange(N)) * BSIZE
                d["length"] = BSIZE
            efds = [os.eventfd(0, os.EFD_NONBLOCK) for _ in range(2)]
            msgs = [(P.build_init(0, b"", "evil"), None), (P.build_add_region(0, lay["size"]), fd),
                    (P.build_add_ring(True, 0, 0, lay["rings"][0][2], LOG2), efds[0]),
                    (P.build_add_ring(False, 0, 0, lay["rings"][1][2], LOG2), efds[1]),
                    (P.build_connect("evil"), None)]
            for m, f in msgs:
                send(sock, m, f)
                reply, _ = recv(sock)
            if reply.type != P.MSG_CONNECTED:
                raise ConnectionError("no CONNECTED")
            stats["connects"] += 1
            r = Rings(arr, lay["rings"][0][2], lay["rings"][1][2], lay["buffers"])
            head = 0
            s2c_last = 0
            calm = rng.randrange(20, 200)       # legitimate rounds before the scribbling
            k = 0
            while time.monotonic() < deadline and not dropped(sock):
                k += 1
                # legit: refill S2C, send a few C2S packets
                r.s2c["head"] = (s2c_last + N) & 0xFFFF
                s2c_last = int(r.s2c["tail"])
                tail = int(r.c2s["tail"])
                for _ in range(4):
                    if (head - tail) & 0xFFFF >= N:
                        break
                    s = head % N
                    r.dc2s[s]["length"] = rng.randrange(1, BSIZE)
                    r.dc2s[s]["flags"] = 0
                    head = (head + 1) & 0xFFFF
                r.c2s["head"] = head
                stats["sent"] += 1
                if k > calm:
                    for _ in range(rng.randrange(1, 4)):
                        r.scribble(rng, lay["size"])
                        stats["scribbles"] += 1
                time.sleep(0.0005)
            del arr, r
            try:
                mm.close()
            except BufferError:
                pass
            os.close(fd)
            for e in efds:
                os.close(e)
        except (TimeoutError, ConnectionError, OSError, P.ProtocolError):
            pass
        finally:
            sock.close()
            stats["drops"] += 1


def run_server(path, deadline, rng, stats):
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ls.bind("\0" + path)
    ls.listen(1)
    print("LISTENING", flush=True)
    while time.monotonic() < deadline:
        r = readable([ls], 0.2)
        if not r:
            continue
        sock, _ = ls.accept()
        held = []
        try:
            send(sock, P.build_hello("evil"))
            region_fd = region_size = None
            rings = {}
            while True:
                msg, fds = recv(sock)
                held += fds
                if msg.type == P.MSG_ADD_REGION:
                    region_fd, region_size = fds[0], msg.size
                elif msg.type == P.MSG_ADD_RING:
                    rings[msg.c2s] = msg.offset
                elif msg.type == P.MSG_CONNECT:
                    break
                send(sock, P.build_ack())
            mm = mmap.mmap(region_fd, region_size)
            arr = np.frombuffer(mm, np.uint8)
            rr = Rings(arr, rings[True], rings[False], 0)
            rr.c2s["head"] = rr.c2s["tail"] = rr.s2c["head"] = rr.s2c["tail"] = 0
            rr.c2s["flags"] = L.RING_FLAG_MASK_INT
            send(sock, P.build_connected("evil"))
            stats["connects"] += 1
            tail = 0
            calm = rng.randrange(20, 200)
            k = 0
            while time.monotonic() < deadline and not dropped(sock):
                k += 1
                rr.c2s["tail"] = rr.c2s["head"]            # consume everything
                head = int(rr.s2c["head"])
                n = 0
                while (head - tail) & 0xFFFF > 0 and n < 4:   # send into the client's buffers
                    s = tail % N
                    d = rr.ds2c[s]
                    off = int(d["offset"])
                    if int(d["region"]) == 0 and off + 64 <= region_size:
                        arr[off:off + 64] = 0x5A
                    d["length"] = 64
                    d["flags"] = 0
                    tail = (tail + 1) & 0xFFFF
                    n += 1
                    del d
                rr.s2c["tail"] = tail
                stats["sent"] += 1
                if k > calm:
                    for _ in range(rng.randrange(1, 4)):
                        rr.scribble(rng, region_size)
                        stats["scribbles"] += 1
                time.sleep(0.0005)
            del arr, rr
            try:
                mm.close()
            except BufferError:
                pass
        except (TimeoutError, ConnectionError, OSError, P.ProtocolError, KeyError):
            pass
        finally:
            for f in held:
                try:
                    os.close(f)
                except OSError:
                    pass
            sock.close()
            stats["drops"] += 1


def main():
    role, path, seconds, seed = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    stats = {"connects": 0, "drops": 0, "sent": 0, "scribbles": 0}
    deadline = time.monotonic() + seconds
    (run_client if role == "client" else run_server)(path, deadline, rng, stats)
    print(" ".join(f"{k}={v}" for k, v in stats.items()), flush=True)


if __name__ == "__main__":
    main()
