"""Longest-prefix-match tables: IPv4 DIR-24-8 as DPDK 22.11's ``rte_lpm`` (``lib/lpm/rte_lpm.c``)
and IPv6 as ``rte_lpm6`` (``lib/lpm/rte_lpm6.c``).  Kernels in ``lpm4.py`` / ``lpm6.py``, the
block layouts in ``layout.py``, the hashed rule stores in ``rules.py``, a pure-Python model in
``naive.py``, the facade classes in ``api.py``.  See ``docs/lpm.md``."""
