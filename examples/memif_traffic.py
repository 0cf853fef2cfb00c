"""memif traffic: a generator + sink process (memif clients of the forwarder).

Sends 64-byte UDP frames (headers written, as testpmd's txonly) into port 0 as fast as the
ring takes them and counts (and checks the MACs of) what comes back: on port 0 in macswap
mode, on port 1 in l2fwd mode.  The loop is
pktbuf.apps.traffic.traffic_loop.  Start examples/memif_forwarder.py first.

    python examples/memif_traffic.py --mode l2fwd --seconds 10 --size 64
"""
import sys

from pktbuf.apps.traffic import traffic_main

if __name__ == "__main__":
    sys.exit(traffic_main())
