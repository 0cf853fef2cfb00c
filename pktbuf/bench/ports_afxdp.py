"""The AF_XDP sections of ``pktbuf bench ports``: the harness of :mod:`.ports_afpacket` (paced
generator on CPU 0, receiver/forwarder on CPU 1, busy TSC cycles, testpmd
``--record-core-cycles``, loss-free search) on ``net_af_xdp`` ports, against DPDK 22.11's
``net_af_xdp`` under ``dpdk-testpmd`` and against pktbuf's own AF_PACKET port, same run, same
veth pairs (one queue each: an AF_XDP socket serves one queue).

Over veth the XDP program and the copy into the UMEM run on the sender's CPU (copy mode; veth
has no zero-copy), so what is compared is the receiving process's own busy CPU time per
packet at a fixed offered load, as for AF_PACKET.

* ``afxdp_rx``: pktbuf fwd rxonly on ``net_af_xdp0,iface=f0`` (DPDK's defaults, and with
  ``rx_coalesce_us=100``) vs testpmd rxonly on the same, vs pktbuf fwd rxonly on
  ``net_af_packet0,iface=f0`` (whose V3 block ring batches frames by itself).
* ``afxdp_fwd``: io forwarding ``f0`` -> ``f1`` on ``net_af_xdp`` ports: busy cycles at a fixed
  load and the loss-free rate, pktbuf vs testpmd.
"""
from __future__ import annotations

from . import ports_afpacket as A
from . import ports_print as P

DRIVER = "net_af_xdp"


def measure_rx(**kw) -> dict:
    return A.measure_rx(driver=DRIVER, extra_sides=("pktbuf_af_packet", "pktbuf_coalesced"),
                        **kw)


def measure_fwd(**kw) -> dict:
    return A.measure_fwd(driver=DRIVER, **kw)


def print_rx(res: dict) -> int:
    if not P.print_head(res, "\nAF_XDP 64 B rx-only over veth (copy mode): busy TSC cycles "
                             "per packet of the receiver (CPU 1)\nat a fixed offered load "
                             "(generator on CPU 0), alternating rounds"):
        return 1
    rc = P._print_cycles(res)
    names = {"pktbuf": "pktbuf AF_XDP", "pktbuf_coalesced": "pktbuf AF_XDP coalesced",
             "testpmd": "testpmd net_af_xdp", "pktbuf_af_packet": "pktbuf AF_PACKET"}
    targets = {"testpmd": "<= 1.0x", "pktbuf_af_packet": "<= 0.67x"}
    for key, r in res.get("ratios", {}).items():
        a, b = key.split("/")
        print(f"  {names[a] + ' / ' + names[b] + ' cycles per packet:':<62} "
              f"{r['median']:.2f}x   (target {targets[b]})\n    per round: "
              f"{', '.join(f'{x:.2f}' for x in r['per_round'])}")
    return rc


def print_fwd(res: dict) -> int:
    return P.print_fwd(res, "\nAF_XDP 64 B io forwarding between two veth pairs (copy mode): "
                            "forwarder on CPU 1, generator + sink on CPU 0", "")
