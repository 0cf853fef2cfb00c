"""Internet checksums as DPDK's ``lib/net/rte_ip.h`` computes them: raw sums over memory and
over mbuf chains (:mod:`.raw`), IPv4 header and UDP/TCP checksums (:mod:`.ipv4`,
:mod:`.ipv6`), RFC 1624 incremental updates (:mod:`.incr`), a word-by-word model
(:mod:`.naive`) and the facade (:mod:`.api`).  docs/net.md describes them."""
