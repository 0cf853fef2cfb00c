"""The console output of the AF_PACKET and AF_XDP sections of ``pktbuf bench ports``: each
side's cycles per packet with its samples, losses and waits, the ratios and the loss-free
rates, from the result documents of :mod:`.ports_afpacket`."""
from __future__ import annotations

from .ports_sides import COALESCE_US

def _fmt(v, spec=".1f", none="n/a"):
    return none if v is None else format(v, spec)


def _ref_note(res) -> str:
    st = res["testpmd_status"]
    return "FAILED: " + st[len("failed: "):] if st.startswith("failed") else st


def print_head(res: dict, title: str) -> bool:
    """The title, the offered load and the probe lines of an rx section; False if it
    failed."""
    print(title)
    if res["status"] != "ok":
        print(f"  FAILED: {res['reason']}")
        return False
    print(f"  offered load: {res['rate_pps'] / 1e3:.0f} kpps ({res['rate_rule']}); "
          f"{res['rounds']} rounds x {res['seconds']:g} s")
    for who, p in res.get("probe", {}).items():
        if p.get("status") == "ok":
            print(f"    probe, unpaced: {who:<16} received {p['received_pps'] / 1e3:.0f} kpps "
                  f"(generator offered {p['offered_pps'] / 1e3:.0f} kpps)")
    return True


def print_rx(res: dict) -> int:
    if not print_head(res, "\nAF_PACKET 64 B rx-only over veth: busy TSC cycles per packet of "
                           "the receiver (CPU 1)\nat a fixed offered load (generator on CPU 0), "
                           "alternating rounds"):
        return 1
    rc = _print_cycles(res)
    ratio = res.get("ratio")
    print(f"  pktbuf / testpmd cycles per packet: {_fmt(ratio, '.2f')}x   "
          f"(target <= 1.0x, aim 0.8x)" + _per_round(res))
    return rc


def _print_cycles(res) -> int:
    rc = 0
    drv = res.get("driver", "net_af_packet")
    for who in ("testpmd", "pktbuf_af_packet", "pktbuf", "pktbuf_coalesced"):
        if who == "testpmd" and res["testpmd_status"] != "ok":
            print(f"  testpmd {drv} (reference): {_ref_note(res)}")
            if res["testpmd_status"].startswith("failed"):
                rc = 1
            continue
        p = res.get(who)
        if not p:
            continue
        label = {"testpmd": f"testpmd {drv} (reference)",
                 "pktbuf_af_packet": "pktbuf fwd net_af_packet",
                 "pktbuf_coalesced": f"pktbuf fwd {drv},rx_coalesce_us={COALESCE_US}"}.get(
                     who, "pktbuf fwd" if drv == "net_af_packet" else f"pktbuf fwd {drv}")
        loss = ", ".join(f"{l}/{s}" for l, s in zip(p["lost"], p["sent"]))
        print(f"  {label:<34} {_fmt(p['cycles_per_packet']):>9} cycles/packet\n    "
              f"(samples {', '.join(_fmt(x, '.0f') for x in p['samples_cycles_per_packet'])};"
              f" lost/sent {loss}; waited {', '.join(f'{w:.2f}' for w in p['waited'])};"
              f" busy {', '.join(_fmt(b, '.2f') for b in p['busy_share'])})")
        if p["failed_runs"]:
            print(f"    {p['failed_runs']} run(s) FAILED")
            rc = 1
    return rc


def _per_round(res) -> str:
    r = res.get("ratios_per_round")
    return f"\n    per round: {', '.join(f'{x:.2f}' for x in r)}" if r else ""


def print_fwd(res: dict, title: str = "\nAF_PACKET 64 B io forwarding between two veth "
              "pairs: forwarder on CPU 1, generator + sink on CPU 0",
              cycles_target: str = "   (target <= 1.0x)") -> int:
    print(title)
    if res["status"] != "ok":
        print(f"  FAILED: {res['reason']}")
        return 1
    print(f"  (a) busy cycles per packet at {res['rate_pps'] / 1e3:.0f} kpps "
          f"({res['rate_rule']}); {res['rounds']} rounds x {res['seconds']:g} s")
    rc = _print_cycles(res)
    print(f"  pktbuf / testpmd cycles per packet: {_fmt(res.get('ratio'), '.2f')}x"
          + cycles_target + _per_round(res))
    print(f"  (b) loss-free rate (zero loss at the sink, bisection under "
          f"{res['search_ceiling_pps'] / 1e3:.0f} kpps, {res['trial_seconds']:g} s trials)")
    for who in ("testpmd", "pktbuf"):
        p = res.get(who)
        if not p or (who == "testpmd" and res["testpmd_status"] != "ok"):
            continue
        lim = "  (reached the generator's limit: a lower bound)" \
            if p.get("loss_free_generator_limited") else ""
        print(f"  {who:<34} {_fmt(p['loss_free_pps'] and p['loss_free_pps'] / 1e3, '.0f'):>9}"
              f" kpps  (samples {', '.join(f'{x / 1e3:.0f}' for x in p['samples_loss_free_pps'])};"
              f" waited {', '.join(f'{w:.2f}' for w in p['search_waited'])})" + lim)
    print(f"  pktbuf / testpmd loss-free rate: {_fmt(res.get('rate_ratio'), '.2f')}x   "
          f"(target >= 1.0x)")
    return rc
