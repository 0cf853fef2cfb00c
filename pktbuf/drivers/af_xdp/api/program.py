"""The XDP program of a ``net_af_xdp`` port: attaching it (native, else generic, with clear
refusals) and sharing one between processes.

Only one XDP program can be attached to an interface, so processes that each own some of its
queues (``pktbuf fwd --workers N``) share one: :class:`SharedXdpProgram` loads and attaches it
with an XSKMAP entry per queue, and each process opens its port with
``xsk_map=<owner pid>:<map fd>`` (:func:`parse_xsk_map`).  See :mod:`.af_xdp` and
docs/af_xdp.md.
"""
from __future__ import annotations

import errno
import os
import socket

from ....errors import Busy, InvalidArgument, NoSuchInterface
from ...common.api.netif import if_index, if_mtu, if_rx_queues
from ...common.api.port import int_arg
from .bpf import XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE, XdpProgram
from .xsk import xsk_error

__all__ = ["SharedXdpProgram", "parse_xsk_map", "attach_program", "check_queues"]

DRIVER = "net_af_xdp"
XDP_MODES = ("auto", "native", "generic")


def parse_xsk_map(value) -> tuple[int, int]:
    """``"<pid>:<fd>"`` -> ``(pid, fd)``; ``InvalidArgument`` for anything else."""
    d = DRIVER
    if isinstance(value, tuple) and len(value) == 2:
        pid, fd = value
    elif isinstance(value, str) and value.count(":") == 1:
        a, b = value.split(":")
        if not (a.isdigit() and b.isdigit()):
            raise InvalidArgument(f"{d}: xsk_map={value!r} is not <owner pid>:<map fd>")
        pid, fd = int(a), int(b)
    else:
        raise InvalidArgument(f"{d}: xsk_map={value!r} is not <owner pid>:<map fd>")
    pid = int_arg(d, "xsk_map pid", pid, 1, (1 << 22))
    fd = int_arg(d, "xsk_map fd", fd, 0, (1 << 20))
    return pid, fd


def check_queues(probe, iface: str, first: int, count: int, what: str) -> None:
    """``InvalidArgument`` unless queues ``first .. first + count - 1`` exist on ``iface``
    (when its driver says how many it has)."""
    n = if_rx_queues(probe, iface)
    if n is not None and first + count > n:
        want = f"queue {first}" if count == 1 else f"queues {first}..{first + count - 1}"
        raise InvalidArgument(f"{DRIVER}: {what} needs {want} of {iface!r}, which has only "
                              f"{n} Rx queue{'s' if n != 1 else ''} (0..{n - 1})")


def attach_program(prog: XdpProgram, ifindex: int, iface: str, mtu: int,
                    xdp_mode: str) -> str:
    """Attach ``prog`` to ``iface`` in ``xdp_mode``; the mode it got, or a clear refusal."""
    d = DRIVER
    modes = {"auto": [("native", XDP_FLAGS_DRV_MODE), ("generic", XDP_FLAGS_SKB_MODE)],
             "native": [("native", XDP_FLAGS_DRV_MODE)],
             "generic": [("generic", XDP_FLAGS_SKB_MODE)]}[xdp_mode]
    err = None
    for mode, fl in modes:
        try:
            prog.attach(ifindex, fl)
            return mode
        except OSError as e:
            err = e
            if e.errno == errno.EBUSY:
                raise Busy(f"{d}: another XDP program is attached to {iface!r} "
                           "(EBUSY; e.g. through netlink by ip link, libxdp or DPDK, "
                           "which outlives its process: detach it with `ip link set dev "
                           f"{iface} xdp off`; or another pktbuf port has it: share it "
                           "with xsk_map=)") from None
            if e.errno == errno.ERANGE and mode == "native":
                continue           # veth: native XDP refuses an MTU over ~3506
            if mode == "native" and xdp_mode == "auto" and e.errno in (
                    errno.EOPNOTSUPP, errno.EINVAL):
                continue
            break
    if err.errno == errno.ERANGE:
        raise InvalidArgument(f"{d}: {iface!r} refuses native XDP at MTU {mtu} "
                              "for a single-buffer program (ERANGE); use xdp_mode='auto' "
                              "or 'generic', or a smaller MTU") from None
    raise xsk_error(err, "BPF_LINK_CREATE (attach the XDP program)", iface)


class SharedXdpProgram:
    """The redirect program of ``iface``, attached by this process for ports that other
    processes (or this one) open on its queues with ``xsk_map=`` :attr:`xsk_map`.

    ``start_queue``, ``queues``: the queues it is for (each must exist: ``InvalidArgument``
    otherwise); its XSKMAP has ``start_queue + queues`` entries, all empty until ports put
    their sockets in.  It stays attached until :meth:`close` or until this process ends, however
    it ends (a BPF link, nothing pinned).  Open it in the interface's network namespace."""

    def __init__(self, iface: str, queues: int, *, start_queue: int = 0,
                 xdp_mode: str = "auto"):
        d = DRIVER
        if not isinstance(iface, str) or not iface or len(iface.encode()) >= 16 or "/" in iface:
            raise InvalidArgument(f"{d}: iface={iface!r} is not an interface name "
                                  "(1 to 15 bytes)")
        self.start_queue = int_arg(d, "start_queue", start_queue, 0, 0xFFFF)
        self.queues = int_arg(d, "queues", queues, 1, 0xFFFF)
        if xdp_mode not in XDP_MODES:
            raise InvalidArgument(f"{d}: xdp_mode={xdp_mode!r}; one of {', '.join(XDP_MODES)}")
        self.iface = iface
        self.prog = None
        self.xdp_mode = None
        try:
            probe = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except OSError as e:
            raise xsk_error(e, "socket(AF_PACKET) for interface queries", iface) from None
        try:
            try:
                self.ifindex = if_index(probe, iface)
            except OSError:
                raise NoSuchInterface(f"{d}: no interface {iface!r} in this network "
                                      "namespace") from None
            check_queues(probe, iface, self.start_queue, self.queues,
                          f"a shared program for {self.queues} queue(s) from "
                          f"start_queue={self.start_queue}")
            mtu = if_mtu(probe, iface)
        finally:
            probe.close()
        self.prog = XdpProgram(self.start_queue + self.queues)
        try:
            self.xdp_mode = attach_program(self.prog, self.ifindex, iface, mtu, xdp_mode)
        except BaseException:
            self.close()
            raise
        self.pid = os.getpid()

    @property
    def xsk_map(self) -> str:
        """The device argument value of the ports that use it: ``<pid>:<map fd>``."""
        if self.prog is None:
            raise InvalidArgument(f"{DRIVER}: the shared XDP program of {self.iface!r} "
                                  "is closed")
        return f"{self.pid}:{self.prog.map_fd}"

    def close(self) -> None:
        """Detach the program (the link closes); the ports' sockets stay open but get no
        more frames."""
        if self.prog is not None:
            self.prog.close()
            self.prog = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
