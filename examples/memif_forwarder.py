"""memif forwarder: two memif server ports, MAC swap or l2fwd-style port forwarding.

Run with examples/memif_traffic.py (same --sock0/--sock1/--mode), or let `pktbuf demo` start
both.  The forwarding loop is pktbuf fwd's (pktbuf.apps.fwd.loop.fwd_loop): plain @njit code
calling rx_burst / tx_burst through the port table, printing one JSON line of counters every
half second.  Exit status 1 when a port failed or mbufs were not returned (docs/failures.md).

    python examples/memif_forwarder.py --mode l2fwd --seconds 10
"""
import sys

from pktbuf.apps.forwarder import forwarder_main

if __name__ == "__main__":
    sys.exit(forwarder_main())
