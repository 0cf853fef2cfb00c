"""``pktbuf fwd --stage`` and ``Forwarder(stage=...)``: a user's stage decides each packet's Tx
port or its drop inside the forwarding loop, with its own state and counters, in every form
of the command; a stage that cannot be used is refused before any port opens."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import pktbuf
from pktbuf.apps.fwd.forwarder import Forwarder
from pktbuf.apps.stage.api import Stage, StageError
from pktbuf.drivers.ring.api import RingPort
from pktbuf.errors import InvalidArgument

from . import fwd_stages as S

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILE_SPEC = os.path.join(ROOT, "tests", "apps", "fwd_stage_file.py") + ":STAGE"


def wired(rx, tx, opened=None):
    def make(pool, pid):
        if opened is not None:
            opened.append(pid)
        return RingPort([rx], [tx], pool=pool, port_id=pid)
    return make


def frame(i: int) -> bytes:
    """Byte 5 odd: the parity stage drops it; byte 4 0xEE (i % 10 == 0): rerouted."""
    f = bytearray(range(60))
    f[5] = i % 4
    f[4] = 0xEE if i % 10 == 0 else 0
    return bytes(f)


def inject(fw, ring, payloads):
    hs = []
    for p in payloads:
        m = fw.pool.alloc()
        m.append_bytes(p)
        hs.append(m.handle)
    assert ring.enqueue_burst(np.array(hs, np.int32)) == len(hs)


def drain(fw, ring):
    out = []
    while True:
        h = ring.dequeue_burst(256)
        if h.size == 0:
            return out
        for x in h:
            m = pktbuf.Mbuf(fw.pool.domain, int(x))
            out.append(bytes(m.read(0, m.pkt_len)))
        fw.pool.domain.free_bulk(h)


def test_forwarder_runs_the_stage_routes_drops_and_counts():
    in0, out0, in1, out1 = (pktbuf.Ring(1024) for _ in range(4))
    st = S.make()
    st.state[0] = 0                                  # rerouted packets: out of port 0
    fw = Forwarder([wired(in0, out0), wired(in1, out1)], stage=st)
    try:
        a = [frame(i) for i in range(300)]
        inject(fw, in0, a)
        for _ in range(10):
            fw.run_slice(0.01)
        kept = [f for f in a if not f[5] & 1]
        # default port 1, in received order; the rerouted ones on port 0, in order too
        assert drain(fw, out1) == [f for f in kept if f[4] != 0xEE]
        assert drain(fw, out0) == [f for f in kept if f[4] == 0xEE]
        ss = fw.stage_stats()
        assert ss["name"] == "tests.apps.fwd_stages:parity"
        assert ss["counters"] == {"seen": 300, "rerouted": 30}
        assert ss["drops"] == {"odd": 150, "invalid": 0} and ss["dropped"] == 150
        rows = {r["port_id"]: r for r in fw.rows()}
        assert rows[0]["rx"] == 300 and rows[0]["stage_dropped"] == 150
        assert rows[1]["tx"] == 120 and rows[0]["tx"] == 30
        assert st.state[1] == 300 and st.state[2] == 0       # the user's own state
    finally:
        assert fw.close() == 0                               # the drops were freed


def test_forwarder_takes_a_jitted_function_and_its_state():
    rx, tx = pktbuf.Ring(1024), pktbuf.Ring(1024)
    state = np.zeros(65, np.int64)
    fw = pktbuf.Forwarder([wired(rx, tx)], stage=S.parity, state=state)    # the public name
    try:
        inject(fw, rx, [frame(2), frame(3)])
        for _ in range(3):
            fw.run_slice(0.01)
        assert drain(fw, tx) == [frame(2)]          # a single port forwards to itself
        assert fw.stage_stats()["counters"] == {} and state[1] == 2
        assert fw.stage_stats()["drops"] == {"invalid": 1}    # no reason declared: invalid
    finally:
        assert fw.close() == 0


def test_record_cycles_counts_the_stage_loops_busy_cycles_only_when_asked():
    for record in (False, True):
        rx, tx = pktbuf.Ring(1024), pktbuf.Ring(1024)
        fw = Forwarder([wired(rx, tx)], stage=S.make(), record_cycles=record)
        try:
            for _ in range(3):
                fw.run_slice(0.01)                  # idle: nothing counted either way
            assert fw.rows()[0]["busy_cycles"] == 0
            inject(fw, rx, [frame(2 * i) for i in range(200)])
            for _ in range(5):
                fw.run_slice(0.01)
            row = fw.rows()[0]
            assert row["rx"] == 200
            if record:
                assert 0 < row["busy_cycles"] / row["rx"] < 1e6
            else:
                assert row["busy_cycles"] == 0
            drain(fw, tx)
        finally:
            assert fw.close() == 0


@pytest.mark.parametrize("stage, state, exc, words", [
    (S.not_jitted, None, StageError, "not a jitted function"),
    (S.six_params, None, StageError, "exactly 7 positional parameters"),
    (S.bad_types, np.zeros(4), StageError, "does not compile"),
    (S.make(), np.zeros(4), InvalidArgument, "carries its own state"),
])
def test_a_stage_that_cannot_be_used_is_refused_before_any_port_opens(stage, state, exc, words):
    opened = []
    with pytest.raises(exc, match=words):
        Forwarder([wired(pktbuf.Ring(64), pktbuf.Ring(64), opened)], stage=stage, state=state)
    assert opened == []


def test_a_stage_forwards_in_io_mode_only():
    opened = []
    with pytest.raises(InvalidArgument, match="io mode"):
        Forwarder([wired(pktbuf.Ring(64), pktbuf.Ring(64), opened)], "macswap", stage=S.make())
    with pytest.raises(InvalidArgument, match="give stage= too"):
        Forwarder([wired(pktbuf.Ring(64), pktbuf.Ring(64), opened)], state=np.zeros(3))
    assert opened == []


def test_from_spec_modules_files_factories_and_their_errors(tmp_path):
    assert Stage.from_spec("tests.apps.fwd_stages:parity").counters == ()
    st = Stage.from_spec("tests.apps.fwd_stages:make", worker=3)
    assert st.counters == S.COUNTERS and st.drop_reasons == S.DROP_REASONS
    f = Stage.from_spec(FILE_SPEC)
    assert f.name.startswith("pktbuf_stagefile_") and f.name.endswith("_fwd_stage_file:back")
    assert Stage.from_spec(FILE_SPEC) is f                     # imported once, same name
    (tmp_path / "broken.py").write_text("def x(:\n")
    (tmp_path / "factory.py").write_text(
        "def boom(worker=None):\n    raise RuntimeError('no table ' + str(worker))\n")
    for spec, words in [
            ("nocolon", "module:function"),
            ("tests.apps.no_such_module:f", "cannot import"),
            ("tests.apps.fwd_stages:nothing", "has no 'nothing'"),
            ("tests.apps.fwd_stages:returns_int", "returned int, not a Stage"),
            ("tests.apps.fwd_stages:not_jitted", "not a jitted function"),
            ("tests.apps.fwd_stages:six_params", "exactly 7"),
            ("tests.apps.fwd_stages:COUNTERS", "not a jitted function"),
            (f"{tmp_path}/none.py:f", "no such file"),
            (f"{tmp_path}/broken.py:x", "SyntaxError"),
            (f"{tmp_path}/factory.py:boom", "boom\\(\\) failed: RuntimeError: no table None")]:
        with pytest.raises(StageError, match=words):
            Stage.from_spec(spec)


# -- the command -----------------------------------------------------------------------------

def _cli(args, env=None, **kw):
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "pktbuf.cli", "fwd"] + args, env=e, cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False, **kw)


def _capture(path, frames):
    with pktbuf.PcapWriter(str(path), nano=True) as w:
        for i, f in enumerate(frames):
            w.writepkt_ns(f, 1_700_000_000_000_000_000 + 1000 * i)


def _read(path):
    return [f for _, f in pktbuf.PcapReader(str(path))]


def test_cli_stage_over_a_capture_json(tmp_path):
    a = [frame(i) for i in range(400)]
    _capture(tmp_path / "in.pcap", a)
    r = _cli(["--vdev", f"net_pcap0,rx_pcap={tmp_path}/in.pcap,tx_pcap={tmp_path}/out.pcap",
              "--stage", "tests.apps.fwd_stages:make", "--json", "--no-telemetry"])
    assert r.returncode == 0, r.stderr
    ev = [json.loads(x) for x in r.stdout.splitlines()]
    assert ev[0]["event"] == "start" and ev[0]["stage"] == "tests.apps.fwd_stages:parity"
    s = ev[-1]
    assert s["stopped_by"] == "eof" and s["mbufs_in_use_at_close"] == 0
    assert s["stage"]["counters"] == {"seen": 400, "rerouted": 40}
    assert s["stage"]["drops"] == {"odd": 200, "invalid": 0}
    assert s["ports"][0]["stage_dropped"] == 200 and s["accumulated"]["tx"] == 200
    assert _read(tmp_path / "out.pcap") == [f for f in a if not f[5] & 1]


def test_cli_stage_from_a_file_text_tables(tmp_path):
    a = [frame(i) for i in range(50)]
    _capture(tmp_path / "in0.pcap", a)
    _capture(tmp_path / "in1.pcap", a)
    r = _cli(["--vdev", f"net_pcap0,rx_pcap={tmp_path}/in0.pcap,tx_pcap={tmp_path}/o0.pcap",
              "--vdev", f"net_pcap1,rx_pcap={tmp_path}/in1.pcap,tx_pcap={tmp_path}/o1.pcap",
              "--stage", FILE_SPEC, "--no-telemetry"])
    assert r.returncode == 0, r.stderr
    assert "Stage-dropped: 50" in r.stdout and "Stage pktbuf_stagefile_" in r.stdout
    assert "from1: 50" in r.stdout and "Done." in r.stdout
    assert _read(tmp_path / "o0.pcap") == a and _read(tmp_path / "o1.pcap") == []


WORKERS, DISTRIB = ["--workers", "2"], ["--workers", "2", "--distributor"]


@pytest.mark.parametrize("spec, words, form", [
    ("tests.apps.fwd_stages:not_jitted", "not a jitted function", []),
    ("tests.apps.fwd_stages:six_params", "exactly 7 positional parameters", []),
    ("tests.apps.no_such_module:f", "cannot import", []),
    ("tests.apps.fwd_stages:not_jitted", "not a jitted function", WORKERS),
    ("tests.apps.fwd_stages:six_params", "exactly 7 positional parameters", DISTRIB),
    ("tests.apps.fwd_stages:bad_types", "does not compile", DISTRIB),     # the worker's loop
])
def test_cli_refuses_a_bad_stage_with_status_2_before_any_port_opens(tmp_path, spec, words,
                                                                    form):
    _capture(tmp_path / "in.pcap", [frame(0)])
    dev = f"net_pcap0,rx_pcap={tmp_path}/in.pcap,tx_pcap={tmp_path}/out{{worker}}.pcap"
    r = _cli(["--vdev", dev, "--stage", spec, "--json",
              "--no-telemetry"] + form)
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("pktbuf fwd:")]
    assert len(lines) == 1 and words in lines[0] and spec in lines[0], r.stderr
    assert json.loads(r.stdout.splitlines()[-1])["stage"] == "stage"
    assert list(tmp_path.iterdir()) == [tmp_path / "in.pcap"]       # no Tx file opened


def test_cli_refuses_a_stage_that_does_not_compile_and_non_io_modes(tmp_path):
    r = _cli(["--vdev", f"net_pcap0,tx_pcap={tmp_path}/o.pcap", "--stage",
              "tests.apps.fwd_stages:bad_types", "--no-telemetry"])
    assert r.returncode == 2 and "does not compile" in r.stderr, r.stderr
    r = _cli(["--vdev", f"net_pcap0,tx_pcap={tmp_path}/o.pcap", "--stage",
              "tests.apps.fwd_stages:make", "--forward-mode", "mac", "--no-telemetry"])
    assert r.returncode == 2 and "io mode" in r.stderr, r.stderr
    assert not (tmp_path / "o.pcap").exists()


def _kept(frames):
    return [f for f in frames if not f[5] & 1]


def test_cli_workers_each_run_the_stage_on_their_own_state(tmp_path):
    """Two workers, two ports each ({worker} files): port 0's packets go to port 1 by
    default and the rerouted ones back to port 0; counters summed over the workers."""
    ins = [[frame(i) for i in range(w * 7, w * 7 + 200)] for w in range(2)]
    for w in range(2):
        _capture(tmp_path / f"in-{w}.pcap", ins[w])
    r = _cli(["--workers", "2",
              "--vdev", (f"net_pcap0,rx_pcap={tmp_path}/in-{{worker}}.pcap,"
                         f"tx_pcap={tmp_path}/o0-{{worker}}.pcap"),
              "--vdev", f"net_pcap1,tx_pcap={tmp_path}/o1-{{worker}}.pcap",
              "--stage", "tests.apps.fwd_stages:make", "--json", "--no-telemetry"])
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout.splitlines()[-1])
    assert s["stopped_by"] == "eof" and s["mbufs_in_use_at_close"] == 0
    kept = [_kept(x) for x in ins]
    rer = [[f for f in k if f[4] == 0xEE] for k in kept]
    assert s["stage"]["counters"] == {"seen": 400, "rerouted": sum(map(len, rer))}
    assert s["stage"]["drops"] == {"odd": 200, "invalid": 0}
    for w in range(2):
        assert s["workers"][w]["stage"]["counters"]["seen"] == 200
        assert _read(tmp_path / f"o1-{w}.pcap") == [f for f in kept[w] if f[4] != 0xEE]
        assert _read(tmp_path / f"o0-{w}.pcap") == rer[w]
    assert {p["port_id"]: p["stage_dropped"] for p in s["ports"]} == {0: 200, 1: 0}


def test_cli_workers_share_a_table_the_parent_filled(tmp_path):
    ins = [[frame(i) for i in range(w, w + 100)] for w in range(2)]
    for w in range(2):
        _capture(tmp_path / f"in-{w}.pcap", ins[w])
    r = _cli(["--workers", "2",
              "--vdev", (f"net_pcap0,rx_pcap={tmp_path}/in-{{worker}}.pcap,"
                         f"tx_pcap={tmp_path}/o-{{worker}}.pcap"),
              "--stage", "tests.apps.fwd_stages:make_shared", "--json", "--no-telemetry"])
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout.splitlines()[-1])
    known = [[f for f in x if f[:6] in S.KNOWN] for x in ins]
    assert all(known) and s["mbufs_in_use_at_close"] == 0
    for w in range(2):
        assert _read(tmp_path / f"o-{w}.pcap") == known[w]
        assert s["workers"][w]["stage"]["counters"]["known"] == len(known[w])
    assert s["stage"]["drops"]["unknown"] == 200 - sum(map(len, known))


def test_cli_distributor_workers_run_the_stage(tmp_path):
    """The Rx/Tx process hands packets to two workers, which run the stage; the kept ones
    go out of the port the stage chose (rerouted ones to port 0, the rest to the default,
    port 1)."""
    a = [frame(i) for i in range(300)]
    _capture(tmp_path / "in.pcap", a)
    r = _cli(["--workers", "2", "--distributor",
              "--vdev", f"net_pcap0,rx_pcap={tmp_path}/in.pcap,tx_pcap={tmp_path}/o0.pcap",
              "--vdev", f"net_pcap1,tx_pcap={tmp_path}/o1.pcap",
              "--stage", "tests.apps.fwd_stages:make", "--json", "--no-telemetry"])
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout.splitlines()[-1])
    assert s["stopped_by"] == "eof" and s["mbufs_in_use_at_close"] == 0
    kept = _kept(a)
    rer = [f for f in kept if f[4] == 0xEE]
    assert s["stage"]["counters"] == {"seen": 300, "rerouted": len(rer)}
    assert s["stage"]["drops"] == {"odd": 150, "invalid": 0}
    assert sum(w["stage"]["counters"]["seen"] for w in s["workers"]) == 300
    assert {p["port_id"]: p["stage_dropped"] for p in s["ports"]} == {0: 150, 1: 0}
    # every frame is one flow (no IP header): one worker, in order
    assert _read(tmp_path / "o1.pcap") == [f for f in kept if f[4] != 0xEE]
    assert _read(tmp_path / "o0.pcap") == rer


def test_cli_stage_in_telemetry_xstats_and_pktbuf_stage(tmp_path):
    """While a --stage run replays a capture forever: dpdk-telemetry.py reads the stage's
    drops as the port's stage_dropped xstat and the stage under /pktbuf/stage."""
    import shutil
    import signal
    import time
    tool = shutil.which("dpdk-telemetry.py")
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("dpdk-telemetry.py is not installed (apt-get install dpdk-dev)",
                        pytrace=False)
        pytest.skip("dpdk-telemetry.py is not installed")
    _capture(tmp_path / "in.pcap", [frame(i) for i in range(4)])     # 2 kept, 2 dropped
    prefix = f"pktbuf_fwdstage{os.getpid()}"
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    p = subprocess.Popen([sys.executable, "-m", "pktbuf.cli", "fwd", "--vdev",
                          f"net_pcap0,rx_pcap={tmp_path}/in.pcap,infinite_rx=1",
                          "--vdev", "net_ring0", "--stage", "tests.apps.fwd_stages:make",
                          "--file-prefix", prefix, "--json"], env=e, cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert json.loads(p.stdout.readline())["event"] == "start"
        time.sleep(0.3)
        r = subprocess.run(["python3", tool, "-f", prefix],
                           input="/ethdev/xstats,0\n/pktbuf/stage\n/ethdev/xstats,1\n",
                           capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 0, r.stderr
        x0, st, x1 = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
        st = st["/pktbuf/stage"]
        assert st["name"] == "tests.apps.fwd_stages:parity"
        assert st["drops"]["odd"] > 0 and st["counters"]["seen"] >= 2 * st["drops"]["odd"] - 4
        assert x0["/ethdev/xstats"]["stage_dropped"] > 0
        assert x1["/ethdev/xstats"]["stage_dropped"] == 0
        assert st["stage_dropped"]["1"] == 0 and st["stage_dropped"]["0"] > 0
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
    assert p.returncode == 0, err
    s = json.loads(out.splitlines()[-1])
    assert s["stage"]["drops"]["odd"] >= st["drops"]["odd"] and s["mbufs_in_use_at_close"] == 0


def test_the_stage_loop_serves_the_kinds_of_its_ports_and_widens_never_silently(tmp_path):
    from pktbuf.apps.stage.api import StageRunner
    from pktbuf.drivers.common.kinds import K_PCAP, K_RING
    from pktbuf.ethdev.api import kinds_of_devices
    from pktbuf.ethdev.burst import KINDS_ALL, kinds_mask
    assert kinds_of_devices(["net_ring0", "net_pcap1,rx_pcap=x"]) == kinds_mask([K_RING, K_PCAP])
    assert kinds_of_devices(["net_ring0", wired(None, None)]) == KINDS_ALL   # a Python port
    assert kinds_of_devices(["net_nosuch0"]) == KINDS_ALL        # refused when it is opened
    rx, tx = pktbuf.Ring(1024), pktbuf.Ring(1024)
    fw = Forwarder([wired(rx, tx)], stage=S.make())
    out = tmp_path / "out.pcap"
    try:
        st = S.make()
        run = StageRunner(fw.ports, st, [(0, 0, 1)])   # Tx port 1 is not open yet
        assert run.kinds == kinds_mask([K_RING])       # the kinds of the ports open now
        run.run(0.0)                                   # the loop for ring ports only
        fw.ports.open(f"net_pcap1,tx_pcap={out}")      # a port of another kind
        inject(fw, rx, [frame(2), frame(4)])      # both kept, to port 1
        for _ in range(3):
            run.run(0.01)
        assert run.kinds == kinds_mask([K_RING, K_PCAP])   # the wider loop was taken
        assert run.port_counts(1)["tx"] == 2 and run.port_counts(1)["tx_dropped"] == 0
        fw.ports.close_port(1)
        assert [bytes(f) for _, f in pktbuf.pcap_reader(str(out))] == [frame(2), frame(4)]
    finally:
        assert fw.close() == 0
