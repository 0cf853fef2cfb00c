"""Measurement code shared by ``pktbuf bench`` and the asv suite in ``asv_bench/``.

Loops that time pktbuf run inside Numba (never one Python call per packet) and read the CPU's
time-stamp counter around exactly what they measure, as DPDK's own benchmarks do.
"""
