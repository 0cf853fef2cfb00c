"""CRC32-C as ``rte_hash_crc`` computes it: register from ``init``, no inversion.  The values
are DPDK 22.11's own (keys = bytes 0, 1, 2, ...), and the machine's ``crc32`` instruction,
the table fallback and the bit-by-bit model must agree on anything."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from pktbuf.net.hash import crc, naive

SEQ = np.arange(64, dtype=np.uint8)
# rte_hash_crc(bytes 0..n-1, n, 0), printed by DPDK 22.11
DPDK_KAT = {4: 0x91545164, 8: 0x06040EB1, 13: 0x7AC1E03E, 16: 0x9BB99201, 37: 0x43F44466,
            40: 0x4A11475E, 64: 0xF8A5DD8C}


def test_dpdk_values():
    for n, want in DPDK_KAT.items():
        assert crc.hash_crc(SEQ, n, 0) == want, n
        assert crc.hash_crc_sw(SEQ, n, 0) == want, n
        assert naive.crc32c(bytes(range(n))) == want, n
    assert crc.hash_crc_4byte(0x12345678, 0) == 0xFA745634


def test_standard_check_value_needs_the_inversions_dpdk_leaves_out():
    b = np.frombuffer(b"123456789", np.uint8)
    assert crc.hash_crc(b, 9, 0xFFFFFFFF) ^ 0xFFFFFFFF == 0xE3069283     # CRC-32C "check"
    assert crc.hash_crc(b, 9, 0) != 0xE3069283


def test_hw_is_used_where_there_is_sse42():
    if crc.HAVE_SSE42:
        assert crc.hash_crc is crc.hash_crc_hw
        assert crc.hash_crc_hw(SEQ, 37, 7) == crc.hash_crc_sw(SEQ, 37, 7)


def test_bad_length():
    assert crc.hash_crc(SEQ, 65, 0) == -22 and crc.hash_crc(SEQ, -1, 0) == -22
    assert crc.hash_crc_sw(SEQ, 65, 0) == -22


@settings(max_examples=40)
@given(st.binary(min_size=0, max_size=80), st.integers(0, 0xFFFFFFFF))
def test_all_forms_agree(data, init):
    a = np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8)
    want = naive.crc32c(data, init)
    assert crc.hash_crc_sw(a, len(data), init) == want
    assert crc.hash_crc(a, len(data), init) == want


@settings(max_examples=20)
@given(st.integers(0, 0xFFFFFFFF), st.integers(0, 0xFFFFFFFF))
def test_4byte(v, init):
    assert crc.hash_crc_4byte(v, init) == naive.crc32c(v.to_bytes(4, "little"), init)
