"""Software RSS: the Toeplitz hash (:mod:`.thash`), the hash input taken from a frame
(:mod:`.tuple`) and the redirection table (:mod:`.reta`), with a bit-by-bit model of the hash
in :mod:`.naive` for the tests.  docs/rss.md describes them."""
