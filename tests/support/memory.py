"""How much Python memory a piece of state holds, for the tests that show an index or buffer no
longer grows with the keys (issue 45, finding 6)."""

from __future__ import annotations

import collections
import gc
import sys
from collections.abc import Iterable
from typing import Any

CONTAINERS = (list, set, frozenset, dict, tuple, collections.deque)


def held_bytes(roots: Iterable[Any], modules: tuple[str, ...]) -> int:
    """Bytes reachable from ``roots``: containers and objects of a class defined in one of
    ``modules`` are followed, anything else (a table partition, the app...) counts its own size
    only, so what is measured is the state those modules keep, not what it points at."""
    seen: set[int] = set()
    stack: list[Any] = list(roots)
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, CONTAINERS) or type(obj).__module__ in modules:
            stack.extend(o for o in gc.get_referents(obj) if not isinstance(o, type))
    return total
