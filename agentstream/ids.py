"""The random names and ids the runtime makes: random in a worker, a seeded sequence in the harness.

A request's correlation id and the name of the process's reply topic must not collide between
processes, so a worker draws them from :func:`uuid.uuid4`. A test wants the opposite: the same run
twice gives the same records, headers included, so the harness seeds the app's ids
(:func:`seed_ids`) for the length of a run. Like the clock, the source is set per app by whoever runs
it and read with :func:`new_id`.
"""

from __future__ import annotations

import random
import uuid
import weakref
from typing import Any, Final

__all__ = ["new_id", "seed_ids"]

_seeded: Final[weakref.WeakKeyDictionary[Any, random.Random]] = weakref.WeakKeyDictionary()


def new_id(app: Any) -> str:
    """32 hex digits: a random UUID's, or the next of the app's seeded sequence."""
    rng = _seeded.get(app)
    if rng is None:
        return uuid.uuid4().hex
    return f"{rng.getrandbits(128):032x}"


def seed_ids(app: Any, seed: int | None) -> None:
    """Draw ``app``'s ids from a sequence seeded with ``seed`` from now on (None: random again)."""
    if seed is None:
        _seeded.pop(app, None)
    else:
        _seeded[app] = random.Random(seed)
