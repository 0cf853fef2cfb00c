"""``python -m pktbuf.apps.l3fwd [EAL options] -- [l3fwd options]``: ``pktbuf l3fwd``."""
import sys

from .app import main

sys.exit(main())
