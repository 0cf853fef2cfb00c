"""The XDP program of an AF_XDP port, loaded and attached with the raw ``bpf()`` system call.

What it does: ``return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS)`` -- a frame
that arrives on a queue with a socket in the XSKMAP goes to that socket, every other frame
goes on to the kernel's stack (the ``XDP_PASS`` in the low bits of the helper's flags is what
it returns when the queue has no entry; Linux >= 5.3).  Six instructions, written out below,
no ELF object, no libbpf.

It is attached with ``BPF_LINK_CREATE`` (Linux >= 5.9), not through netlink as libxdp and
DPDK 22.11 do: the link is a file descriptor, so the program goes away when the port closes
it -- or when the process dies, however it dies.  A netlink attachment outlives its owner and
makes the next attach fail with ``EBUSY``.  The UAPI: ``linux/bpf.h`` (``union bpf_attr``,
``struct bpf_insn``, ``struct xdp_md``), ``linux/if_link.h`` (``XDP_FLAGS_*``).

A program can be shared between processes (``pktbuf fwd --workers N``: one interface, one
program, one queue per worker): its owner keeps the link, program and map; another process
takes a duplicate of the map's fd with ``pidfd_getfd`` (:meth:`XskMap.from_process`, Linux >=
5.6, ptrace access to the owner: root, or the same user without Yama restrictions) and puts
its own sockets in it.  Nothing is pinned in bpffs, so nothing outlives the owner: when it
exits or is killed the link goes and the program with it, and the other processes' map fds
point at a map no program uses any more.
"""
from __future__ import annotations

import ctypes
import errno
import os
import struct

from ....errors import InvalidArgument, PermissionDenied, PortError

__all__ = ["XdpProgram", "XskMap", "bpf", "redirect_program", "map_info", "pidfd_getfd",
           "XDP_FLAGS_SKB_MODE", "XDP_FLAGS_DRV_MODE"]

SYS_BPF = 321                   # x86_64
SYS_PIDFD_GETFD = 438
BPF_MAP_CREATE = 0
BPF_MAP_UPDATE_ELEM = 2
BPF_MAP_DELETE_ELEM = 3
BPF_PROG_LOAD = 5
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_LINK_CREATE = 28
BPF_MAP_TYPE_XSKMAP = 17
BPF_PROG_TYPE_XDP = 6
BPF_XDP = 37                    # attach type
BPF_PSEUDO_MAP_FD = 1
BPF_FUNC_redirect_map = 51
XDP_PASS = 2
XDP_FLAGS_SKB_MODE = 2          # generic XDP (in the stack, any driver)
XDP_FLAGS_DRV_MODE = 4          # native XDP (in the driver)
ATTR_SIZE = 144                 # sizeof(union bpf_attr), Linux 6.1 UAPI
XDP_MD_RX_QUEUE_INDEX = 16      # offsetof(struct xdp_md, rx_queue_index)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def bpf(cmd: int, attr: bytes | bytearray) -> int:
    """``bpf(cmd, attr, sizeof attr)``: the fd or value it returns; ``OSError`` on failure."""
    buf = ctypes.create_string_buffer(bytes(attr), len(attr))
    r = _libc.syscall(ctypes.c_long(SYS_BPF), ctypes.c_int(cmd), buf, ctypes.c_uint(len(attr)))
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return int(r)


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    """One ``struct bpf_insn``: opcode, dst_reg in the low nibble, src_reg in the high one."""
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def redirect_program(map_fd: int) -> bytes:
    """The instructions of the redirect program for the XSKMAP ``map_fd``."""
    return b"".join((
        _insn(0x61, dst=2, src=1, off=XDP_MD_RX_QUEUE_INDEX),   # r2 = ctx->rx_queue_index
        _insn(0x18, dst=1, src=BPF_PSEUDO_MAP_FD, imm=map_fd),  # r1 = &xsks_map (ld_imm64,
        _insn(0x00),                                             # ... its second half)
        _insn(0xB7, dst=3, imm=XDP_PASS),                       # r3 = XDP_PASS
        _insn(0x85, imm=BPF_FUNC_redirect_map),                 # r0 = redirect_map(r1, r2, r3)
        _insn(0x95),                                             # return r0
    ))


def _attr(fmt: str, *vals) -> bytearray:
    b = bytearray(ATTR_SIZE)
    struct.pack_into(fmt, b, 0, *vals)
    return b


class XdpProgram:
    """An XSKMAP of ``queues`` entries and the redirect program over it, not attached yet.

    :meth:`attach` links it to an interface; :meth:`set_socket` puts an AF_XDP socket at a
    queue's key.  :meth:`close` closes the link, program and map fds: the kernel detaches the
    program with the last of them."""

    def __init__(self, queues: int, name: str = "pktbuf_xsk"):
        self.map_fd = self.prog_fd = self.link_fd = -1
        self.log = ""
        try:
            self.map_fd = bpf(BPF_MAP_CREATE, _attr("<IIIII", BPF_MAP_TYPE_XSKMAP, 4, 4,
                                                    queues, 0))
        except OSError as e:
            raise _bpf_error(e, "BPF_MAP_CREATE (XSKMAP)") from None
        code = redirect_program(self.map_fd)
        insns = ctypes.create_string_buffer(code, len(code))
        lic = ctypes.create_string_buffer(b"BSD")
        logbuf = ctypes.create_string_buffer(4096)
        a = _attr("<IIQQIIQII", BPF_PROG_TYPE_XDP, len(code) // 8, ctypes.addressof(insns),
                  ctypes.addressof(lic), 1, len(logbuf), ctypes.addressof(logbuf), 0, 0)
        a[48:48 + len(name)] = name.encode()[:15]
        try:
            self.prog_fd = bpf(BPF_PROG_LOAD, a)
        except OSError as e:
            self.log = logbuf.value.decode(errors="replace")
            self.close()
            raise _bpf_error(e, f"BPF_PROG_LOAD ({self.log.strip()[-200:]})") from None
        self.log = logbuf.value.decode(errors="replace")

    def attach(self, ifindex: int, flags: int = 0) -> None:
        """``BPF_LINK_CREATE`` on interface ``ifindex`` (``flags``: 0 = native if the driver
        has it, else generic; or ``XDP_FLAGS_SKB_MODE`` / ``XDP_FLAGS_DRV_MODE``)."""
        self.link_fd = bpf(BPF_LINK_CREATE, _attr("<IIII", self.prog_fd, ifindex, BPF_XDP,
                                                  flags))

    def set_socket(self, queue: int, xsk_fd: int) -> None:
        _map_set(self.map_fd, queue, xsk_fd)

    def clear_socket(self, queue: int) -> None:
        _map_delete(self.map_fd, queue)

    def close(self) -> None:
        for a in ("link_fd", "prog_fd", "map_fd"):
            fd = getattr(self, a)
            if fd >= 0:
                os.close(fd)
                setattr(self, a, -1)


def _map_set(map_fd: int, queue: int, xsk_fd: int) -> None:
    key = ctypes.c_uint32(queue)
    val = ctypes.c_uint32(xsk_fd)
    bpf(BPF_MAP_UPDATE_ELEM, _attr("<IIQQQ", map_fd, 0, ctypes.addressof(key),
                                   ctypes.addressof(val), 0))


def _map_delete(map_fd: int, queue: int) -> None:
    key = ctypes.c_uint32(queue)
    try:
        bpf(BPF_MAP_DELETE_ELEM, _attr("<IIQ", map_fd, 0, ctypes.addressof(key)))
    except OSError:
        pass                    # not there (its socket closed, or never set)


def pidfd_getfd(pid: int, fd: int) -> int:
    """A duplicate, in this process, of fd ``fd`` of process ``pid`` (``pidfd_open`` +
    ``pidfd_getfd``); ``OSError`` on failure (``ESRCH``: no such process, ``EBADF``: no such
    fd, ``EPERM``: no ptrace access to it)."""
    pfd = os.pidfd_open(pid)
    try:
        r = _libc.syscall(ctypes.c_long(SYS_PIDFD_GETFD), ctypes.c_int(pfd), ctypes.c_int(fd),
                          ctypes.c_uint(0))
        if r < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return int(r)
    finally:
        os.close(pfd)


def map_info(fd: int) -> dict:
    """``BPF_OBJ_GET_INFO_BY_FD`` of a map: ``type``, ``id``, ``key_size``, ``value_size``,
    ``max_entries``; ``OSError`` (``EINVAL``) when ``fd`` is not a BPF object."""
    info = ctypes.create_string_buffer(88)
    bpf(BPF_OBJ_GET_INFO_BY_FD, _attr("<IIQ", fd, len(info), ctypes.addressof(info)))
    t, i, ks, vs, me = struct.unpack_from("<IIIII", info.raw, 0)
    return {"type": t, "id": i, "key_size": ks, "value_size": vs, "max_entries": me}


class XskMap:
    """Another process's XSKMAP, through a duplicate of its fd (see the module docstring).

    ``from_process(pid, fd)`` checks what it got: a BPF map of type XSKMAP, 4-byte keys and
    values; :meth:`set_socket` / :meth:`clear_socket` as :class:`XdpProgram`'s."""

    def __init__(self, map_fd: int, max_entries: int, owner: int):
        self.map_fd = map_fd
        self.max_entries = max_entries
        self.owner = owner

    @classmethod
    def from_process(cls, pid: int, fd: int, what: str = "net_af_xdp") -> "XskMap":
        w = f"{what}: xsk_map={pid}:{fd}"
        try:
            mfd = pidfd_getfd(pid, fd)
        except OSError as e:
            if e.errno == errno.ESRCH:
                raise InvalidArgument(f"{w}: there is no process {pid}") from None
            if e.errno == errno.EBADF:
                raise InvalidArgument(f"{w}: process {pid} has no fd {fd}") from None
            if e.errno in (errno.EPERM, errno.EACCES):
                raise PermissionDenied(f"{w}: no access to process {pid}'s fds "
                                       "(pidfd_getfd needs ptrace access: root or "
                                       "CAP_SYS_PTRACE)") from None
            raise PortError(f"{w}: pidfd_getfd: {e.strerror}") from None
        try:
            info = map_info(mfd)
        except OSError:
            os.close(mfd)
            raise InvalidArgument(f"{w}: fd {fd} of process {pid} is not a BPF map") from None
        if (info["type"], info["key_size"], info["value_size"]) != (BPF_MAP_TYPE_XSKMAP, 4, 4):
            os.close(mfd)
            raise InvalidArgument(f"{w}: fd {fd} of process {pid} is a BPF map of type "
                                  f"{info['type']} ({info['key_size']}-byte keys, "
                                  f"{info['value_size']}-byte values), not an XSKMAP "
                                  f"(type {BPF_MAP_TYPE_XSKMAP})")
        return cls(mfd, info["max_entries"], pid)

    def set_socket(self, queue: int, xsk_fd: int) -> None:
        _map_set(self.map_fd, queue, xsk_fd)

    def clear_socket(self, queue: int) -> None:
        _map_delete(self.map_fd, queue)

    def close(self) -> None:
        if self.map_fd >= 0:
            os.close(self.map_fd)
            self.map_fd = -1


def _bpf_error(e: OSError, what: str) -> Exception:
    if e.errno in (errno.EPERM, errno.EACCES):
        return PermissionDenied(f"net_af_xdp: {what}: {e.strerror} (loading an XDP program "
                                "needs CAP_BPF and CAP_NET_ADMIN, or root)")
    if e.errno == errno.EINVAL:
        return InvalidArgument(f"net_af_xdp: {what}: the kernel refused it (EINVAL)")
    return PortError(f"net_af_xdp: {what}: {e.strerror}")
