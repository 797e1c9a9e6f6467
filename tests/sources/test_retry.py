"""Retry: its documented defaults, its validation, and its waits (no network needed)."""

import dataclasses
import math

import pytest

from dataloader.sources import Retry


def test_defaults_are_the_documented_ones():
    retry = Retry()
    assert (retry.max_retries, retry.initial_backoff, retry.max_backoff) == (3, 0.1, 10.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        retry.max_retries = 5


def test_zero_retries_and_zero_backoff_are_valid():
    retry = Retry(max_retries=0, initial_backoff=0, max_backoff=0)
    assert retry.backoff(1) == 0.0
    assert retry.backoff(1, retry_after="5") == 0.0  # capped by max_backoff


@pytest.mark.parametrize("kwargs", [
    {"max_retries": -1}, {"max_retries": 1.5}, {"max_retries": "3"},
    {"initial_backoff": -0.1}, {"initial_backoff": math.inf}, {"initial_backoff": math.nan},
    {"max_backoff": -1}, {"max_backoff": math.inf}, {"max_backoff": "10"},
])
def test_invalid_arguments_name_themselves(kwargs):
    (name, value), = kwargs.items()
    with pytest.raises(ValueError, match=name if name == "max_retries" else repr(value)):
        Retry(**kwargs)


def test_waits_grow_to_the_ceiling_and_honour_retry_after():
    retry = Retry(max_retries=6, initial_backoff=0.25, max_backoff=2.0)
    assert [retry.ceiling(n) for n in range(1, 6)] == [0.25, 0.5, 1.0, 2.0, 2.0]
    assert all(0.0 <= retry.backoff(2) <= 0.5 for _ in range(100))
    assert retry.backoff(3, retry_after="1.5") == 1.5
    assert retry.backoff(3, retry_after="-4") == 0.0
    assert retry.backoff(3, retry_after="nan") <= 1.0  # not a number of seconds: the usual wait
    assert retry.backoff(3, retry_after="Fri, 31 Dec 9999 23:59:59 GMT") == 2.0


def test_only_transient_statuses_are_retried():
    assert {status for status in range(100, 600) if Retry().retries_status(status)} == {
        408, 429, 500, 502, 503, 504}


def test_consecutive_waits_fill_a_window_doubling_up_to_the_cap():
    # "Full jitter": before retry n the wait is anywhere in [0, ceiling(n)], the
    # ceiling doubling from initial_backoff until max_backoff caps it.
    import random
    import statistics

    retry = Retry(max_retries=8, initial_backoff=0.05, max_backoff=1.0)
    random.seed(4)
    for n in range(1, 9):
        ceiling = min(1.0, 0.05 * 2 ** (n - 1))
        assert retry.ceiling(n) == pytest.approx(ceiling)
        waits = [retry.backoff(n) for _ in range(400)]
        assert all(0.0 <= wait <= ceiling for wait in waits), n
        # The whole window, evenly: not a narrower one, nor the previous retry's.
        assert min(waits) < 0.05 * ceiling and max(waits) > 0.95 * ceiling, n
        assert statistics.fmean(waits) == pytest.approx(ceiling / 2, rel=0.15), n


def test_retry_after_replaces_one_wait_only_and_is_capped():
    retry = Retry(max_retries=5, initial_backoff=0.1, max_backoff=0.4)
    for n in (1, 3, 5):
        assert retry.backoff(n, retry_after="0.25") == 0.25
        assert retry.backoff(n, retry_after="7") == 0.4
        assert 0.0 <= retry.backoff(n) <= retry.ceiling(n)
