"""The Pythonic facade over the kernels: domains, pools, mbufs."""
from .domain import Domain, default_domain, set_debug
from .mbuf import Mbuf
from .pools import Mempool, PktmbufPool

__all__ = ["Domain", "default_domain", "set_debug", "Mempool", "PktmbufPool", "Mbuf"]
