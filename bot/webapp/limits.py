"""How often one user may call the Mini App's API, and fetch its pictures: a sliding minute each."""
from __future__ import annotations

from collections import deque

API_PER_MINUTE = 120  # calls a user may make; the page makes one a second while a drawing is under way
IMAGES_PER_MINUTE = 600  # pictures: a page of results is 24 at once, and the viewer three more


class Window:
    """At most ``per_minute`` events a key in any minute: the rest are refused until the oldest is a minute old."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._seen: dict[int, deque[float]] = {}

    def admit(self, key: int, now: float) -> float:
        """0 when admitted; else the seconds until it would be."""
        seen = self._seen.setdefault(key, deque())
        while seen and now - seen[0] >= 60:
            seen.popleft()
        if len(seen) >= self.per_minute:
            return 60 - (now - seen[0])
        seen.append(now)
        if len(self._seen) > 10_000:  # users who stopped asking: forget them
            for idle in [k for k, times in self._seen.items() if not times or now - times[-1] >= 60]:
                del self._seen[idle]
        return 0.0
