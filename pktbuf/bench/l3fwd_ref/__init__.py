"""DPDK's own l3fwd, built from Debian's ``dpdk-doc`` sources with one patched line, to test
``pktbuf l3fwd`` against (``build.py``, ``offloads.patch``)."""
