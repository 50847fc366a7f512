"""bench/bookkeeping.py works: every part of a finished request's bookkeeping is measured (never
a timing assertion), and the process's logging is as it was."""

from __future__ import annotations

import logging

from bench import bookkeeping
from gateway.access_log import ACCESS_LOGGER


def test_every_part_is_measured_and_logging_put_back():
    root, access = logging.getLogger(), logging.getLogger(ACCESS_LOGGER)
    before = (list(root.handlers), list(access.handlers), access.propagate)
    table = bookkeeping.measure(reps=50, rounds=1)
    assert set(table) == {"metrics", "access line", "inspector capture", "record", "account (all)"}
    assert all(value > 0 for value in table.values())
    assert (list(root.handlers), list(access.handlers), access.propagate) == before
