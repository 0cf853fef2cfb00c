"""DPDK's own l3fwd, built from Debian's ``dpdk-doc`` sources with one patched line, to test
``pktbuf l3fwd`` against (``build.py``, ``offloads.patch``); and, for ``pktbuf bench l3fwd``,
with ``cycles.patch`` too, which counts its busy TSC cycles."""
