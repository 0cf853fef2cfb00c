"""Packet headers: constants, wire-order field accessors and builders for Ethernet / VLAN /
QinQ (:mod:`.ether`), ARP (:mod:`.arp`), IPv4 with options (:mod:`.ipv4`), IPv6 and its
extension headers (:mod:`.ipv6`, :mod:`.ipv6_ext`), UDP / TCP / SCTP (:mod:`.l4`), ICMP and
ICMPv6 (:mod:`.icmp`) and GRE (:mod:`.gre`), over an mbuf's packet data, across segments
(:mod:`.access`); byte order in :mod:`.mem`.  A plain-Python model is :mod:`.naive`.
docs/net.md describes them."""
