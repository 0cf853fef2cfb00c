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

DRIVER = "net_af_xdp"


def measure_rx(**kw) -> dict:
    return A.measure_rx(driver=DRIVER, extra_sides=("pktbuf_af_packet", "pktbuf_coalesced"),
                        **kw)


def measure_fwd(**kw) -> dict:
    return A.measure_fwd(driver=DRIVER, **kw)


def print_rx(res: dict) -> int:
    print("\nAF_XDP 64 B rx-only over veth (copy mode): busy TSC cycles per packet of the "
          "receiver (CPU 1)\nat a fixed offered load (generator on CPU 0), alternating rounds")
    if res["status"] != "ok":
        print(f"  FAILED: {res['reason']}")
        return 1
    print(f"  offered load: {res['rate_pps'] / 1e3:.0f} kpps ({res['rate_rule']}); "
          f"{res['rounds']} rounds x {res['seconds']:g} s")
    for who, p in res.get("probe", {}).items():
        if p.get("status") == "ok":
            print(f"    probe, unpaced: {who:<16} received {p['received_pps'] / 1e3:.0f} kpps "
                  f"(generator offered {p['offered_pps'] / 1e3:.0f} kpps)")
    rc = A._print_cycles(res)
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
    print("\nAF_XDP 64 B io forwarding between two veth pairs (copy mode): forwarder on CPU 1, "
          "generator + sink on CPU 0")
    if res["status"] != "ok":
        print(f"  FAILED: {res['reason']}")
        return 1
    print(f"  (a) busy cycles per packet at {res['rate_pps'] / 1e3:.0f} kpps "
          f"({res['rate_rule']}); {res['rounds']} rounds x {res['seconds']:g} s")
    rc = A._print_cycles(res)
    print(f"  pktbuf / testpmd cycles per packet: {A._fmt(res.get('ratio'), '.2f')}x"
          + A._per_round(res))
    print(f"  (b) loss-free rate (zero loss at the sink, bisection under "
          f"{res['search_ceiling_pps'] / 1e3:.0f} kpps, {res['trial_seconds']:g} s trials)")
    for who in ("testpmd", "pktbuf"):
        p = res.get(who)
        if not p or (who == "testpmd" and res["testpmd_status"] != "ok"):
            continue
        lim = "  (reached the generator's limit: a lower bound)" \
            if p.get("loss_free_generator_limited") else ""
        print(f"  {who:<34} {A._fmt(p['loss_free_pps'] and p['loss_free_pps'] / 1e3, '.0f'):>9}"
              f" kpps  (samples "
              f"{', '.join(f'{x / 1e3:.0f}' for x in p['samples_loss_free_pps'])})" + lim)
    print(f"  pktbuf / testpmd loss-free rate: {A._fmt(res.get('rate_ratio'), '.2f')}x   "
          f"(target >= 1.0x)")
    return rc
