"""pcap: read and write rates of pktbuf's burst kernels next to dpkt's, in the same run.

:func:`compare` writes a file of ``n`` frames of ``size`` bytes, then measures, interleaved
and ``repeat`` times (medians reported):

* ``dpkt_write``: ``dpkt.pcap.Writer.writepkts`` of ``(ts, bytes)`` pairs into a file;
* ``dpkt_read``: iterating ``dpkt.pcap.Reader`` over the file;
* ``pktbuf_write``: a compiled loop -- allocate a burst, set the lengths, ``pcap_tx_burst``
  (which formats, writes and frees) -- into a file, flushed;
* ``pktbuf_read``: a compiled loop -- ``pcap_rx_burst`` into mbufs, ``pktmbuf_free_bulk`` --
  over the same file, from a freshly opened port each time (the file is in the page cache);

in Mpps, and the ratios ``write_ratio`` / ``read_ratio`` (pktbuf over dpkt).  pktbuf's loops
allocate and free their mbufs, work dpkt does not have.  The file lives in ``dir`` (default a
temporary directory on the default temporary filesystem).

Writing to a file costs the kernel's copy into the page cache, the same for every writer, so
two more figures tell the writers' own work from it:

* ``dpkt_write_null`` / ``pktbuf_write_null`` (and ``write_null_ratio``): the same writes into
  ``/dev/null``, which takes the bytes without copying them;
* ``file_write_floor``: records per second that plain 1 MiB ``write()`` calls of the same bytes
  reach into a new file in ``dir`` -- the ceiling for any writer there.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

import numpy as np

from .._jit import kernel
from ..buf.mbuf.free import pktmbuf_free, pktmbuf_free_bulk
from ..buf.mbuf.raw import pktmbuf_alloc_bulk
from ..drivers.pcap.rx import pcap_rx_burst, pcap_rx_eof, pcap_rx_error
from ..drivers.pcap.tx import pcap_tx_burst

__all__ = ["compare", "pktbuf_read", "pktbuf_write", "testpmd_rates"]


@kernel
def _rx_loop(dom, q, lcore, out):
    """Every packet of the file; -1 when the file stops at a format error (a damaged file is
    never timed as a whole one)."""
    n = 0
    while not pcap_rx_eof(q):
        k = pcap_rx_burst(dom, q, lcore, out, out.size)
        pktmbuf_free_bulk(dom, lcore, out, k)
        n += k
    if pcap_rx_error(q) != 0:
        return -1
    return n


@kernel
def _tx_loop(dom, pid, q, lcore, burst, size, n):
    done = 0
    while done < n:
        if pktmbuf_alloc_bulk(dom, pid, lcore, burst, burst.size) != 0:
            return -1
        for i in range(burst.size):
            m = dom.mb[burst[i]]
            m.data_len = size
            m.pkt_len = size
        k = pcap_tx_burst(dom, q, lcore, burst, burst.size)
        if k < burst.size:
            for i in range(k, burst.size):         # a failed write: give the rest back
                pktmbuf_free(dom, lcore, burst[i])
            return -1
        done += k
    return done


def pktbuf_read(pool, path: str, burst: int = 32) -> float:
    """Seconds to read every packet of ``path`` through a new PcapPort's Rx queue."""
    from ..drivers.pcap.api.port import PcapPort
    out = np.empty(burst, np.int32)
    with PcapPort(pool, rx_pcap=path, timestamps=False) as port:
        t = time.perf_counter()
        n = _rx_loop(pool.domain.state, port.rx_queue(0), 0, out)
        t = time.perf_counter() - t
        if n < 0:
            raise port.error() or RuntimeError(f"{path}: the read stopped at a format error")
        return t


def pktbuf_write(pool, path: str, n: int, size: int, burst: int = 32) -> float:
    """Seconds to write ``n`` packets of ``size`` bytes (µs pcap) through a PcapPort."""
    from ..drivers.pcap.api.port import PcapPort
    b = np.empty(burst, np.int32)
    with PcapPort(pool, tx_pcap=path, nano=False) as port:
        t = time.perf_counter()
        _tx_loop(pool.domain.state, pool.id, port.tx_queue(0), 0, b, size, n)
        port.flush()
        return time.perf_counter() - t


def _write_floor(path: str, nbytes: int) -> float:
    """Seconds for 1 MiB ``write()`` calls of ``nbytes`` bytes into a new file ``path``."""
    chunk = bytes(1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t = time.perf_counter()
        done = 0
        while done < nbytes:
            done += os.write(fd, chunk[:min(len(chunk), nbytes - done)])
        return time.perf_counter() - t
    finally:
        os.close(fd)


def _dpkt_write(path: str, n: int, frame: bytes) -> float:
    """Seconds for dpkt to write ``n`` copies of ``frame`` (µs pcap) into ``path``."""
    import dpkt
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)
        t = time.perf_counter()
        w.writepkts((1.0, frame) for _ in range(n))
        f.flush()
        return time.perf_counter() - t


def compare(n: int = 200_000, size: int = 64, repeat: int = 5, burst: int = 32,
            dir: str | None = None) -> dict:
    """Mpps of dpkt and pktbuf, reading and writing (see the module docstring)."""
    import dpkt
    from ..buf.domain.pools import PktmbufPool
    from ..lcore import reserve_lcores
    reserve_lcores(1)
    d = tempfile.mkdtemp(prefix="pktbuf-bench-pcap-", dir=dir)
    src = os.path.join(d, "in.pcap")
    out = os.path.join(d, "out.pcap")
    frame = bytes(size)
    pool = PktmbufPool(8192, cache_size=256, name="bench-pcap")
    res = {"dpkt_write": [], "dpkt_read": [], "pktbuf_write": [], "pktbuf_read": [],
           "dpkt_write_null": [], "pktbuf_write_null": [], "file_write_floor": []}
    try:
        pktbuf_write(pool, src, n, size, burst)          # the input file; compiles
        pktbuf_read(pool, src, burst)
        for _ in range(repeat):
            res["dpkt_write"].append(n / _dpkt_write(out, n, frame) / 1e6)
            with open(src, "rb") as f:
                t = time.perf_counter()
                k = sum(1 for _ in dpkt.pcap.Reader(f))
                res["dpkt_read"].append(k / (time.perf_counter() - t) / 1e6)
            res["pktbuf_write"].append(n / pktbuf_write(pool, out, n, size, burst) / 1e6)
            res["pktbuf_read"].append(n / pktbuf_read(pool, src, burst) / 1e6)
            res["dpkt_write_null"].append(n / _dpkt_write(os.devnull, n, frame) / 1e6)
            res["pktbuf_write_null"].append(
                n / pktbuf_write(pool, os.devnull, n, size, burst) / 1e6)
            os.unlink(out)
            res["file_write_floor"].append(n / _write_floor(out, n * (16 + size)) / 1e6)
    finally:
        pool.close(force=True)
        for p in (src, out):
            try:
                os.unlink(p)
            except OSError:
                pass
        os.rmdir(d)
    med = {k: statistics.median(v) for k, v in res.items()}
    med["write_ratio"] = med["pktbuf_write"] / med["dpkt_write"]
    med["read_ratio"] = med["pktbuf_read"] / med["dpkt_read"]
    med["write_null_ratio"] = med["pktbuf_write_null"] / med["dpkt_write_null"]
    med.update(n=n, size=size, burst=burst, repeat=repeat)
    return med


def testpmd_rates(n: int = 2_000_000, size: int = 64, dir: str | None = None,
                  seconds: float = 1.0) -> dict:
    """DPDK 22.11 ``net_pcap`` in ``dpdk-testpmd``, one lcore forwarding, no hugepages:

    * ``testpmd_read``: ``--forward-mode=rxonly`` over an ``rx_pcap`` file of ``n`` frames
      (written by pktbuf, µs pcap): packets over the time from ``start`` until its RX-packets
      reached ``n`` (polled: a few % of resolution at a second's run);
    * ``testpmd_write``: ``--forward-mode=txonly`` (``size``-byte frames) into a ``tx_pcap``
      file: its Tx-pps over ``seconds``.

    In Mpps.  Returns {} when testpmd is not installed."""
    from ..apps import testpmd as T
    from ..buf.domain.pools import PktmbufPool
    if not T.available():
        return {}
    d = tempfile.mkdtemp(prefix="pktbuf-bench-pcap-", dir=dir)
    src = os.path.join(d, "in.pcap")
    out = os.path.join(d, "out.pcap")
    pool = PktmbufPool(8192, cache_size=256, name="bench-pcap-tp")
    res = {}
    try:
        pktbuf_write(pool, src, n, size)
        tp = T.Testpmd(vdevs=[f"net_pcap0,rx_pcap={src}"], fwd="rxonly", lifetime=300)
        try:
            tp.start()
            tp.wait_log(r"testpmd> ", 60)
            tp.cmd("start")
            t0 = time.perf_counter()
            got = 0
            while time.perf_counter() - t0 < 120:
                got = tp.port_stats().get("rx_packets", 0)
                if got >= n:
                    break
            res["testpmd_read"] = got / (time.perf_counter() - t0) / 1e6
        finally:
            tp.cleanup()
        tp = T.Testpmd(vdevs=[f"net_pcap0,tx_pcap={out}"], fwd="txonly", lifetime=300,
                       app_extra=[f"--txpkts={size}"])
        try:
            tp.start()
            tp.wait_log(r"testpmd> ", 60)
            tp.cmd("start")
            time.sleep(0.2)
            tp.port_stats()
            time.sleep(seconds)
            res["testpmd_write"] = tp.port_stats().get("tx_pps", 0) / 1e6
        finally:
            tp.cleanup()
    finally:
        pool.close(force=True)
        for p in (src, out):
            try:
                os.unlink(p)
            except OSError:
                pass
        os.rmdir(d)
    return res


if __name__ == "__main__":
    r = compare()
    r.update(testpmd_rates())
    for k, v in r.items():
        print(f"{k:14s} {v:.2f}" if isinstance(v, float) else f"{k:14s} {v}")
