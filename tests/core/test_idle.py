"""The polling back-off (pktbuf.idle): its policy against a naive model, and its effects."""
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pktbuf.idle import (BUSY_POLL, IDLE_PAUSE, IDLE_SLEEP_MAX_US, IDLE_YIELD, idle_action,
                         idle_backoff, now_ns)


def naive_action(empty_polls: int, max_us: int) -> int:
    """The documented policy, spelled out: 64 pauses, 192 yields, then sleeps of 1 us doubling
    every 16 empty polls (at most 2**20 us), never above max_us, never below 1 us; a negative
    max_us (busy polling) pauses only."""
    if empty_polls < 64 or max_us < 0:
        return IDLE_PAUSE
    if empty_polls < 256:
        return IDLE_YIELD
    us = 1
    for _ in range(min((empty_polls - 256) // 16, 20)):
        us *= 2
    return max(1, min(us, max_us))


@settings(max_examples=300, deadline=None)
@given(n=st.one_of(st.integers(0, 700), st.integers(0, 1 << 40)),
       max_us=st.one_of(st.just(IDLE_SLEEP_MAX_US), st.just(BUSY_POLL),
                        st.integers(-(1 << 22), 1 << 22)))
def test_action_matches_the_naive_model(n, max_us):
    assert idle_action(n, max_us) == naive_action(n, max_us)


@pytest.mark.parametrize("n,want", [(0, IDLE_PAUSE), (63, IDLE_PAUSE), (64, IDLE_YIELD),
                                    (255, IDLE_YIELD), (256, 1), (271, 1), (272, 2),
                                    (256 + 16 * 9, 512), (256 + 16 * 10, IDLE_SLEEP_MAX_US),
                                    (10 ** 9, IDLE_SLEEP_MAX_US)])
def test_action_milestones(n, want):
    assert idle_action(n, IDLE_SLEEP_MAX_US) == want


@pytest.mark.parametrize("n", [0, 64, 255, 256, 10 ** 9])
def test_busy_poll_only_pauses(n):
    assert idle_action(n, BUSY_POLL) == IDLE_PAUSE


def test_busy_poll_never_sleeps():
    t = time.monotonic()
    for n in range(2000):                  # backing off, the sleeps alone would take > 1 s
        idle_backoff(n, BUSY_POLL)
    assert time.monotonic() - t < 0.5


def test_backoff_runs_every_stage():
    for n in (0, 100, 300, 10 ** 6):      # pause, yield, short sleep, capped sleep
        idle_backoff(n, 50)


def test_now_ns_is_the_monotonic_clock():
    a = time.monotonic_ns()
    b = now_ns()
    c = time.monotonic_ns()
    assert a <= b <= c
