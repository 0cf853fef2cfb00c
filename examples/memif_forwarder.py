"""memif forwarder: two memif server ports, MAC swap or l2fwd-style port forwarding.

Run with examples/memif_traffic.py (same --sock0/--sock1/--mode), or let `pktbuf demo` start
both.  The forwarding loop itself is pktbuf.apps.forwarder.forward_loop: plain @njit code
calling memif_rx_burst / memif_tx_burst, printing one JSON line of counters every half second.

    python examples/memif_forwarder.py --mode l2fwd --seconds 10
"""
import sys

from pktbuf.apps.forwarder import forwarder_main

if __name__ == "__main__":
    sys.exit(forwarder_main())
