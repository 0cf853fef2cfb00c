"""The port table: open ports from DPDK device strings, address them by port id.

::

    ports = pktbuf.Ports(pool)                        # one table per domain; pool: Rx mbufs
    p0 = ports.open("net_af_packet0,iface=veth0")    # port 0
    p1 = ports.open("net_ring0")                      # port 1
    eth = ports.state                                 # for rx_burst/tx_burst in your @njit loop
    ...
    ports.close()                                     # every port, every mbuf back

:attr:`Ports.state` is the table block the dispatching kernels
(:func:`~pktbuf.ethdev.burst.rx_burst`, :func:`~pktbuf.ethdev.burst.tx_burst`) take with a
port id and a queue id, so one compiled loop serves every port type.  Ports are numbered from 0
in the order they are opened (the lowest free id, as DPDK assigns them).  A port is entered in
the table only once it is fully set up, and taken out before it is closed; stop every loop that
uses a port before closing it (DPDK asks the same of ``rte_eth_dev_close``).
"""
from __future__ import annotations

import importlib
import threading

from ..errors import InvalidArgument, check_count
from .burst import KINDS_ALL, kinds_mask
from .layout import (ETHDEV, H_DOM, K_AF_PACKET, K_AF_XDP, K_MEMIF, K_NONE, K_PCAP, K_RING,
                     K_VHOST, K_VIRTIO_USER, MAX_PORTS, MAX_QUEUES, P_KIND, P_NB_RX, P_NB_TX)
from ..drivers.common.api.devargs import parse_devargs
from ..buf.domain.pools import PktmbufPool

__all__ = ["Ports", "DRIVERS", "driver_of", "DRIVER_KINDS", "kinds_of_devices", "kinds_of_ports"]

# driver name -> (facade module, class); a device name selects the driver it starts with
DRIVERS = {
    "net_memif": ("pktbuf.drivers.memif.api.port", "MemifPort"),
    "net_ring": ("pktbuf.drivers.ring.api", "RingPort"),
    "net_pcap": ("pktbuf.drivers.pcap.api.port", "PcapPort"),
    "net_af_packet": ("pktbuf.drivers.af_packet.api", "AfPacketPort"),
    "net_af_xdp": ("pktbuf.drivers.af_xdp.api.port", "AfXdpPort"),
    "net_vhost": ("pktbuf.drivers.vhost.api.port", "VhostPort"),
    "net_virtio_user": ("pktbuf.drivers.virtio_user.api.port", "VirtioUserPort"),
}
ALIASES = {"eth_memif": "net_memif", "eth_ring": "net_ring", "eth_pcap": "net_pcap",
           "eth_af_packet": "net_af_packet", "eth_af_xdp": "net_af_xdp",
           "eth_vhost": "net_vhost", "virtio_user": "net_virtio_user"}

# driver name -> the kind of its ports (which burst kernels a burst on one dispatches to)
DRIVER_KINDS = {"net_memif": K_MEMIF, "net_ring": K_RING, "net_pcap": K_PCAP,
                "net_af_packet": K_AF_PACKET, "net_af_xdp": K_AF_XDP, "net_vhost": K_VHOST,
                "net_virtio_user": K_VIRTIO_USER}


def driver_of(name: str) -> str:
    """The driver a device name selects (the longest driver name it starts with)."""
    cands = [(d, d) for d in DRIVERS] + [(a, d) for a, d in ALIASES.items()]
    best = max((c for c in cands if name.startswith(c[0])), key=lambda c: len(c[0]),
               default=None)
    if best is None:
        raise InvalidArgument(f"no driver for device {name!r}; known drivers: "
                              f"{', '.join(sorted(DRIVERS))}")
    return best[1]


def kinds_of_devices(devices) -> int:
    """The mask of the port kinds the device strings ``devices`` open
    (:func:`~pktbuf.ethdev.burst.kinds_mask`), known before any of them is: a loop compiled
    for it serves those port types only.  ``KINDS_ALL`` when an entry is not a device string
    (a port built in Python) or names no known driver -- that one is reported when it is
    opened."""
    kinds = set()
    for d in devices:
        if not isinstance(d, str):
            return KINDS_ALL
        try:
            kinds.add(DRIVER_KINDS[driver_of(d.split(",", 1)[0])])
        except InvalidArgument:
            return KINDS_ALL
    return kinds_mask(kinds) if kinds else KINDS_ALL


def kinds_of_ports(ports: "Ports", ids=None) -> int:
    """The mask of the kinds of the ports ``ids`` (default: every port open in ``ports``);
    ``KINDS_ALL`` when none is open."""
    ids = list(ports.ids()) if ids is None else list(ids)
    kinds = {int(ports.state.port[p, P_KIND]) for p in ids}
    kinds.discard(K_NONE)
    return kinds_mask(kinds) if kinds else KINDS_ALL


class Ports:
    """The ports of one domain.  ``pool``: the mbuf pool Rx allocates from for the ports
    opened without their own."""

    def __init__(self, pool: PktmbufPool):
        if not isinstance(pool, PktmbufPool):
            raise InvalidArgument(f"pool must be a PktmbufPool, got {type(pool).__name__}")
        self.pool = pool
        self.domain = pool.domain
        self.state = ETHDEV.create()
        self.state.hdr[H_DOM] = self.domain.state.address
        self._ports: dict[int, object] = {}
        self._lock = threading.Lock()

    # -- opening ---------------------------------------------------------------------------
    def open(self, device: str, *, pool: PktmbufPool | None = None, **kw):
        """Open a port from a DPDK device string; returns the port object (its ``port_id``
        is its id in this table).  ``kw`` goes to the driver (``nb_rx_queues``, ...)."""
        name, args = parse_devargs(device)
        if any(p.name == name for p in self._ports.values()):
            raise InvalidArgument(f"a port named {name!r} is open already")
        drv = driver_of(name)
        mod, cls = DRIVERS[drv]
        factory = getattr(importlib.import_module(mod), cls)
        pool = self.pool if pool is None else pool
        with self._lock:
            pid = self._free_id()
            self._ports[pid] = None                  # reserved while the driver sets up
        try:
            port = factory.from_devargs(name, args, pool, port_id=pid, **kw)
        except BaseException:
            with self._lock:
                del self._ports[pid]
            raise
        self._enter(pid, port)
        return port

    def add(self, port):
        """Enter a port built directly (``RingPort(...)``, ``MemifPort(Memif(...))``) under its
        own ``port_id``; returns it."""
        pid = check_count(getattr(port, "port_id", None), "port.port_id", lo=0, hi=MAX_PORTS - 1)
        with self._lock:
            if pid in self._ports:
                raise InvalidArgument(f"port id {pid} is taken")
            self._ports[pid] = None
        self._enter(pid, port)
        return port

    def _free_id(self) -> int:
        pid = next((i for i in range(MAX_PORTS) if i not in self._ports), None)
        if pid is None:
            raise InvalidArgument(f"at most {MAX_PORTS} ports")
        return pid

    def _enter(self, pid: int, port) -> None:
        try:
            if port.pool.domain is not self.domain:
                raise InvalidArgument("the port's pool is in another domain than the table's")
            nrx, ntx = int(port.nb_rx_queues), int(port.nb_tx_queues)
            if nrx > MAX_QUEUES or ntx > MAX_QUEUES:
                raise InvalidArgument(f"a port has at most {MAX_QUEUES} queues per direction")
            t = self.state
            for i in range(nrx):
                t.rxq[pid, i] = port.rx_queue(i).address
            for i in range(ntx):
                t.txq[pid, i] = port.tx_queue(i).address
            t.port[pid, P_NB_RX] = nrx
            t.port[pid, P_NB_TX] = ntx
            t.port[pid, P_KIND] = port.kind          # last: the port is live from here on
        except BaseException:
            with self._lock:
                del self._ports[pid]
            self.state.port[pid, :] = 0
            port.close()
            raise
        with self._lock:
            self._ports[pid] = port

    # -- access ----------------------------------------------------------------------------
    def __getitem__(self, pid: int):
        p = self._ports.get(pid)
        if p is None:
            raise InvalidArgument(f"no port {pid}")
        return p

    def __iter__(self):
        return iter([self._ports[i] for i in sorted(self._ports) if self._ports[i] is not None])

    def __len__(self) -> int:
        return sum(1 for p in self._ports.values() if p is not None)

    def ids(self) -> list[int]:
        return [p.port_id for p in self]

    # -- closing ---------------------------------------------------------------------------
    def close_port(self, pid: int) -> None:
        """Take port ``pid`` out of the table, then close it."""
        port = self[pid]
        self.state.port[pid, P_KIND] = K_NONE        # first: bursts on it return 0 from here
        self.state.port[pid, :] = 0
        self.state.rxq[pid, :] = 0
        self.state.txq[pid, :] = 0
        with self._lock:
            del self._ports[pid]
        port.close()

    def close(self) -> None:
        """Close every port (idempotent)."""
        for pid in sorted(p for p, v in self._ports.items() if v is not None):
            self.close_port(pid)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"Ports({', '.join(f'{p.port_id}:{p.name}' for p in self)})"
