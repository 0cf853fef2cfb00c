"""``pktbuf compile``: units, the cold report, and two processes that never compile one function.

The lock test runs two ``pktbuf compile --report --warm ring`` processes at once on one empty
cache: each reports the compilations it did itself, and no function may appear in both (the
second one to reach it waits for the first and loads what it wrote).  A third run compiles
nothing.
"""
import json
import os
import subprocess
import sys

from pktbuf.apps.compile import TARGETS, UNITS, fwd_unit_for, units_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _compile(args, cache, **kw):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, "-m", "pktbuf.cli", "compile", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_units_come_after_what_they_build_on():
    order = units_for(["all"])
    assert set(order) == {u for u in UNITS if u != "fwd:all" and "+" not in u}
    for u in order:
        for d in UNITS[u][0]:
            assert order.index(d) < order.index(u)
    demo = units_for(["demo"])
    # no other port type's kernels, and not the facade's entries the demo never runs (the
    # forwarder and traffic processes use pools through their loops and ports only); the
    # memif bursts in two units, Rx and Tx, that compile side by side, and the general copy
    # loops they call through an address in two more; not the zero-copy loops (a zero-copy
    # device compiles those when it is created); first the free kernels' out-of-line paths,
    # which every process that makes a domain loads
    assert demo == ["mbuf:free", "memif:rx", "memif:tx", "memif:rx:general",
                    "memif:tx:general", "memif", "fwd:memif", "traffic"]
    assert UNITS["memif"][1] is None                    # done when its parts are
    assert "memif:zerocopy" in units_for(["ports"])
    assert set(TARGETS) >= {"core", "fwd", "demo", "all"}
    assert units_for(["fwd:pcap+ring"]) == ["mbuf:free", "ring:rx", "ring:tx", "ring",
                                            "pcap:rx", "pcap:tx", "pcap", "fwd:ring+pcap"]
    # its halves and the free paths
    assert units_for(["ring"], deps=False) == ["mbuf:free", "ring:rx", "ring:tx", "ring"]
    assert fwd_unit_for(["net_pcap0,rx_pcap=x", "net_ring1"]) == "fwd:ring+pcap"
    assert fwd_unit_for(["net_nosuch0"]) == "fwd:all"


def test_bad_arguments_are_usage_errors(tmp_path):
    for args in (["nosuch"], ["fwd:nosuch"], ["--jobs", "0"], ["--jobs", "x"], ["--json", "x.json"],
                 ["--warm"]):
        p = _compile(args, tmp_path)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 2, (args, out, err)
        assert "pktbuf compile" in err


def test_two_processes_never_compile_one_function(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    reports = [tmp_path / "a.json", tmp_path / "b.json"]
    ps = [_compile(["--report", "--warm", "--jobs", "1", "--only", "--json", str(r), "ring"],
                   cache)
          for r in reports]
    for p in ps:
        out, err = p.communicate(timeout=1200)
        assert p.returncode == 0, err
    seen = []
    for r in reports:
        data = json.loads(r.read_text())
        assert data["cold"] is False
        assert [u["unit"] for u in data["units"]] == ["mbuf:free", "ring:rx", "ring:tx"]
        seen.append({(c["kernel"], c["args"]) for u in data["units"] for c in u["compiled"]})
    assert seen[0] or seen[1]                     # the empty cache was compiled into
    assert not (seen[0] & seen[1]), sorted(seen[0] & seen[1])[:5]
    # everything is cached now: a third run compiles nothing
    third = tmp_path / "c.json"
    p = _compile(["--report", "--warm", "--jobs", "1", "--only", "--json", str(third), "ring"],
                 cache)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    data = json.loads(third.read_text())
    assert [c for u in data["units"] for c in u["compiled"]] == []
    assert "ring" in out and "compilations" in out


def test_cold_report_names_the_kernels(tmp_path):
    out_json = tmp_path / "r.json"
    p = _compile(["--report", "--jobs", "2", "--only", "--json", str(out_json), "ring", "af_packet"],
                 tmp_path / "unused")
    out, err = p.communicate(timeout=1200)
    assert p.returncode == 0, err
    data = json.loads(out_json.read_text())
    assert data["cold"] is True
    names = {c["kernel"] for u in data["units"] for c in u["compiled"]}
    assert "pktbuf.drivers.ring.burst.eth_ring_rx_burst" in names
    assert all(0 <= c["self_s"] <= c["total_s"] for u in data["units"] for c in u["compiled"])
    assert "eth_ring_rx_burst" in out and "self s" in out
    assert not (tmp_path / "unused").exists()     # the report compiled into a temporary cache


def test_a_loop_cached_for_other_port_kinds_is_not_warm(monkeypatch):
    # the forwarding loop is compiled once per set of port kinds: a cache that holds it for
    # memif ports (a demo ran) must not make `pktbuf fwd` over a capture file skip the
    # parallel compile
    from numba import types
    import pktbuf.apps.compile as c
    from pktbuf.apps.fwd.loop import fwd_loop
    from pktbuf.drivers.common.kinds import K_MEMIF, K_PCAP, K_RING
    from pktbuf.ethdev.burst import kinds_mask
    held = {fwd_loop: [(types.int64, types.literal(kinds_mask([K_MEMIF])))]}
    monkeypatch.setattr(c, "_cached_args", lambda disp: held.get(disp))
    assert c.is_warm(["fwd:memif"])
    assert not c.is_warm(["fwd:pcap"])
    assert not c.is_warm(["fwd:memif", "fwd:pcap"])
    assert not c.is_warm(["demo"])                      # the traffic loop is not cached
    held[fwd_loop].append((types.int64, types.literal(kinds_mask([K_PCAP, K_RING]))))
    assert c.is_warm(["fwd:ring+pcap"]) and not c.is_warm(["fwd:ring"])


def test_cached_args_reads_the_index():
    import pktbuf.apps.compile as c
    from pktbuf.block import BlockType
    from pktbuf.drivers.pcap.rx import pcap_rx_error
    pcap_rx_error.compile((BlockType("pcap_rxq"),))     # compiled or loaded: in the index now
    assert (BlockType("pcap_rxq"),) in c._cached_args(pcap_rx_error)


def test_a_pcapng_input_adds_its_parser_to_the_fwd_units(tmp_path):
    from pktbuf.apps.compile import pcapng_inputs
    ng = tmp_path / "a.pcapng"
    ng.write_bytes(bytes.fromhex("0a0d0d0a") + bytes(24))
    classic = tmp_path / "b.pcap"
    classic.write_bytes(bytes.fromhex("d4c3b2a1") + bytes(20))
    assert pcapng_inputs([f"net_pcap0,rx_pcap={ng},tx_pcap=o.pcap"])
    assert pcapng_inputs(["net_ring0", f"net_pcap1,rx_pcap={classic},rx_pcap={ng}"])
    assert not pcapng_inputs([f"net_pcap0,rx_pcap={classic}", f"net_pcap1,tx_pcap={ng}"])
    assert not pcapng_inputs([f"net_pcap0,rx_pcap={tmp_path / 'missing'}", "net_memif0"])
    assert not pcapng_inputs(None)
    assert units_for(["fwd:pcap", "pcapng"]) == ["mbuf:free", "pcap:rx", "pcap:tx", "pcap",
                                                 "fwd:pcap", "pcapng"]


def test_l3fwd_compiles_the_bursts_its_ports_lack_on_every_core(monkeypatch):
    # pktbuf l3fwd compiles its stage loop itself; on a cold cache the ports' bursts go first,
    # unit by unit on every core, so that the loop loads them: only those not cached yet
    import pktbuf.apps.compile as c
    from pktbuf.drivers.pcap.rx import pcap_rx_burst
    from pktbuf.drivers.pcap.tx import pcap_tx_burst
    from pktbuf.drivers.ring.burst import eth_ring_rx_burst, eth_ring_tx_burst
    from pktbuf.buf.mbuf.free import FREE_PATHS
    held = {eth_ring_rx_burst: [()], eth_ring_tx_burst: [()]}
    monkeypatch.setattr(c, "_cached_args", lambda disp: held.get(disp))
    two = ["net_pcap0,rx_pcap=a.pcap,tx_pcap=b.pcap", "net_pcap1,rx_pcap=c.pcap"]
    # the free paths every domain loads, first, while they are not cached
    assert c.port_units_to_compile(two) == ["mbuf:free", "pcap:rx", "pcap:tx"]
    held.update({p: [()] for p in FREE_PATHS})
    assert c.port_units_to_compile(two) == ["pcap:rx", "pcap:tx"]        # once per type
    assert c.port_units_to_compile(["net_ring0"] + two) == ["pcap:rx", "pcap:tx"]
    held[pcap_tx_burst] = [()]
    assert c.port_units_to_compile(two) == ["pcap:rx"]
    held[pcap_rx_burst] = [()]
    assert c.port_units_to_compile(two) == []
    assert c.port_units_to_compile(["net_nosuch0,x=1", "not a device"]) == []
    assert set(c.port_units_to_compile(["net_memif0,role=server"])) == {
        "memif:rx", "memif:tx", "memif:rx:general", "memif:tx:general"}
