"""pktbuf l3fwd's command line and rule files, read as DPDK 22.11's l3fwd reads them."""
import pytest

from pktbuf.apps.l3fwd import options as O
from pktbuf.apps.l3fwd import routes as R

BASE = ["--vdev", "net_pcap0,rx_pcap=a.pcap", "--vdev=net_pcap1,rx_pcap=b.pcap", "--"]


def parse(*app, eal=BASE):
    return O.parse(list(eal) + list(app))


def test_full_line_both_spellings():
    o = parse("-p", "0x3", "--config=(0,0,0),(1,0,0)", "--lookup", "em", "--rule_ipv4=r4",
              "--rule_ipv6", "r6", "--eth-dest=1,AA:bb:CC:00:11:22", "--eth-dest", "0,1:2:3:4:5:6",
              "--parse-ptype", "-P", "--ipv6", "--max-pkt-len", "9000", "--per-port-pool")
    assert o.vdevs == ["net_pcap0,rx_pcap=a.pcap", "net_pcap1,rx_pcap=b.pcap"]
    assert o.portmask == 3 and o.config == [(0, 0, 0), (1, 0, 0)]
    assert (o.lookup, o.rule_ipv4, o.rule_ipv6) == ("em", "r4", "r6")
    assert o.eth_dest == {1: bytes.fromhex("aabbcc001122"), 0: bytes.fromhex("010203040506")}
    assert o.parse_ptype and o.promiscuous and o.ipv6 and o.per_port_pool
    assert o.max_pkt_len == 9000 and o.lcores() == [0]


def test_eal_options_are_accepted_and_ignored():
    eal = ["-l", "0", "-n", "4", "--no-huge", "-m", "512", "--no-pci", "--file-prefix=x",
           "--vdev", "net_ring0", "--log-level", "lib.eal:warning", "--"]
    o = parse("-p", "1", "--config", "(0,0,0)", eal=eal)
    assert o.vdevs == ["net_ring0"]
    with pytest.raises(O.UsageError, match="unknown EAL option"):
        parse("-p", "1", eal=["--frobnicate", "--"])


def test_defaults():
    o = parse("-p", "ff")
    assert o.lookup == "lpm" and not o.lookup_given and o.config == O.DEFAULT_CONFIG
    assert not o.parse_ptype and o.burst == 32 and not o.ttl_expiry
    assert parse("-p", "3", "-E", "--config", "(0,0,0)").lookup == "em"
    assert parse("-p", "3", "-L", "--config", "(0,0,0)").lookup == "lpm"
    assert parse("-p", "3", "--lookup=fib", "--config", "(0,0,0)").lookup == "fib"
    assert parse("-p", "3", "--config", "(0,0,0)", "--ttl-expiry").ttl_expiry


def test_abbreviations_as_getopt_long():
    o = parse("-p", "3", "--conf", "(0,0,0)", "--parse-p", "--look", "em")
    assert o.parse_ptype and o.lookup == "em" and o.config == [(0, 0, 0)]


@pytest.mark.parametrize("mask,val", [("3", 3), ("0x3", 3), ("FF", 255), ("0X10", 16)])
def test_portmask_hex(mask, val):
    assert O.parse_portmask(mask) == val


@pytest.mark.parametrize("mask", ["", "0", "3g", "zz", "0x"])
def test_portmask_bad(mask):
    with pytest.raises(O.UsageError, match="portmask"):
        O.parse_portmask(mask)


def test_config_forms():
    assert O.parse_config("(0,0,0),(1,0,0)") == [(0, 0, 0), (1, 0, 0)]
    assert O.parse_config(" (0x1, 010 ,2) ") == [(1, 8, 2)]     # strtoul(.., 0)
    assert O.parse_config("(1,0,0x)") == [(1, 0, 0)]             # what follows a number: ignored
    assert O.parse_config("junk") == []


@pytest.mark.parametrize("cfg", ["(0,0)", "(0,0,0", "(a,0,0)", "(33,0,0)", "(0,1025,0)",
                                 "(0,0,129)", "(0,,0)"])
def test_config_bad(cfg):
    with pytest.raises(O.UsageError, match="config"):
        O.parse_config(cfg)


@pytest.mark.parametrize("app,msg", [
    ([], "-p PORTMASK"),
    (["-p", "3", "--lookup", "lpm", "--lookup", "em"], "Only one lookup"),
    (["-p", "3", "-E", "--lookup", "lpm"], "Only one lookup"),
    (["-p", "3", "--lookup", "hash"], "Invalid lookup"),
    (["-p", "3", "--lookup", "acl"], "not supported"),
    (["-p", "3", "--mode", "eventdev"], "poll mode"),
    (["-p", "1", "--config", "(1,0,0)"], "not enabled in port mask"),
    (["-p", "3", "--config", "(0,0,0)", "--eth-dest", "x,00:11:22:33:44:55"], "eth-dest"),
    (["-p", "3", "--config", "(0,0,0)", "--eth-dest", "32,00:11:22:33:44:55"], "RTE_MAX_ETHPORTS"),
    (["-p", "3", "--config", "(0,0,0)", "--eth-dest", "1,00:11:22:33:44"], "ethernet address"),
    (["-p", "3", "--config", "(0,0,0)", "--eth-dest", "1,00:11:22:33:44:1ff"], "ethernet address"),
    (["-p", "3", "--config", "(0,0,0)", "--max-pkt-len", "x"], "max-pkt-len"),
    (["-p", "3", "--config", "(0,0,0)", "--bogus"], "unknown option"),
    (["-p", "3", "--config", "(0,0,0)", "--burst", "0"], "burst"),
    (["-p", "3", "--config"], "expected one argument"),
])
def test_usage_errors(app, msg):
    with pytest.raises(O.UsageError, match=msg):
        parse(*app)


def test_mac_forms():
    assert O.parse_mac("0:1:2:3:4:5") == bytes(range(6))
    assert O.parse_mac("00-11-22-33-44-55") == bytes.fromhex("001122334455")
    assert O.parse_mac("0011:2233:4455") == bytes.fromhex("001122334455")
    with pytest.raises(O.UsageError):
        O.parse_mac("00:11-22:33:44:55")


# -- rule files ------------------------------------------------------------------------------

def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_bytes(text.encode())
    return str(p)


def test_lpm_file(tmp_path):
    f = write(tmp_path, "r4", "# comment\n\n   \t\nR10.0.0.0/8 1\nR10.1.0.0/0x10\t0 extra\n"
                              "R192.168.1.1/32 0x1F\n")
    assert R.read_lpm(f, False) == [R.LpmRule(bytes((10, 0, 0, 0)), 8, 1),
                                   R.LpmRule(bytes((10, 1, 0, 0)), 16, 0),
                                   R.LpmRule(bytes((192, 168, 1, 1)), 32, 31)]
    f6 = write(tmp_path, "r6", "R2001:db8::/32 1\nR::/1 0\n")
    r = R.read_lpm(f6, True)
    assert r[0].addr == bytes.fromhex("20010db8" + "00" * 12) and r[0].depth == 32
    assert r[1].depth == 1 and r[1].addr == bytes(16)


@pytest.mark.parametrize("text,msg", [
    ("", "no rule"),
    ("# only comments\n", "no rule"),
    ("R10.0.0.0/8 1\nX10.0.0.0/8 1\n", "Line 2: should start"),
    ("R10.0.0.0/33 1\n", "Line 1: parse rules error"),
    ("R10.0.0.0 1\n", "parse rules error"),
    ("R10.0.0/8 1\n", "parse rules error"),
    ("R010.0.0.0/8 1\n", "parse rules error"),
    ("R10.0.0.0/8 256\n", "parse rules error"),
    ("R10.0.0.0/8\n", "parse rules error"),
    ("R10.0.0.0/8 1\r\n", "parse rules error"),       # '\r' is not a delimiter for strtok
    ("R10.0.0.0/8x 1\n", "parse rules error"),
    (" R10.0.0.0/8 1\n", "no rule"),                 # no line starts with R: nothing to add
    (" R10.0.0.0/8 1\nR10.0.0.0/8 1\n", "Line 1: should start"),
])
def test_lpm_file_errors(tmp_path, text, msg):
    with pytest.raises(R.RouteFileError, match=msg):
        R.read_lpm(write(tmp_path, "r", text), False)


def test_lpm6_file_errors(tmp_path):
    with pytest.raises(R.RouteFileError, match="parse rules error"):
        R.read_lpm(write(tmp_path, "r", "R2001:db8::/129 1\n"), True)
    with pytest.raises(R.RouteFileError, match="parse rules error"):
        R.read_lpm(write(tmp_path, "r", "R10.0.0.0/8 1\n"), True)


def test_missing_file(tmp_path):
    with pytest.raises(R.RouteFileError, match="No such file"):
        R.read_lpm(str(tmp_path / "nope"), False)


def test_em_file(tmp_path):
    f = write(tmp_path, "e4", "R198.18.0.0 198.18.0.1 9 8 0x11 0\nR1.2.3.4 5.6.7.8 80 1000 6 1\n")
    a, b = R.read_em(f, False)
    assert a == R.EmRule(bytes((198, 18, 0, 0)), bytes((198, 18, 0, 1)), 9, 8, 17, 0)
    assert (b.dst_port, b.src_port, b.proto, b.port) == (80, 1000, 6, 1)
    f6 = write(tmp_path, "e6", "R2001:200::0 2001:200::1 9 9 17 1\n")
    (c,) = R.read_em(f6, True)
    assert c.dst == bytes.fromhex("20010200" + "00" * 12) and c.src[-1] == 1 and c.port == 1


def test_em_ipv4_bad_address_quirk(tmp_path):
    """DPDK's IPv4 EM parser returns inet_pton's 0 as success: the rule is kept, zeroed."""
    f = write(tmp_path, "e4", "Rbogus 1.2.3.4 9 9 17 1\nR1.2.3.4 nope 9 9 17 1\n")
    a, b = R.read_em(f, False)
    assert a == R.EmRule(bytes(4), bytes(4), 0, 0, 0, 0)
    assert b == R.EmRule(bytes((1, 2, 3, 4)), bytes(4), 0, 0, 0, 0)
    with pytest.raises(R.RouteFileError):          # IPv6 rejects the line
        R.read_em(write(tmp_path, "e6", "Rbogus 2001::1 9 9 17 1\n"), True)


@pytest.mark.parametrize("line", ["R1.2.3.4 5.6.7.8 9 9 17\n", "R1.2.3.4 5.6.7.8 65536 9 17 1\n",
                                  "R1.2.3.4 5.6.7.8 9 9 256 1\n", "R1.2.3.4 5.6.7.8 9 9 17 256\n",
                                  "R1.2.3.4 5.6.7.8 9 -1 17 1\n"])
def test_em_file_errors(tmp_path, line):
    with pytest.raises(R.RouteFileError, match="parse rules error"):
        R.read_em(write(tmp_path, "e", line), False)


def test_defaults_as_dpdk_files():
    """The built-in tables equal DPDK's own copies of them (lpm/em_default_v4/v6.cfg)."""
    lpm4, lpm6 = R.default_lpm(False), R.default_lpm(True)
    assert lpm4[3] == R.LpmRule(bytes((198, 18, 3, 0)), 24, 3) and len(lpm4) == 16
    assert lpm6[10].addr == bytes.fromhex("200102000000000a" + "00" * 8) and lpm6[10].depth == 64
    em4 = R.default_em(False)
    assert em4[5] == R.EmRule(bytes((198, 18, 5, 0)), bytes((198, 18, 5, 1)), 9, 9, 17, 5)
    em6 = R.default_em(True)
    assert em6[15].src == bytes.fromhex("200102000000000f" + "00" * 7 + "01")


def test_c_ulong():
    assert R.parse_c_ulong("0x1F") == 31 and R.parse_c_ulong("017") == 15
    assert R.parse_c_ulong(" 5") == 5 and R.parse_c_ulong("+5") == 5
    assert R.parse_c_ulong("5 ") is None and R.parse_c_ulong("") is None
    assert R.parse_c_ulong("08") is None           # octal: '8' is left over
    assert R.parse_c_ulong("-1") == (1 << 64) - 1  # strtoul's wrap
