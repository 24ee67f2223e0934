"""Failed inspector logins, counted per client address, so a key cannot be guessed at line speed.

After `LIMIT` failed logins from one address within `WINDOW` seconds, that address's logins
get a 429 with `Retry-After` until the oldest of those failures is a window old, whatever key
they present: checking it would tell a guesser when a guess is right. Other addresses are not
held, so a right key from elsewhere always logs in. A success clears nothing (a guesser with
a key of their own could otherwise clear their count between guesses). An IPv6 address counts
by its /64, the block one host is usually given, and anything that is no IP address (a proxy
passing on a client's own `X-Forwarded-For`) under one name. At most `MAX_ADDRESSES` addresses
are kept, the least recently failing dropped first, so a flood of addresses costs bounded
memory.

The address is the one uvicorn reports: behind a reverse proxy it trusts (`X-Forwarded-For`,
from loopback by default), the client's own.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

LIMIT = 10  # failed logins an address may make within a window
WINDOW = 60.0  # seconds
MAX_ADDRESSES = 10_000
NOT_AN_ADDRESS = "not an IP address"


class LoginThrottle:
    """Failed logins per address in the last window; how long an address must wait."""

    def __init__(
        self,
        limit: int = LIMIT,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
        max_addresses: int = MAX_ADDRESSES,
    ) -> None:
        self._limit = limit
        self._max_addresses = max_addresses
        self._window = window
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def wait(self, address: str) -> int:
        """Whole seconds before `address` may try to log in again; 0: it may now."""
        failures = self._failures.get(_block(address))
        if failures is None or len(failures) < self._limit:
            return 0
        left = self._window - (self._clock() - failures[0])
        return math.ceil(left) if left > 0 else 0

    def failed(self, address: str) -> None:
        """Count a failed login from `address`."""
        block = _block(address)
        failures = self._failures.pop(block, None) or deque(maxlen=self._limit)
        failures.append(self._clock())
        self._failures[block] = failures  # last: the most recently failing
        while len(self._failures) > self._max_addresses:
            self._failures.popitem(last=False)


def _block(address: str) -> str:
    """The address a client's failures count under: its /64 for IPv6, else itself; one name
    for all that are no IP address (each its own, of up to a header's size, would be a fresh
    ten guesses and up to 16 KiB kept)."""
    try:
        parsed = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return NOT_AN_ADDRESS
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:  # ::ffff:203.0.113.9 is 203.0.113.9
            return str(parsed.ipv4_mapped)
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)
