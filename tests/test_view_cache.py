"""The views cache is pruned: each view of a big eval left tens of MB behind for good."""

from __future__ import annotations

import os
import time

import pytest

from vftui.run_files import view_cache
from vftui.run_files.files import RunFiles

pytestmark = pytest.mark.unit
HOUR = 3600.0


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def aged(name: str, seconds: float, size: int = 10) -> os.PathLike:
    path = view_cache.folder() / name
    path.write_bytes(b"x" * size)
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def test_what_nobody_opened_for_a_week_goes_and_the_rest_stays_under_the_cap():
    week_old, day_old, fresh = (
        aged("a.jsonl", 8 * 24 * HOUR),
        aged("b.jsonl", 24 * HOUR),
        aged("c.jsonl", 60),
    )
    assert view_cache.prune() == [week_old]
    assert day_old.exists() and fresh.exists()


def test_past_the_cap_the_least_recently_opened_go_but_never_one_opened_within_the_hour():
    older, old, fresh = (
        aged("a.jsonl", 3 * HOUR, 100),
        aged("b.jsonl", 2 * HOUR, 100),
        aged("c.jsonl", 60, 100),
    )
    assert view_cache.prune(max_bytes=150) == [older, old]
    assert fresh.exists(), "a view may still be reading it"


def test_a_view_made_again_is_marked_opened_with_its_drop_log():
    path = aged("v.jsonl", 8 * 24 * HOUR)
    drops = RunFiles(path).drops
    drops.write_text("")
    os.utime(drops, (0, 0))
    assert view_cache.reuse(path) and not view_cache.reuse(path.with_name("none.jsonl"))
    assert view_cache.prune() == [], "opened just now: kept"
    assert time.time() - drops.stat().st_mtime < HOUR
