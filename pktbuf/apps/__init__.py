"""Applications on top of the library: what a pktbuf user would write, shipped ready to run.

* :mod:`.demo` -- ``pktbuf demo``: starts a forwarder and a traffic process and prints live
  statistics;
* :mod:`.forwarder` -- the forwarder process (two memif server ports, MAC swap or l2fwd);
* :mod:`.traffic` -- the traffic process (generator and sink, memif clients);
* :mod:`.txonly` -- the packet generator step both the traffic app and the memif benchmark
  use: testpmd's ``txonly`` work per packet (headers written, payload not);
* :mod:`.counters` -- the counter words the loops fill and the JSON line each process prints;
* :mod:`.testpmd` -- a driver for ``dpdk-testpmd`` as a memif peer (interop tests, benchmark).

The loops are plain ``@njit`` code over the public kernels (``pktbuf.kernels``); nothing in the
library imports this package.
"""
