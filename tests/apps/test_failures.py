"""No error ends as a normal stop: a damaged capture stops ``pktbuf fwd`` -- plain, with
``--workers``, with ``--distributor`` -- after every valid frame before the damage was
forwarded, with one ``error:`` line naming the port, its device string, the reason and the
offset, an ``error`` event in ``--json``, telemetry's ``/pktbuf/errors``, and exit status 1;
a loss that does not stop it (frames skipped, cut) is a warning; a failed write is an error
too.  docs/failures.md."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import pytest

from pktbuf import PcapPort, PcapReader
from pktbuf.apps.fwd.forwarder import Forwarder, start_telemetry
from pktbuf.apps.fwd.loop import R_DEADLINE, R_PORT_ERROR
from pktbuf.drivers.pcap import layout as L

from ..pcap import naive
from ..pcap.helpers import frames

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FR = frames([60, 200, 1514])
GOOD = [(1_000_000_000 + i * 1000, f) for i, f in enumerate(FR)]


def _rec(cap, orig=None):
    return struct.pack("<IIII", 1, 0, cap, cap if orig is None else orig)


def _ng_good():
    return naive.shb() + naive.idb(snaplen=2000, tsresol=9) + b"".join(
        naive.epb(0, t, f) for t, f in GOOD)


def _shb_version(major, minor):
    s = naive.shb()
    return s[:12] + struct.pack("<HH", major, minor) + s[16:]


# name -> (valid part, damaged tail, frames before the damage): the error is at len(valid part)
DAMAGE = {
    "pcap caplen past the record": (naive.write_pcap(GOOD), _rec(100) + b"x" * 99, 3),
    "pcap caplen above snaplen": (naive.write_pcap(GOOD, snaplen=1514),
                                  _rec(1515) + b"x" * 1515, 3),
    "pcap caplen near 4 GiB": (naive.write_pcap(GOOD), _rec(0xFFFFFFF0), 3),
    "pcap ends in a record header": (naive.write_pcap(GOOD), _rec(10)[:9], 3),
    "pcapng trailing length differs": (_ng_good(), naive.epb(0, 1, FR[0])[:-4]
                                       + struct.pack("<I", 1000), 3),
    "pcapng caplen past its block": (_ng_good(), naive.block(6, struct.pack(
        "<IIIII", 0, 0, 0, 500, 500) + b"\0" * 100), 3),
    "pcapng ends inside an EPB": (_ng_good(), naive.epb(0, 1, FR[1])[:-7], 3),
    "pcapng SHB version 1.1 first": (b"", _shb_version(1, 1) + naive.idb(), 0),
    "pcapng SHB version 2.0 later": (_ng_good(), _shb_version(2, 0) + naive.idb(), 3),
    "pcapng block length not x4": (_ng_good(), struct.pack("<II", 6, 33) + b"\0" * 25, 3),
}


def _write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def _damaged(tmp_path, case):
    ok, bad, n_ok = DAMAGE[case]
    return _write(tmp_path, "in.pcapng" if case.startswith("pcapng") else "in.pcap",
                  ok + bad), len(ok), n_ok


def _frames_in(path):
    return [f for _, f in PcapReader(path)]


def _run(fw, limit=200):
    for _ in range(limit):
        r = fw.run_slice(0.05)
        if r != R_DEADLINE:
            return r
    return R_DEADLINE


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_forwarder_stops_on_a_damaged_capture(tmp_path, case):
    """Every kind of damage: the loop says R_PORT_ERROR (never R_ALL_EOF), the error names
    the port, its device string and the offset; the output holds exactly the valid frames."""
    src, off, n_ok = _damaged(tmp_path, case)
    out = str(tmp_path / "out.pcap")
    dev = f"net_pcap0,rx_pcap={src},tx_pcap={out}"
    fw = Forwarder([dev], "io", nb_mbufs=1024)
    try:
        assert _run(fw) == R_PORT_ERROR
        (e,) = fw.failures()
        assert e["port_id"] == 0 and e["device"] == dev and e["direction"] == "rx"
        assert e["queue"] == 0 and e["offset"] == off and e["path"] == src
        assert dev in e["line"] and f"offset {off}" in e["line"]
        assert fw.ports[0].stats()["ierrors"] == 1
    finally:
        assert fw.close() == 0
    assert _frames_in(out) == FR[:n_ok]


def _fwd(*args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "pktbuf.cli", "fwd", "--no-telemetry", *args],
                          capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def _events(stdout):
    return [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]


def test_fwd_text_reports_and_exits_1(tmp_path):
    src, off, n_ok = _damaged(tmp_path, "pcapng trailing length differs")
    out = str(tmp_path / "out.pcap")
    dev = f"net_pcap0,rx_pcap={src},tx_pcap={out}"
    r = _fwd("--vdev", dev, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    errs = [x for x in r.stderr.splitlines() if "error:" in x]
    assert len(errs) == 1
    assert errs[0].startswith(f"pktbuf fwd: error: port 0 ({dev}): rx queue 0: {src}: ")
    assert "trailing copy" in errs[0] and f"(at offset {off})" in errs[0]
    assert "Stopping (port error)" in r.stdout and "Done." not in r.stdout
    assert r.stdout.rstrip().splitlines()[-1].startswith("Failed:")
    assert _frames_in(out) == FR[:n_ok]


@pytest.mark.parametrize("form", [[], ["--workers", "1"], ["--workers", "1", "--distributor"]])
def test_fwd_json_error_event_in_every_form(tmp_path, form):
    src, off, n_ok = _damaged(tmp_path, "pcap caplen past the record")
    out = str(tmp_path / "out.pcap")
    dev = f"net_pcap0,rx_pcap={src},tx_pcap={out}"
    r = _fwd("--vdev", dev, "--json", *form, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    ev = _events(r.stdout)
    errors = [e for e in ev if e["event"] == "error"]
    assert len(errors) == 1, ev
    e = errors[0]
    assert e["device"] == dev and e["offset"] == off and e["direction"] == "rx"
    assert "truncated" in e["reason"] and e["path"] == src
    summ = ev[-1]
    assert summ["event"] == "summary" and summ["exit_status"] == 1
    assert summ["stopped_by"] == "port error" and len(summ["errors"]) == 1
    assert summ["mbufs_in_use_at_close"] == 0
    assert sum(1 for x in r.stderr.splitlines() if "error:" in x and f"port 0 ({dev})" in x) == 1
    assert _frames_in(out) == FR[:n_ok]


def test_a_good_file_still_ends_done(tmp_path):
    src = _write(tmp_path, "in.pcap", naive.write_pcap(GOOD))
    out = str(tmp_path / "out.pcap")
    r = _fwd("--vdev", f"net_pcap0,rx_pcap={src},tx_pcap={out}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Stopping (eof)" in r.stdout and r.stdout.rstrip().endswith("Done.")
    assert "error" not in r.stderr and "warning" not in r.stderr
    assert _frames_in(out) == FR


def test_losses_that_do_not_stop_are_warnings(tmp_path):
    """A pcapng with an 802.11 interface beside the Ethernet one (devargs default: skip and
    count), frames cut by a small snaplen: exit 0, a warning line each, in the summary."""
    ng = (naive.shb() + naive.idb() + naive.epb(0, 1, FR[0]) + naive.idb(linktype=105)
          + naive.epb(1, 2, b"\x08\x02" + b"w" * 40)
          + naive.epb(0, 3, FR[2]) + naive.epb(1, 4, b"\x08\x02" + b"v" * 30))
    src = _write(tmp_path, "in.pcapng", ng)
    out = str(tmp_path / "out.pcap")
    dev = f"net_pcap0,rx_pcap={src},tx_pcap={out},snaplen=1000"
    r = _fwd("--vdev", dev, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    warn = [x for x in r.stderr.splitlines() if "warning:" in x]
    assert len(warn) == 2, r.stderr
    assert any("2 frames of" in w and "rx_q0_skipped_frames" in w for w in warn)
    assert any("1 frames written to" in w and "snaplen 1000" in w for w in warn)
    summ = _events(r.stdout)[-1]
    assert summ["exit_status"] == 0 and summ["errors"] == []
    assert sorted(w["xstat"] for w in summ["warnings"]) == ["rx_q0_skipped_frames",
                                                             "tx_q0_truncated"]
    with PcapReader(out) as rd:
        got = list(rd.records())
    assert [f for _, f, _ in got] == [FR[0], FR[2][:1000]] and got[1][2] == 1514
    # refused instead: the same file is then a port error
    r = _fwd("--vdev", f"net_pcap0,rx_pcap={src},tx_pcap={out},linktypes=convertible",
             cwd=tmp_path)
    assert r.returncode == 1 and "link type 105" in r.stderr
    assert _frames_in(out) == FR[:1]


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_frames_over_65535_bytes_are_written_whole(tmp_path, fmt):
    """Frames up to libpcap's 262144 bytes go through whole (the output's snaplen is 262144
    unless told otherwise), and nothing is reported as cut."""
    big = frames([100_000, 262_144, 64], seed=3)
    pk = [(i, f) for i, f in enumerate(big)]
    if fmt == "pcap":
        data = naive.write_pcap(pk, snaplen=262144)
    else:
        data = naive.shb() + naive.idb(snaplen=262144) + b"".join(
            naive.epb(0, t, f) for t, f in pk)
    src = _write(tmp_path, "in." + fmt, data)
    out = str(tmp_path / ("out." + fmt))
    fw = Forwarder([f"net_pcap0,rx_pcap={src},tx_pcap={out}"], "io", nb_mbufs=8192)
    try:
        _run(fw)
        assert fw.failures() == [] and fw.warnings() == []
        assert fw.ports[0].xstats()["tx_q0_truncated"] == 0
    finally:
        assert fw.close() == 0
    with PcapReader(out) as rd:
        assert [(f, n) for _, f, n in rd.records()] == [(f, len(f)) for f in big]
        assert rd.snaplen == 262144


def test_a_failed_write_stops_the_run(tmp_path):
    """A Tx file whose writes fail (here: /dev/full under the port's descriptor) is a port
    error, not a run that ends well; the pool is whole afterwards."""
    src = _write(tmp_path, "in.pcap", naive.write_pcap(GOOD))
    out = str(tmp_path / "out.pcap")

    def port(pool, pid):
        p = PcapPort(pool, rx_pcap=src, tx_pcap=out, flush_every_burst=True, port_id=pid)
        full = os.open("/dev/full", os.O_WRONLY)
        os.dup2(full, int(p.tx_queue(0).cfg[L.T_FD]))
        os.close(full)
        return p
    fw = Forwarder([port], "io", nb_mbufs=1024)
    try:
        assert _run(fw) == R_PORT_ERROR
        (e,) = fw.failures()
        assert e["direction"] == "tx" and e["exception"] == "PcapWriteError"
        assert "No space left" in e["reason"]
    finally:
        assert fw.close() == 0


def test_telemetry_shows_the_error(tmp_path):
    from ..telemetry.helpers import Client, remove_prefix_dir, unique_prefix

    class A:
        no_telemetry = False
        file_prefix = unique_prefix("fail")
    src, off, _ = _damaged(tmp_path, "pcap caplen near 4 GiB")
    fw = Forwarder([f"net_pcap0,rx_pcap={src}"], "rxonly", nb_mbufs=1024)
    tel = start_telemetry(A, fw)
    try:
        assert _run(fw) == R_PORT_ERROR
        with Client(tel.path) as c:
            got = c.query("/pktbuf/errors")["/pktbuf/errors"]
            info = c.query("/ethdev/info,0")["/ethdev/info"]
        (e,) = got["errors"]
        assert e["offset"] == off and e["port_id"] == 0 and "snaplen" in e["reason"]
        assert info["rxq_state"] == [0]                    # the queue is shown stopped
    finally:
        d = tel.runtime_dir
        tel.close()
        remove_prefix_dir(d)
        assert fw.close() == 0
