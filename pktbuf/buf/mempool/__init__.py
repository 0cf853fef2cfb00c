"""Mempool kernels (per-lcore caches over a lock-free ring) and the domain layout."""
