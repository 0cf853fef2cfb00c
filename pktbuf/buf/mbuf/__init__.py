"""Mbuf kernels: layout, raw alloc/free, free paths, indirect mbufs, data ops, checks.

Import the kernels from :mod:`pktbuf.kernels`; the facade is :class:`pktbuf.Mbuf`.
"""
