"""The process's file descriptors: the limit raised at worker start, and the count ``/status`` shows.

A worker holds a descriptor per socket (brokers, web clients) and per open store file; RocksDB's
files are bounded per store (:data:`agentstream.tables.rocksdb.MAX_OPEN_FILES`), but many table
partitions plus web connections can still pass the usual soft limit of 1024 while the hard limit
allows far more. Raising the soft limit to the hard one is what the process may do without
privileges, and what servers holding many files commonly do at start.
"""

from __future__ import annotations

import logging
import os

__all__ = ["open_descriptors", "raise_descriptor_limit", "descriptor_limit"]

log = logging.getLogger(__name__)

try:
    import resource
except ImportError:  # Windows: no RLIMIT_NOFILE
    resource = None  # type: ignore[assignment]


def descriptor_limit() -> int | None:
    """The soft limit on open descriptors (None where the platform has none to read)."""
    if resource is None:
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def raise_descriptor_limit() -> tuple[int, int] | None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; ``(before, after)``, or None where the
    platform has no such limit. A refusal (a hard limit the kernel caps lower) keeps the old one,
    with a warning: the worker still runs, closer to the limit."""
    if resource is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or soft == resource.RLIM_INFINITY:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open-file limit from %d to %d (%s); keeping %d", soft, hard, exc, soft)
        return soft, soft
    log.info("open-file limit raised from %d to %d (the hard limit)", soft, hard)
    return soft, hard


def open_descriptors() -> int | None:
    """Descriptors this process holds now (None where the platform does not list them)."""
    for directory in ("/proc/self/fd", "/dev/fd"):
        try:
            # one of the entries is the descriptor listing the directory itself
            return max(0, len(os.listdir(directory)) - 1)
        except OSError:
            continue
    return None
