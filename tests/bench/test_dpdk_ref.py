"""The DPDK reference program: toolchain detection, the build cache, the protocol, failures."""
from __future__ import annotations

import os
import re
import shutil
import statistics
import stat

import pytest

from pktbuf.bench import dpdk_ref as D

from .conftest import dpdk_or_skip, dpdk_runtime_entries


def _bin_dir(tmp_path, *tools):
    """A directory holding links to only ``tools``, to be the whole PATH."""
    d = tmp_path / "bin"
    d.mkdir()
    for t in tools:
        os.symlink(shutil.which(t), d / t)
    return d


def test_no_pkg_config_is_missing_not_failed(tmp_path):
    env = dict(os.environ, PATH=str(_bin_dir(tmp_path)))
    with pytest.raises(D.DpdkMissing, match="no pkg-config"):
        D.toolchain(env)


def test_no_libdpdk_is_missing(tmp_path):
    if shutil.which("pkg-config") is None:
        pytest.skip("no pkg-config here")
    env = dict(os.environ, PKG_CONFIG_LIBDIR=str(tmp_path), PKG_CONFIG_PATH=str(tmp_path))
    with pytest.raises(D.DpdkMissing, match="pkg-config knows no libdpdk"):
        D.toolchain(env)


def test_no_compiler_is_missing(tmp_path):
    dpdk_or_skip()
    env = dict(os.environ, PATH=str(_bin_dir(tmp_path, "pkg-config")))
    env.pop("CC", None)
    with pytest.raises(D.DpdkMissing, match="no C compiler"):
        D.toolchain(env)


def test_build_is_cached_by_source_hash(tmp_path):
    dpdk_or_skip()
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    exe = D.build(env=env)
    assert exe.parent == tmp_path / "pktbuf" and os.access(exe, os.X_OK)
    mtime = exe.stat().st_mtime_ns
    assert D.build(env=env) == exe and exe.stat().st_mtime_ns == mtime     # not rebuilt
    changed = tmp_path / "changed.c"
    changed.write_text(D.SOURCE.read_text() + "\n/* another source */\n")
    exe2 = D.build(changed, env=env)
    assert exe2 != exe and exe2.is_file()
    assert not [p for p in exe.parent.iterdir() if p.name not in (exe.name, exe2.name)]


def test_broken_source_fails_to_build(tmp_path):
    dpdk_or_skip()
    bad = tmp_path / "bad.c"
    bad.write_text("#include <rte_eal.h>\nint main(void) { return rte_no_such_function(); }\n")
    with pytest.raises(D.DpdkFailed, match="building the DPDK reference failed"):
        D.build(bad, env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path)))
    assert not list((tmp_path / "pktbuf").iterdir())        # no half-written binary left


def test_reference_runs_the_cases(ref_cache):
    _, exe = ref_cache
    before = dpdk_runtime_entries()
    with D.DpdkRef(exe, lcores=2) as ref:
        info = ref.info
        assert info["dpdk"].startswith("DPDK 22.11")
        assert info["eal_args"] == ref.eal and "--no-huge" in ref.eal
        assert info["hugepages"] is False and info["lcores"] == 2
        assert (info["pool_n"], info["cache"], info["dataroom"]) == (8192, 256, 2176)
        assert info["tsc_hz"] > 0 and info["tsc_pair_cyc"] > 0
        assert "DPDK 22.11" in ref.label() and "pktbuf-ref-*" in ref.label()
        drop = 20e-6 * info["tsc_hz"]
        for case, burst, chunk in (("roundtrip", 32, 3), ("flat", 32, 1), ("grouped", 2, 1),
                                   ("alternating", 33, 1), ("shared", 1, 1), ("chain2", 256, 1),
                                   ("single", 32, 2), ("raw", 256, 5)):
            r = ref.core(case, burst, 40, chunk, drop, reps=3)
            assert (r["case"], r["burst"], r["nchunks"], r["chunk"], r["reps"]) == \
                (case, burst, 40, chunk, 3)
            assert len(r["samples_cyc"]) == 3
            assert r["median_cyc"] == pytest.approx(statistics.median(r["samples_cyc"]), abs=1e-3)
            assert r["kept"] + r["dropped"] == 3 * 40          # every interval counted once
            ref.check()                                  # every mbuf back in its pool
        h1 = ref.heap1("malloc", 64, 10, 7)
        assert len(h1["samples_cyc"]) == 7 and h1["fails"] == 0
        h1z = ref.heap1("zmalloc", 1 << 20, 2, 3)
        assert len(h1z["samples_cyc"]) == 3
        h2 = ref.heap2("malloc", 4096, 500, 2)
        assert len(h2["wall_ns"]) == 2 and len(h2["share"]) == 2 and min(h2["wall_ns"]) > 0
        with pytest.raises(D.DpdkFailed, match="refused"):
            ref.core("nosuchcase", 32, 4, 1, drop)
    assert ref.proc.returncode is not None
    assert dpdk_runtime_entries() <= before           # no runtime directory left behind
    assert not D.runtime_dir(ref.prefix).exists()


def test_reference_reports_every_interval_dropped(ref_cache):
    _, exe = ref_cache
    with D.DpdkRef(exe, lcores=1) as ref:
        with pytest.raises(D.DpdkFailed, match="every interval was dropped"):
            ref.core("flat", 32, 10, 1, 0)


def test_reference_refuses_chunks_of_free_calls(ref_cache):
    _, exe = ref_cache
    with D.DpdkRef(exe, lcores=1) as ref:
        with pytest.raises(D.DpdkFailed, match="out of range"):
            ref.core("flat", 32, 10, 2, 1 << 40)         # a free_bulk call is one interval


def _script(tmp_path, body: str):
    p = tmp_path / "fake_ref"
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return p


@pytest.mark.parametrize("body, words", [
    ('echo "hello, not json"', "not a JSON object"),
    ('echo "dpdk_ref: rte_eal_init failed" >&2; exit 3', "exited (exit status 3)"),
    ('echo \'{"type": "info"}\'', "where 'ready' was expected"),
    ('echo \'{"type": "ready"}\'; read x; echo \'{"type": "error", "cmd": "info", "error": "no"}\'',
     "refused 'info': no"),
])
def test_a_broken_reference_is_failed(tmp_path, body, words):
    with pytest.raises(D.DpdkFailed, match=re.escape(words)) as e:
        D.DpdkRef(_script(tmp_path, body))
    if "exit 3" in body:
        assert "rte_eal_init failed" in str(e.value)      # its stderr is in the message


def test_a_silent_reference_times_out(tmp_path):
    with pytest.raises(D.DpdkFailed, match="no answer within 1 s"):
        D.DpdkRef(_script(tmp_path, "exec sleep 60"), timeout=1)


def test_eal_args_have_no_hugepages_and_a_private_prefix():
    a = D.eal_args("pktbuf-ref-x", 2)
    assert a[:3] == ["--no-huge", "-m", "512"] and "--no-pci" in a and "--no-shconf" in a
    assert "--file-prefix=pktbuf-ref-x" in a
    lc = next(x for x in a if x.startswith("--lcores="))
    assert lc.count("@(") == 2
