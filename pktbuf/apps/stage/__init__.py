"""Stages: a user's ``@njit`` function called on every received burst inside a compiled
forwarding loop, deciding each packet's Tx port or its drop (``abi.py``: the calling convention;
``loop.py``: the loop, also the template of every generated one; ``gen.py``: the generated,
disk-cached loop per stage; ``api.py``: :class:`Stage`, validation, the runner).  See
docs/stages.md."""
