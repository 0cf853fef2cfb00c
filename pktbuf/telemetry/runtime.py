"""Where the telemetry socket lives, and how it is bound: DPDK 22.11's EAL and telemetry rules.

* The runtime directory (``eal_create_runtime_dir``, ``lib/eal/unix/eal_filesystem.c``) is
  ``<base>/dpdk/<file-prefix>``; ``<base>`` is ``$RUNTIME_DIRECTORY`` if set, else ``/var/run``
  for uid 0, else ``$XDG_RUNTIME_DIR``, else ``/tmp``.  ``<base>/dpdk`` and the prefix directory
  are created with mode 0700, one level at a time (``<base>`` itself must exist).
  ``dpdk-telemetry.py -f <prefix>`` computes the same path.
* The socket (``telemetry_v2_init`` and ``create_socket``, ``lib/telemetry/telemetry.c``) is an
  ``AF_UNIX`` ``SOCK_SEQPACKET`` socket at ``<runtime dir>/dpdk_telemetry.v2``, listening with a
  backlog of 1.  When bind fails and the directory exists, DPDK connects to the path: if that
  succeeds another process serves it (the path is in use), otherwise the file is stale and is
  unlinked and bound again.  A path in use makes DPDK try ``dpdk_telemetry.v2:1``, ``:2``, ...
  (a ``short`` counter: it gives up when it wraps).
"""
from __future__ import annotations

import errno
import os
import socket
import stat

from ..errors import InvalidArgument, TelemetryError

SOCKET_NAME = "dpdk_telemetry.v2"
DEFAULT_PREFIX = "rte"              # HUGEFILE_PREFIX_DEFAULT
MAX_SUFFIX = (1 << 15) - 1          # the suffix is a C short
SUN_PATH_MAX = 107                  # sizeof(sun_path) - 1: the path and its NUL
PROBE_TIMEOUT = 5.0                 # seconds a live server may take to accept the probe


def runtime_base() -> str:
    """The directory EAL puts ``dpdk/<prefix>`` under, for this process's user."""
    base = os.environ.get("RUNTIME_DIRECTORY")
    if not base:
        base = "/var/run" if os.getuid() == 0 else (os.environ.get("XDG_RUNTIME_DIR") or "/tmp")
    return base


def check_prefix(prefix) -> str:
    """A file prefix EAL accepts that names one directory: non-empty, no ``%`` (EAL refuses
    it), and -- since it becomes a path component -- no ``/``, NUL, ``.`` or ``..``."""
    if not isinstance(prefix, str):
        raise InvalidArgument(f"file_prefix must be a str, got {type(prefix).__name__}")
    if not prefix or prefix in (".", "..") or any(c in prefix for c in "%/\0"):
        raise InvalidArgument(f"invalid file_prefix {prefix!r}: it must be one path component "
                              "without '%'")
    return prefix


def runtime_dir(file_prefix: str, base: str | None = None) -> str:
    """``<base>/dpdk/<file_prefix>`` (``base`` defaults to :func:`runtime_base`)."""
    return os.path.join(runtime_base() if base is None else base, "dpdk",
                        check_prefix(file_prefix))


def create_runtime_dir(path: str) -> None:
    """Create ``path``'s parent and ``path`` with mode 0700 where missing, as EAL does."""
    for d in (os.path.dirname(path), path):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise TelemetryError(f"cannot create the runtime directory {d!r}: {e.strerror}",
                                 e.errno) from None


def _try_bind(path: str, directory: str) -> socket.socket | None:
    """A listening socket at ``path``, or None if a live server owns it (DPDK's
    ``create_socket``)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    try:
        try:
            sock.bind(path)
        except OSError:
            if not os.path.isdir(directory):
                raise TelemetryError(f"cannot access the runtime directory {directory!r}",
                                     errno.ENOENT) from None
            sock.settimeout(PROBE_TIMEOUT)
            try:
                sock.connect(path)
            except (TimeoutError, BlockingIOError):
                sock.close()           # a live server with a full backlog: in use
                return None
            except OSError:
                pass                   # nobody answers: a stale file, remove it and retry
            else:
                sock.close()
                return None
            sock.settimeout(None)
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                raise TelemetryError(f"cannot remove the stale socket {path!r}: {e.strerror}",
                                     e.errno) from None
            try:
                sock.bind(path)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:       # raced with another server: next suffix
                    sock.close()
                    return None
                raise TelemetryError(f"cannot bind {path!r}: {e.strerror}", e.errno) from None
        sock.listen(1)
        return sock
    except BaseException:
        sock.close()
        raise


def bind(directory: str) -> tuple[socket.socket, str, int]:
    """Listen at ``<directory>/dpdk_telemetry.v2`` or the first free ``:N`` suffix.

    Returns the socket, its path and N (0 without a suffix: the ``-i`` of
    ``dpdk-telemetry.py``)."""
    base = os.path.join(directory, SOCKET_NAME)
    for n in range(MAX_SUFFIX + 1):
        path = base if n == 0 else f"{base}:{n}"
        if len(os.fsencode(path)) > SUN_PATH_MAX:
            raise TelemetryError(f"socket path {path!r} is longer than a unix socket allows",
                                 errno.ENAMETOOLONG)
        sock = _try_bind(path, directory)
        if sock is not None:
            return sock, path, n
    raise TelemetryError(f"every suffix of {base!r} up to :{MAX_SUFFIX} is in use",
                         errno.EADDRINUSE)


def same_file(path: str, ident: tuple[int, int]) -> bool:
    """``path`` is still the socket file identified by (st_dev, st_ino)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) and (st.st_dev, st.st_ino) == ident
