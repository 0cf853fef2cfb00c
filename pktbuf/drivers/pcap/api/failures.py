"""What stopped a ``net_pcap`` port, and what it lost without stopping: the queues' error
words and loss counters turned into exceptions and warning records (docs/failures.md) --
:meth:`PcapPort.error`, :meth:`~PcapPort.rx_format_error` and :meth:`~PcapPort.warnings`."""
from __future__ import annotations

import os

from ....errors import PcapFormatError, PcapWriteError
from .. import layout as L
from ..linktype import refusal


FORMAT_ERRORS = {
    L.V_TRUNCATED: "the file ends inside a record or block (truncated)",
    L.V_CAPLEN: "a record's captured length exceeds the snaplen (or 262144, or its block)",
    L.V_BLOCK_LEN: "a pcapng block length is too short, not a multiple of 4, above 1 MiB, "
                   "or differs from its trailing copy",
    L.V_NO_SHB: "a pcapng file must start with a Section Header Block",
    L.V_SHB: "a pcapng Section Header Block with a bad byte-order magic or version",
    L.V_IFACE: "a pcapng packet refers to an interface that no Interface Description Block "
               "described",
    L.V_LINKTYPE: "a pcapng interface of a link type this port refuses",
    L.V_TOO_MANY_IFACES: f"more than {L.MAX_IFACES} pcapng interfaces in one section",
    L.V_OPTION: "a pcapng option runs past its block, or a bad if_tsresol or if_tsoffset",
    L.V_MMAP: "the file could not be mapped",
    L.V_EMPTY_LOOP: "infinite_rx over a file that holds no packet",
}


def rx_format_error(port, qid: int = 0) -> PcapFormatError | None:
    """The format error that stopped Rx queue ``qid``, as an exception (None if none)."""
    q = port.rx_queue(qid)
    code = int(q.st[L.S_ERR])
    if code == 0:
        return None
    why = FORMAT_ERRORS.get(code, f"format error {code}")
    val = int(q.st[L.S_ERR_VAL])
    if code == L.V_LINKTYPE:
        why = "a pcapng interface of " + refusal(val, port._linkmode)
    elif code == L.V_MMAP:
        why += f" ({os.strerror(int(q.st[L.S_ERRNO]))})"
    elif code != L.V_TRUNCATED:
        why += f" (value {val})"
    return PcapFormatError(why, port.rx_files[qid] if qid < len(port.rx_files) else None,
                           int(q.st[L.S_ERR_OFF]))

def port_error(port):
    """The error that stopped one of the port's queues, as an exception (None if none):
    a :class:`~pktbuf.PcapFormatError` of an Rx queue (``path``, ``offset``, ``reason``)
    or a :class:`~pktbuf.PcapWriteError` of a Tx queue (``errno``); ``queue`` and
    ``direction`` ("rx"/"tx") say which.  A stopped queue never delivers or takes a
    packet again: an application must treat this as the end of its run, not as an end
    of input (``pktbuf fwd`` does: docs/failures.md)."""
    for i in range(len(port._rxq)):
        e = rx_format_error(port, i)
        if e is not None:
            e.queue, e.direction = i, "rx"
            return e
    for i, q in enumerate(port._txq):
        err = int(q.st[L.TS_ERRNO])
        if err:
            path = port.tx_files[i] if i < len(port.tx_files) else None
            e = PcapWriteError(f"{path}: write failed: {os.strerror(err)} ("
                               f"{int(q.st[L.TS_OERRORS])} records lost)", err)
            e.path, e.offset, e.reason = path, None, f"write failed: {os.strerror(err)}"
            e.queue, e.direction = i, "tx"
            return e
    return None

def port_warnings(port) -> list[dict]:
    """What was lost without stopping the port: one dict per non-zero counter --
    ``xstat`` (its name in :meth:`xstats`), ``count``, ``what`` (in words)."""
    out = []
    for i, q in enumerate(port._rxq):
        n = int(q.st[L.S_SKIPPED_FRAMES])
        if n:
            out.append({"xstat": f"rx_q{i}_skipped_frames", "count": n,
                        "what": f"frames of {port._rx_name(i)} not delivered: a link type "
                                f"that is not converted to Ethernet (linktypes="
                                f"{port.linktypes})"})
    for i, q in enumerate(port._txq):
        n = int(q.st[L.TS_TRUNCATED])
        if n:
            out.append({"xstat": f"tx_q{i}_truncated", "count": n,
                        "what": f"frames written to {port._tx_name(i)} cut to its snaplen "
                                f"{port.snaplen}"})
    return out
