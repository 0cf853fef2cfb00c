"""The pcapng parser is compiled on first use of the format only (``pktbuf.drivers.pcap.ngcall``).

A process that replays classic pcap files never compiles or loads ``parse_pcapng``; the first
pcapng queue does, and its packets come out as before.  The burst calls the parser through the
address in its queue: a queue without one delivers nothing (and crashes nothing), and the
sources the burst's and the parser's cache files are stamped with still cover the parser.
"""
import os
import subprocess
import sys
import textwrap

from pktbuf._jit import closure_files
from pktbuf.drivers.pcap import layout as L
from pktbuf.drivers.pcap import ngcall, parse, rx
from pktbuf.drivers.pcap.api.port import PcapPort

from . import naive
from .helpers import frames, read_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = textwrap.dedent("""
    import sys
    import pktbuf
    from pktbuf import PcapPort
    from pktbuf.apps.compile import _cached_args
    from pktbuf.drivers.pcap.parse import parse_idb, parse_pcap, parse_pcapng
    classic, ng = sys.argv[1:3]
    pool = pktbuf.PktmbufPool(1024, name="ngcall-child")

    def replay(path):
        n = 0
        with PcapPort(pool, rx_pcap=path) as port:
            while not port.rx_eof(0):
                hs = port.rx_burst(32)
                n += len(hs)
                pool.free_bulk(hs)
        return n

    def cached(f):
        return len(_cached_args(f) or ())

    a = replay(classic)
    before = (cached(parse_pcap), cached(parse_pcapng), cached(parse_idb),
              len(parse_pcapng.overloads))
    b = replay(ng)
    after = (cached(parse_pcapng), cached(parse_idb))
    pool.close()
    print(a, b, *before, *after)
""")


def _files(tmp_path, n=40):
    pk = [(i * 1000, f) for i, f in enumerate(frames([60, 1500, 3000] * (n // 3), seed=3))]
    classic = tmp_path / "a.pcap"
    classic.write_bytes(naive.write_pcap(pk))
    ng = tmp_path / "b.pcapng"
    ng.write_bytes(naive.shb() + naive.idb()
                   + b"".join(naive.epb(0, t // 1000, f) for t, f in pk))
    return pk, str(classic), str(ng)


def test_a_classic_capture_never_compiles_the_pcapng_parser(tmp_path):
    pk, classic, ng = _files(tmp_path)
    # a cache of its own, empty: what the cold process compiled is what its index files hold
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-c", CHILD, classic, ng], env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    a, b, pcap, ng_before, idb_before, loaded, ng_after, idb_after = map(int, r.stdout.split())
    assert a == b == len(pk)
    assert pcap == 1                         # the classic burst was compiled, with its parser,
    assert ng_before == idb_before == loaded == 0    # without the pcapng one or its callees
    assert ng_after == idb_after == 1        # the first pcapng file compiled them


def test_pcapng_through_the_pointer_reads_what_the_model_says(pool, tmp_path):
    pk, classic, ng = _files(tmp_path)
    with PcapPort(pool, rx_pcap=ng) as port:
        q = port._rxq[0]
        assert q.cfg[L.C_FORMAT] == L.FMT_PCAPNG
        assert q.cfg[L.C_PARSE] == ngcall.pcapng_parser() != 0
        assert read_port(port, pool) == [f for _, f in pk]


def test_a_pcapng_queue_without_its_parser_delivers_nothing(pool, tmp_path):
    pk, classic, ng = _files(tmp_path)
    with PcapPort(pool, rx_pcap=ng) as port:
        q = port._rxq[0]
        addr = int(q.cfg[L.C_PARSE])
        q.cfg[L.C_PARSE] = 0
        assert len(port.rx_burst(32)) == 0
        assert q.st[L.S_CUR] == 0 and q.st[L.S_ERR] == 0 and pool.in_use_count == 0
        q.cfg[L.C_PARSE] = addr
        assert read_port(port, pool) == [f for _, f in pk]


def test_the_stamps_still_cover_the_parser():
    # the burst's cache files are stamped with parse.py (it calls parse_pcap and reaches the
    # pcapng parser's module through ngcall); the parser's own with its module's closure
    burst = closure_files(rx.__file__)
    assert parse.__file__ in burst and ngcall.__file__ in burst
    assert os.path.abspath(parse.__file__) in closure_files(parse.__file__)
