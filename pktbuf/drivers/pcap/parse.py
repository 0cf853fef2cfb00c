"""Pass 1 of an Rx burst: walk the file's records from the cursor and note each packet.

For up to ``n`` packets, :func:`parse_pcap` (classic pcap) and :func:`parse_pcapng` check every
length and offset against the file and the limits before using it, and fill the queue's scratch
arrays: the data's address in the window, the captured length, the timestamp in ns (-1: none),
the running count of mbufs needed, and the file offset after the record.  Nothing is allocated
and the cursor ``st[S_CUR]`` does not move past a packet here; pass 2 (:mod:`.rx`) commits it.

Everything that is not a plain packet record -- a format error, the end of the file, starting
over (``infinite_rx``), a Section Header or Interface Description Block, moving the window -- is
handled only while the burst holds no packet yet (``npk == 0``); with packets in hand the parse
stops before it and the next burst starts with it.  So an error never costs the valid packets
before it, the window never moves under an address already noted, and the cursor that pass 2
commits never lies before a block whose effect (a new section, an interface) was applied.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from .format import (BT_EPB, BT_IDB, BT_PB, BT_SHB, BT_SPB, BYTE_ORDER_MAGIC, EPB_LEN, IDB_LEN,
                     MAX_BLOCK, MAX_SNAPLEN, MAX_TSOFFSET, MAX_TSRESOL_BIN,
                     MAX_TSRESOL_DEC, NS, OPT_ENDOFOPT, OPT_IF_TSOFFSET, OPT_IF_TSRESOL, PCAP_REC_LEN, SHB_LEN,
                     SPB_LEN, pad4, rd16, rd32)
from .layout import (C_LINKMODE, C_LINKTYPE, C_LOOP, C_NANO, C_SIZE, C_SNAPLIMIT, C_START,
                     C_STRICT, C_SWAP, IF_DIV, IF_LINKTYPE, IF_MUL, IF_OFFSET, IF_SHIFT,
                     IF_SNAPLEN, MAX_IFACES, S_CUR, S_NIF, S_NSWAP, S_SECTION, S_SEEN_PKT,
                     S_SKIPPED, S_SKIPPED_FRAMES, S_WIN_ADDR, S_WIN_OFF, S_WRAPS, SCRATCH_SEGS,
                     V_BLOCK_LEN, V_CAPLEN, V_EMPTY_LOOP, V_IFACE, V_LINKTYPE, V_NO_SHB, V_OPTION,
                     V_SHB, V_TOO_MANY_IFACES, V_TRUNCATED)
from .linktype import (CV_CONVERT, CV_SKIP, ETHER_LEN, LINKTYPE_IPV4, LINKTYPE_IPV6,
                       LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_RAW, LT_ANY,
                       LT_ETHERNET, link_convert)
from .window import R_FAIL, R_OK, R_SHORT, R_STOP, queue_fail, reach, window

__all__ = ["parse_pcap", "parse_pcapng"]

BAD_BYTE_ORDER_MAGIC = 0x4D3C2B1A      # BYTE_ORDER_MAGIC read in the other order
TS_MAX = (1 << 63) - 1


SKIP_FRAME = np.int64(1) << 32     # a skipped frame in the `skips` word (blocks: 1)


@kernel(inline="always")
def _note(q, npk, nseg, addr, caplen, ts, nxt, cap, kind, eh0, eh1, skips):
    """Note packet ``npk`` -- ``caplen`` bytes for its mbufs, from ``addr`` (after the
    14-byte header ``eh0``/``eh1`` when ``kind`` is CV_CONVERT); ``skips``: blocks and frames
    skipped in this burst since its first packet.  Returns the mbufs needed so far, or -1
    when the burst's scratch has no room for its mbufs (the packet is then left for the next
    burst)."""
    segs = 1 if caplen <= cap else (caplen + cap - 1) // cap
    if nseg + segs > SCRATCH_SEGS:
        return -1
    nseg += segs
    q.scr_addr[npk] = addr
    q.scr_cap[npk] = caplen
    q.scr_ts[npk] = ts
    q.scr_end[npk] = nseg
    q.scr_next[npk] = nxt
    q.scr_conv[npk] = 1 if kind == CV_CONVERT else 0
    q.scr_eh0[npk] = eh0
    q.scr_eh1[npk] = eh1
    q.scr_skip[npk] = skips
    return nseg


@kernel(inline="always")
def _skip(q, npk, skips, nxt, what):
    """A block or frame (``what``: 1 or SKIP_FRAME) not delivered, ending at ``nxt``.  With
    no packet in hand it is counted and passed at once; otherwise it is counted with the next
    packet noted (pass 2 commits the count of the packets it takes: a skip after the last of
    them lies beyond the committed cursor, is parsed again by the next burst and counted
    then -- never twice).  Returns the new ``skips``."""
    if npk > 0:
        return skips + what
    st = q.st
    if what == SKIP_FRAME:
        st[S_SKIPPED_FRAMES] += 1
    else:
        st[S_SKIPPED] += 1
    st[S_CUR] = nxt
    return skips


@kernel(inline="always")
def _deliver(w, o, caplen, lt):
    """The record of link type ``lt`` at window offset ``o``: ``(kind, offset of the bytes
    to copy, mbuf length, eh0, eh1)`` (:func:`~.linktype.link_convert`)."""
    kind, drop, eh0, eh1 = link_convert(w, o, caplen, lt)
    plen = caplen - drop + (ETHER_LEN if kind == CV_CONVERT else 0)
    return kind, o + drop, plen, eh0, eh1


@kernel(inline="always")
def _refused(lt, mode):
    """True when an interface of link type ``lt`` is a format error under ``mode``."""
    if lt == 1 or mode == LT_ANY:
        return False
    if mode == LT_ETHERNET:
        return True
    return not (lt == LINKTYPE_RAW or lt == LINKTYPE_LINUX_SLL or lt == LINKTYPE_IPV4
                or lt == LINKTYPE_IPV6 or lt == LINKTYPE_LINUX_SLL2)


@kernel(inline="always")
def _at_end(q, npk):
    """At the end of the file: True to start over (``infinite_rx``, nothing in hand, and the
    file has packets); the caller stops otherwise."""
    if q.cfg[C_LOOP] == 0 or npk > 0:
        return False
    if q.st[S_SEEN_PKT] == 0:
        queue_fail(q, V_EMPTY_LOOP, q.st[S_CUR], 0)
        return False
    q.st[S_CUR] = q.cfg[C_START]
    q.st[S_WRAPS] += 1
    q.st[S_SECTION] = 0
    q.st[S_NIF] = 0
    return True


@kernel(inline="always")
def _reach_or_stop(q, cur, need, npk):
    """:func:`reach` for pass 1: True to go on; False to stop (a truncated file fails the
    queue when no packet is in hand; otherwise the next burst will see it)."""
    r = reach(q, cur, need, npk == 0)
    if r == R_OK:
        return True
    if r == R_SHORT and npk == 0:
        queue_fail(q, V_TRUNCATED, cur, need)
    return False


@kernel
def parse_pcap(q, n, cap):
    """Pass 1 over a classic pcap file; returns how many packets were noted."""
    cfg = q.cfg
    st = q.st
    size = cfg[C_SIZE]
    swap = cfg[C_SWAP] != 0
    fmul = 1 if cfg[C_NANO] != 0 else 1000
    limit = cfg[C_SNAPLIMIT]
    lt = cfg[C_LINKTYPE]
    cur = st[S_CUR]
    npk = 0
    nseg = 0
    skips = np.int64(0)
    while npk < n:
        if cur >= size:
            if not _at_end(q, npk):
                break
            cur = st[S_CUR]
            continue
        if not _reach_or_stop(q, cur, PCAP_REC_LEN, npk):
            break
        w = window(q)
        o = cur - st[S_WIN_OFF]
        caplen = rd32(w, o + 8, swap)
        if caplen > limit:
            if npk == 0:
                queue_fail(q, V_CAPLEN, cur, caplen)
            break
        if not _reach_or_stop(q, cur, PCAP_REC_LEN + caplen, npk):
            break
        w = window(q)
        o = cur - st[S_WIN_OFF]
        ts = rd32(w, o, swap) * NS + rd32(w, o + 4, swap) * fmul
        nxt = cur + PCAP_REC_LEN + caplen
        kind, d, plen, eh0, eh1 = _deliver(w, o + PCAP_REC_LEN, caplen, lt)
        if kind == CV_SKIP:
            skips = _skip(q, npk, skips, nxt, SKIP_FRAME)
            cur = nxt
            continue
        nseg = _note(q, npk, nseg, st[S_WIN_ADDR] + d, plen, ts, nxt, cap, kind, eh0, eh1,
                     skips)
        if nseg < 0:
            break
        st[S_SEEN_PKT] = 1
        npk += 1
        cur = nxt
    return npk


# -- pcapng ---------------------------------------------------------------------------------------
@kernel
def _pow10(e):
    r = np.int64(1)
    for _ in range(e):
        r *= 10
    return r


@kernel
def parse_idb(q, w, o, blen, swap):
    """Add the Interface Description Block at ``w[o:o+blen]`` to the section's interfaces:
    ``(0, 0)``, or ``(V_* code, offending value)``."""
    st = q.st
    linktype = rd16(w, o + 8, swap)
    if _refused(linktype, q.cfg[C_LINKMODE]):
        return V_LINKTYPE, linktype
    if blen < IDB_LEN:
        return V_BLOCK_LEN, blen
    nif = st[S_NIF]
    if nif >= MAX_IFACES:
        return V_TOO_MANY_IFACES, nif
    mul = np.int64(1000)          # no if_tsresol: microseconds
    div = np.int64(1)
    shift = np.int64(-1)
    tsoff = np.int64(0)
    p = o + 16
    end = o + blen - 4
    while p + 4 <= end:
        code = rd16(w, p, swap)
        ln = rd16(w, p + 2, swap)
        if code == OPT_ENDOFOPT:
            break
        if p + 4 + ln > end:
            return V_OPTION, code
        if code == OPT_IF_TSRESOL:
            if ln != 1:
                return V_OPTION, code
            v = np.int64(w[p + 4])
            if v & 0x80:
                if (v & 0x7F) > MAX_TSRESOL_BIN:
                    return V_OPTION, v
                shift = v & 0x7F
            else:
                if v > MAX_TSRESOL_DEC:
                    return V_OPTION, v
                shift = -1
                if v <= 9:
                    mul = _pow10(9 - v)
                    div = 1
                else:
                    mul = 1
                    div = _pow10(v - 9)
        elif code == OPT_IF_TSOFFSET:
            if ln != 8:
                return V_OPTION, code
            a = rd32(w, p + 4, swap)
            b = rd32(w, p + 8, swap)
            tsoff = (a << 32) | b if swap else (b << 32) | a
            if tsoff > MAX_TSOFFSET or tsoff < -MAX_TSOFFSET:
                return V_OPTION, code
        p += 4 + pad4(ln)
    row = q.ifs[nif]
    row[IF_LINKTYPE] = linktype
    row[IF_SNAPLEN] = rd32(w, o + 12, swap)
    row[IF_MUL] = mul
    row[IF_DIV] = div
    row[IF_SHIFT] = shift
    row[IF_OFFSET] = tsoff
    st[S_NIF] = nif + 1
    return 0, 0


@kernel(inline="always")
def ticks_to_ns(row, t):
    """An interface's timestamp ``t`` -- an unsigned 64-bit count of its if_tsresol units, in
    an int64 -- plus its if_tsoffset, in ns since the epoch; exact, or -1 (no timestamp) when
    the result is not in ``[0, 2**63)``."""
    e = row[IF_SHIFT]
    u = np.uint64(t)
    if e < 0:
        mul = row[IF_MUL]
        if t >= 0:
            if t > TS_MAX // mul:
                return np.int64(-1)
            ns = t * mul // row[IF_DIV]
        else:                       # 2**63 ticks or more: only a resolution finer than 1 ns
            if row[IF_DIV] == 1:
                return np.int64(-1)
            ns = np.int64(u // np.uint64(row[IF_DIV]))
    else:
        ue = np.uint64(e)
        sec = np.int64(u >> ue)
        if sec > TS_MAX // NS:
            return np.int64(-1)
        frac = np.int64(u & ((np.uint64(1) << ue) - np.uint64(1)))
        if e < 32:
            fns = (frac * NS) >> e             # < 2**61
        else:
            # (frac * NS) >> e without 128 bits: frac = fh * 2**32 + fl, fl * NS = rh * 2**32 + rl;
            # the low 32 bits (rl) cannot carry into the result when e >= 32
            q = (frac >> 32) * NS + ((frac & 0xFFFFFFFF) * NS >> 32)
            fns = q >> (e - 32)
        ns = sec * NS + fns
        if ns < 0:
            return np.int64(-1)
    off = row[IF_OFFSET]
    if off > 0 and ns > TS_MAX - off * NS:
        return np.int64(-1)
    ns += off * NS
    return ns if ns >= 0 else np.int64(-1)


@kernel(cfunc=True)          # called through its address (.ngcall), compiled on first use
def parse_pcapng(q, n, cap):
    """Pass 1 over a pcapng file; returns how many packets were noted.  Reads Section Header,
    Interface Description, Enhanced, Simple and (obsolete) Packet Blocks; skips the others.
    Each packet is delivered by its interface's link type (:mod:`.linktype`)."""
    cfg = q.cfg
    st = q.st
    size = cfg[C_SIZE]
    strict = cfg[C_STRICT] != 0
    cur = st[S_CUR]
    npk = 0
    nseg = 0
    skips = np.int64(0)
    while npk < n:
        first = npk == 0
        if cur >= size:
            if not _at_end(q, npk):
                break
            cur = st[S_CUR]
            continue
        if not _reach_or_stop(q, cur, 12, npk):
            break
        w = window(q)
        o = cur - st[S_WIN_OFF]
        swap = st[S_NSWAP] != 0
        btype = rd32(w, o, swap)
        if btype == BT_SHB:                    # the same in both byte orders
            if not first:
                break
            magic = rd32(w, o + 8, False)
            if magic != BYTE_ORDER_MAGIC and magic != BAD_BYTE_ORDER_MAGIC:
                queue_fail(q, V_SHB, cur, magic)
                break
            swap = magic == BAD_BYTE_ORDER_MAGIC
            blen = rd32(w, o + 4, swap)
        else:
            if st[S_SECTION] == 0:
                if first:
                    queue_fail(q, V_NO_SHB, cur, btype)
                break
            blen = rd32(w, o + 4, swap)
        if blen < 12 or (blen & 3) != 0 or blen > MAX_BLOCK or \
                (btype == BT_SHB and blen < SHB_LEN):
            if first:
                queue_fail(q, V_BLOCK_LEN, cur, blen)
            break
        if not _reach_or_stop(q, cur, blen, npk):
            break
        w = window(q)
        o = cur - st[S_WIN_OFF]
        if rd32(w, o + blen - 4, swap) != blen:
            if first:
                queue_fail(q, V_BLOCK_LEN, cur, rd32(w, o + blen - 4, swap))
            break
        nxt = cur + blen
        if btype == BT_SHB:
            major = rd16(w, o + 12, swap)
            minor = rd16(w, o + 14, swap)
            if major != 1 or (minor != 0 and minor != 2):
                queue_fail(q, V_SHB, cur, (major << 16) | minor)
                break
            st[S_NSWAP] = 1 if swap else 0
            st[S_SECTION] = 1
            st[S_NIF] = 0
            cur = st[S_CUR] = nxt
            continue
        if btype == BT_IDB:
            if not first:
                break
            code, val = parse_idb(q, w, o, blen, swap)
            if code != 0:
                queue_fail(q, code, cur, val)
                break
            cur = st[S_CUR] = nxt
            continue
        if btype != BT_EPB and btype != BT_SPB and btype != BT_PB:
            skips = _skip(q, npk, skips, nxt, 1)
            cur = nxt
            continue
        # a packet
        if btype == BT_SPB:
            if blen < SPB_LEN or st[S_NIF] == 0:
                if first:
                    queue_fail(q, V_BLOCK_LEN if blen < SPB_LEN else V_IFACE, cur, 0)
                break
            caplen = min(rd32(w, o + 8, swap), blen - SPB_LEN)
            snap = q.ifs[0, IF_SNAPLEN]
            if snap > 0 and caplen > snap:
                caplen = snap
            if caplen > MAX_SNAPLEN:
                if first:
                    queue_fail(q, V_CAPLEN, cur, caplen)
                break
            data = o + 12
            ts = np.int64(-1)                   # an SPB has no timestamp
            lt = q.ifs[0, IF_LINKTYPE]
        else:
            if blen < EPB_LEN:
                if first:
                    queue_fail(q, V_BLOCK_LEN, cur, blen)
                break
            ifid = rd32(w, o + 8, swap) if btype == BT_EPB else rd16(w, o + 8, swap)
            if ifid >= st[S_NIF]:
                if first:
                    queue_fail(q, V_IFACE, cur, ifid)
                break
            caplen = rd32(w, o + 20, swap)
            snap = q.ifs[ifid, IF_SNAPLEN]
            limit = snap if strict and 0 < snap < MAX_SNAPLEN else MAX_SNAPLEN
            if caplen > limit or caplen > blen - EPB_LEN:
                if first:
                    queue_fail(q, V_CAPLEN, cur, caplen)
                break
            t = (rd32(w, o + 12, swap) << 32) | rd32(w, o + 16, swap)
            ts = ticks_to_ns(q.ifs[ifid], t)
            data = o + 28
            lt = q.ifs[ifid, IF_LINKTYPE]
        kind, d, plen, eh0, eh1 = _deliver(w, data, caplen, lt)
        if kind == CV_SKIP:
            skips = _skip(q, npk, skips, nxt, SKIP_FRAME)
            cur = nxt
            continue
        nseg = _note(q, npk, nseg, st[S_WIN_ADDR] + d, plen, ts, nxt, cap, kind, eh0, eh1,
                     skips)
        if nseg < 0:
            break
        st[S_SEEN_PKT] = 1
        npk += 1
        cur = nxt
    return npk
