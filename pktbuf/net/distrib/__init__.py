"""The software distributor: one Rx stage hands mbufs to workers over rings, by RSS."""
