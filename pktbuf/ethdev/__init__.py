"""The port model: a table of ports of every type and the burst kernels that dispatch on it."""
