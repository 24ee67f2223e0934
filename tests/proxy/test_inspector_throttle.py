"""proxy/inspector/throttle.py: failed logins per address, on a clock the test moves."""

from proxy.inspector.throttle import LoginThrottle


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_an_address_waits_once_it_failed_limit_times_within_a_window():
    clock = Clock()
    logins = LoginThrottle(limit=3, window=60, clock=clock)
    for _ in range(2):
        logins.failed("203.0.113.9")
        clock.now += 1
    assert logins.wait("203.0.113.9") == 0
    logins.failed("203.0.113.9")
    assert logins.wait("203.0.113.9") == 58  # the first failure is 2 s old
    assert logins.wait("198.51.100.7") == 0
    clock.now += 58
    assert logins.wait("203.0.113.9") == 0  # the first failure left the window
    logins.failed("203.0.113.9")
    assert logins.wait("203.0.113.9") == 1  # the second, 59 s old, is the oldest of three


def test_an_ipv6_host_counts_by_its_64_and_a_mapped_ipv4_as_that_address():
    logins = LoginThrottle(limit=2, clock=Clock())
    logins.failed("2001:db8:1:2::1")
    logins.failed("[2001:db8:1:2:ffff::9]")
    assert logins.wait("2001:db8:1:2::77") == 60
    assert logins.wait("2001:db8:1:3::1") == 0
    logins.failed("::ffff:203.0.113.9")
    logins.failed("203.0.113.9")
    assert logins.wait("203.0.113.9") == 60


def test_the_addresses_kept_are_bounded_the_least_recently_failing_dropped():
    logins = LoginThrottle(limit=1, clock=Clock(), max_addresses=2)
    for address in ("192.0.2.1", "192.0.2.2", "192.0.2.1", "192.0.2.3"):
        logins.failed(address)
    assert [logins.wait(a) > 0 for a in ("192.0.2.1", "192.0.2.2", "192.0.2.3")] == [
        True,
        False,
        True,
    ]
