"""``pktbuf l3fwd``: DPDK 22.11's l3fwd example as a stage over pktbuf's ports (``options.py``:
the command line; ``routes.py``: rule files and the default tables; ``kernels.py``: the
per-packet stage; ``naive.py``: a pure-Python model of it; ``app.py``: the run).  See
docs/l3fwd.md."""
