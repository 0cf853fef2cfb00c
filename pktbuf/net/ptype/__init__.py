"""Software packet types: ``RTE_PTYPE_*`` values (:mod:`.values`), ``rte_net_get_ptype``'s
parser (:mod:`.parse`), its mbuf and burst forms (:mod:`.mbuf`), names (:mod:`.names`), a
plain-Python model (:mod:`.naive`) and the facade (:mod:`.api`).  docs/net.md describes them."""
