"""Packet libraries: header parsing, packet types, checksums, LPM and exact-match tables (DPDK's
``lib/net``, ``lib/lpm``, ``lib/hash``)."""
