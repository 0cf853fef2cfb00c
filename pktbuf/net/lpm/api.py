"""The LPM facade: :class:`Lpm` (IPv4, ``rte_lpm``) and :class:`Lpm6` (IPv6, ``rte_lpm6``).

Thin classes over the kernels of :mod:`.lpm4` / :mod:`.lpm6`: they check every argument first
(so a bad call leaves the table as it was), accept addresses as ints, :mod:`ipaddress` objects
or strings (and NumPy arrays in bulk), and turn kernel codes into :mod:`pktbuf.errors`
exceptions.  ``.block`` is the table block the kernels take, for your own ``@njit`` code::

    from pktbuf.net.lpm.lpm4 import lpm_lookup
    @njit
    def route(tbl, ips, out):
        for i in range(ips.size):
            out[i] = lpm_lookup(tbl, ips[i])
    route(lpm.block, ips, out)
"""
from __future__ import annotations

import ctypes
import ipaddress
import mmap
import os

import numpy as np

from ...errors import InvalidArgument, NoRoom, NoSuchRule, OutOfRange, check_count, raise_for
from . import layout as L
from .lpm4 import (lpm_add, lpm_add_bulk, lpm_delete, lpm_delete_all, lpm_is_rule_present, lpm_lookup,
                   lpm_lookup_bulk, lpm_lookupx4)
from .lpm6 import (lpm6_add, lpm6_delete, lpm6_delete_all, lpm6_is_rule_present, lpm6_lookup,
                   lpm6_lookup_bulk)

__all__ = ["Lpm", "Lpm6", "NoSuchRule"]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_MADV_HUGEPAGE = 14


def _resident_bytes(address: int, size: int) -> int:
    """Bytes of ``[address, address + size)`` in RAM now (``mincore``)."""
    page = mmap.PAGESIZE
    n = (size + page - 1) // page
    vec = np.zeros(n, np.uint8)
    if _libc.mincore(address, n * page, vec.ctypes.data) != 0:
        return -1
    return int(np.count_nonzero(vec & 1)) * page


def _nh(v, bits: int) -> int:
    x = check_count(v, "next_hop")
    if x >= 1 << bits:
        raise OutOfRange(f"next_hop must be below 2^{bits}, got {x:#x}")
    return x


class _Table:
    BITS = 32
    NH_BITS = 24
    MAX_TBL8 = L.MAX_TBL8_GROUPS
    _ipcls = ipaddress.IPv4Address

    def __init__(self, max_rules, number_tbl8s, *, shared: bool = False,
                 hugepages: bool = True):
        mr = check_count(max_rules, "max_rules", lo=1, hi=(1 << 32) - 1)
        nt = check_count(number_tbl8s, "number_tbl8s", lo=1, hi=self.MAX_TBL8)
        self._blk = self._create(mr, nt, shared=bool(shared))
        self.max_rules = mr
        self.number_tbl8s = nt
        if hugepages and not shared:
            # transparent huge pages for the 64 MiB tbl24: a random lookup then misses the
            # TLB far less often (DPDK gets the same from its hugepage memory)
            _libc.madvise(self._blk.address, self._blk.memory.size, _MADV_HUGEPAGE)

    # -- arguments -------------------------------------------------------------------------
    def _addr(self, a) -> int:
        if isinstance(a, (bool, np.bool_)):
            raise InvalidArgument(f"an address must be an int, ipaddress or string, got {a!r}")
        if isinstance(a, str):
            try:
                a = self._ipcls(a.strip())
            except ValueError as e:
                raise InvalidArgument(str(e)) from None
        if isinstance(a, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
            if not isinstance(a, self._ipcls):
                raise InvalidArgument(f"{a} is not an IPv{self._ipcls.version} address")
            return int(a)
        try:
            v = check_count(a, "address", lo=0)
        except InvalidArgument:
            raise InvalidArgument(f"an address must be an int, ipaddress or string, got "
                                  f"{type(a).__name__}") from None
        if v >= 1 << self.BITS:
            raise OutOfRange(f"address {v:#x} does not fit in {self.BITS} bits")
        return v

    def _depth(self, d) -> int:
        return check_count(d, "depth", lo=1, hi=self.BITS)

    # -- common verbs ----------------------------------------------------------------------
    @property
    def block(self):
        """The table block the kernels take (one pointer in compiled code)."""
        return self._blk

    def __len__(self) -> int:
        return int(self._blk.meta[L.M_USED_RULES])

    @property
    def groups_used(self) -> int:
        """tbl8 groups in use."""
        return int(self._blk.meta[L.M_TBL8_USED])

    def memory(self) -> dict:
        """``reserved``: bytes of the block (address space); ``resident``: of those, in RAM."""
        mem = self._blk.memory
        return {"reserved": int(mem.size), "resident": _resident_bytes(mem.address, mem.size)}

    def add(self, prefix, depth, next_hop) -> None:
        """Add ``prefix/depth`` -> ``next_hop`` (or re-point an existing rule).  Raises
        :class:`NoRoom` when the rule store or the tbl8 groups are exhausted (nothing
        changed)."""
        ip, d, nh = self._addr(prefix), self._depth(depth), _nh(next_hop, self.NH_BITS)
        raise_for(self._add(ip, d, nh), f"no room for {self._show(ip, d)}")

    def delete(self, prefix, depth) -> None:
        """Remove the rule ``prefix/depth``; :class:`NoSuchRule` if there is none."""
        ip, d = self._addr(prefix), self._depth(depth)
        if self._delete(ip, d) < 0:
            raise NoSuchRule(f"no rule {self._show(ip, d)}")

    def is_rule_present(self, prefix, depth):
        """The rule's next hop, or None."""
        ip, d = self._addr(prefix), self._depth(depth)
        rc, nh = self._present(ip, d)
        return int(nh) if rc == 1 else None

    def lookup(self, addr):
        """The next hop of ``addr``, or None on a miss."""
        r = self._lookup(self._addr(addr))
        return int(r) if r >= 0 else None

    def _show(self, ip, d) -> str:
        return f"{self._ipcls(ip)}/{d}"


class Lpm(_Table):
    """IPv4 longest-prefix match (DPDK's ``rte_lpm``, DIR-24-8); ``max_rules`` rules and
    ``number_tbl8s`` groups of 256 entries for routes longer than /24.  Next hops < 2^24.
    ``shared=True`` puts the table in a memfd (``block.memory.fd``) for other processes;
    ``domain=`` (a :class:`~pktbuf.SharedDomain`, its primary) with ``name=`` also registers it
    there, so that every attached process finds it with :meth:`attach`.

    One process changes the table (add, delete); any number look up at the same time, here or
    in processes that attached it, and every lookup returns the next hop in force before or
    after the change in flight (``docs/lpm.md``, "Readers during updates")."""

    def __init__(self, max_rules, number_tbl8s, *, shared: bool = False,
                 hugepages: bool = True, domain=None, name: str | None = None):
        if domain is not None:
            if not isinstance(name, str):
                raise InvalidArgument("a table placed in a shared domain needs name= (a str)")
            region = getattr(domain, "region", None)
            if not callable(region) or not getattr(domain, "primary", False):
                raise InvalidArgument("domain= takes the SharedDomain this process created "
                                      f"(its primary), got {domain!r}")
            shared = True
        elif name is not None:
            raise InvalidArgument("name= names the table in a shared domain: give domain= too")
        super().__init__(max_rules, number_tbl8s, shared=shared, hugepages=hugepages)
        if domain is not None:
            domain.add_region(name, self._blk.memory)

    @classmethod
    def attach(cls, source, name: str | None = None) -> "Lpm":
        """The table another process made: ``attach(domain, name)`` for one registered in a
        :class:`~pktbuf.SharedDomain` this process attached to, or ``attach(fd)`` for its
        memfd (adopted: closed with the table).  Raises :class:`InvalidArgument` when the
        memory does not hold an IPv4 LPM table of this pktbuf."""
        from ...shm import Region
        if isinstance(source, (int, np.integer)) and not isinstance(source, bool):
            if name is not None:
                raise InvalidArgument("attach(fd) takes no name")
            fd = check_count(source, "fd", hi=(1 << 31) - 1)
            try:
                size = os.fstat(fd).st_size
            except OSError as e:
                raise InvalidArgument(f"fd {fd}: {e.strerror}") from None
            if size <= 0:
                raise InvalidArgument(f"fd {fd} holds no table")
            mem = Region.attach(fd, size, "pktbuf-lpm4-peer")
        else:
            if not callable(getattr(source, "region", None)) or not isinstance(name, str):
                raise InvalidArgument("attach takes (shared domain, name) or (fd)")
            mem = source.region(name)
        try:
            blk = L.attach4(mem)
        except (ValueError, InvalidArgument) as e:
            raise InvalidArgument(f"not an IPv4 LPM table: {e}") from None
        self = cls.__new__(cls)
        self._blk = blk
        self.max_rules = int(blk.meta[L.M_MAX_RULES])
        self.number_tbl8s = int(blk.meta[L.M_NTBL8])
        return self

    def _create(self, mr, nt, shared):
        return L.create4(mr, nt, shared=shared)

    def _add(self, ip, d, nh):
        return lpm_add(self._blk, ip, d, nh)

    def _delete(self, ip, d):
        return lpm_delete(self._blk, ip, d)

    def _present(self, ip, d):
        return lpm_is_rule_present(self._blk, ip, d)

    def _lookup(self, ip):
        return lpm_lookup(self._blk, ip)

    def delete_all(self) -> None:
        lpm_delete_all(self._blk)

    def _addrs(self, addrs) -> np.ndarray:
        if isinstance(addrs, np.ndarray) and addrs.dtype.kind in "iu":
            if addrs.ndim != 1:
                raise InvalidArgument(f"addresses must be 1-d, got shape {addrs.shape}")
            if addrs.size and (int(addrs.min()) < 0 or int(addrs.max()) >= 1 << 32):
                raise OutOfRange("addresses must be in [0, 2^32)")
            return np.ascontiguousarray(addrs, np.uint32)
        if isinstance(addrs, (str, bytes)) or not hasattr(addrs, "__len__"):
            raise InvalidArgument("addresses must be a sequence or a 1-d integer array")
        return np.array([self._addr(a) for a in addrs], np.uint32)

    def add_bulk(self, prefixes, depths, next_hops, *, progress=None) -> None:
        """Add ``prefixes[i]/depths[i] -> next_hops[i]`` in order, in one compiled call (the
        way to push many routes from Python: a few hundred nanoseconds per route instead of
        a call each).  Every argument is checked before the first add (a bad one changes
        nothing).  ``progress``: an int64 array whose element 0 is raised by one after each
        add with a release store -- readers of a shared table can tell which adds were in
        force.  Raises :class:`NoRoom` if the table fills up: the adds before the one that
        did not fit stay (as many :meth:`add` calls would), the message says how many."""
        ips = self._addrs(prefixes)
        d = np.asarray(depths)
        h = np.asarray(next_hops)
        if d.ndim != 1 or h.ndim != 1 or d.size != ips.size or h.size != ips.size:
            raise InvalidArgument(f"prefixes, depths and next_hops must be 1-d and of one "
                                  f"length, got {ips.size}, {d.shape}, {h.shape}")
        if d.size and (d.dtype.kind not in "iu" or int(d.min()) < 1 or int(d.max()) > 32):
            raise InvalidArgument("depths must be integers in 1..32")
        if h.size and (h.dtype.kind not in "iu" or int(h.min()) < 0
                       or int(h.max()) >= 1 << self.NH_BITS):
            raise OutOfRange(f"next_hops must be integers in [0, 2^{self.NH_BITS})")
        if progress is None:
            progress = np.zeros(1, np.int64)
        elif not (isinstance(progress, np.ndarray) and progress.dtype == np.int64
                  and progress.ndim == 1 and progress.size >= 1 and progress.flags.writeable):
            raise InvalidArgument("progress must be a writeable 1-d int64 array")
        d = np.ascontiguousarray(d, np.int64)
        h = np.ascontiguousarray(h, np.int64)
        before = int(progress[0])
        rc = lpm_add_bulk(self._blk, ips, d, h, ips.size, progress)
        if rc < 0:
            done = int(progress[0]) - before
            i = done
            raise_for(rc, f"no room for {self._show(int(ips[i]), int(d[i]))} (adds "
                          f"{done} of {ips.size} were made)")

    def lookup_bulk(self, addrs, out=None) -> np.ndarray:
        """``rte_lpm_lookup_bulk``: ``out[i]`` (uint32) = the raw table entry for ``addrs[i]``
        -- a hit has bit 24 (``0x01000000``) set and the next hop in bits 0-23."""
        a = self._addrs(addrs)
        if out is None:
            out = np.empty(a.size, np.uint32)
        elif not (isinstance(out, np.ndarray) and out.dtype == np.uint32 and out.ndim == 1
                  and out.flags.c_contiguous and out.flags.writeable):
            raise InvalidArgument("out must be a writeable contiguous 1-d uint32 array")
        elif out.size < a.size:
            raise InvalidArgument(f"out has {out.size} slots for {a.size} addresses")
        lpm_lookup_bulk(self._blk, a, out, a.size)
        return out

    def lookupx4(self, addrs, defv: int = 0xFFFFFFFF) -> list:
        """``rte_lpm_lookupx4``: next hops of four addresses, ``defv`` for a miss."""
        a = self._addrs(addrs)
        if a.size != 4:
            raise InvalidArgument(f"lookupx4 takes 4 addresses, got {a.size}")
        hop = np.empty(4, np.uint32)
        lpm_lookupx4(self._blk, a, hop, check_count(defv, "defv", hi=(1 << 32) - 1))
        return [int(x) for x in hop]


class Lpm6(_Table):
    """IPv6 longest-prefix match (DPDK's ``rte_lpm6``): ``max_rules`` rules, ``number_tbl8s``
    groups (at most 2^21).  Next hops < 2^21."""

    BITS = 128
    NH_BITS = 21
    MAX_TBL8 = L.MAX_TBL8_GROUPS6
    _ipcls = ipaddress.IPv6Address

    def _create(self, mr, nt, shared):
        return L.create6(mr, nt, shared=shared)

    @staticmethod
    def _bytes(ip: int) -> np.ndarray:
        return np.frombuffer(ip.to_bytes(16, "big"), np.uint8).copy()

    def _add(self, ip, d, nh):
        return lpm6_add(self._blk, self._bytes(ip), d, nh)

    def _delete(self, ip, d):
        return lpm6_delete(self._blk, self._bytes(ip), d)

    def _present(self, ip, d):
        return lpm6_is_rule_present(self._blk, self._bytes(ip), d)

    def _lookup(self, ip):
        return lpm6_lookup(self._blk, self._bytes(ip))

    def delete_all(self) -> None:
        lpm6_delete_all(self._blk)

    def _addrs(self, addrs) -> np.ndarray:
        if isinstance(addrs, np.ndarray) and addrs.dtype == np.uint8:
            if addrs.ndim != 2 or addrs.shape[1] != 16:
                raise InvalidArgument(f"addresses must have shape (n, 16), got {addrs.shape}")
            return np.ascontiguousarray(addrs)
        if isinstance(addrs, (str, bytes, np.ndarray)) or not hasattr(addrs, "__len__"):
            raise InvalidArgument("addresses must be a sequence or an (n, 16) uint8 array")
        out = np.empty((len(addrs), 16), np.uint8)
        for i, x in enumerate(addrs):
            out[i] = self._bytes(self._addr(x))
        return out

    def lookup_bulk(self, addrs, out=None) -> np.ndarray:
        """``rte_lpm6_lookup_bulk_func``: ``out[i]`` (int32) = next hop of ``addrs[i]``, -1 on
        a miss."""
        a = self._addrs(addrs)
        n = a.shape[0]
        if out is None:
            out = np.empty(n, np.int32)
        elif not (isinstance(out, np.ndarray) and out.dtype == np.int32 and out.ndim == 1
                  and out.flags.c_contiguous and out.flags.writeable):
            raise InvalidArgument("out must be a writeable contiguous 1-d int32 array")
        elif out.size < n:
            raise InvalidArgument(f"out has {out.size} slots for {n} addresses")
        lpm6_lookup_bulk(self._blk, a, out, n)
        return out
