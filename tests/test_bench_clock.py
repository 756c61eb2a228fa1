"""A benchmark run's clock: the run-queue wait it records tells a run timed under load from
one timed quietly, and the report keeps loaded seconds out of its time ratio."""

import os
import subprocess
import sys
import time

import pytest

from rlfw.bench.clock import LOADED_WAIT_SHARE, RunClock, run_queue_wait_s, timed_under_load
from rlfw.bench.report import _goals, markdown, summarize

needs_schedstat = pytest.mark.skipif(
    run_queue_wait_s() is None, reason="the kernel reports no per-thread schedstat"
)


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@needs_schedstat
def test_a_run_sharing_its_core_with_a_busy_process_is_seen_waiting():
    core = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    rival = subprocess.Popen(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"]
    )
    try:
        os.sched_setaffinity(0, {core})
        time.sleep(0.3)  # the rival is up and spinning on our core
        with RunClock() as clock:
            _spin(1.0)
    finally:
        os.sched_setaffinity(0, before)
        rival.kill()
        rival.wait()
    # two runnable threads on one core: each waits about half the wall time
    assert clock.wait_share > 2 * LOADED_WAIT_SHARE, clock.wait_share
    assert clock.wall_s >= 1.0


def _run(framework, seed, wall_s, wait_share="absent"):
    run = {
        "framework": framework,
        "seed": seed,
        "status": "done",
        "final_return": 1.0 + seed,
        "wall_s": wall_s,
        "steps_per_s": 1000 / wall_s,
        "settings": "s",
    }
    if wait_share != "absent":
        run["wait_share"] = wait_share
    return run


def test_seconds_taken_under_load_are_left_out_of_the_time_and_named():
    ours = summarize([_run("rlfw", 0, 100, 0.01), _run("rlfw", 1, 300, 0.5), _run("rlfw", 2, 120)])
    # seed 0 only: seed 1 waited half the time, seed 2's load is unknown and seed 0 is known quiet
    assert ours["wall_s"] == pytest.approx(100)
    assert ours["timed_under_load"] == [1] and ours["load_unrecorded"] == [2]
    assert ours["finals"] == [1.0, 2.0, 3.0]  # returns count whatever the load
    assert timed_under_load({"wait_share": 0.02}) is False and timed_under_load({}) is None

    peer = summarize([_run("sb3", 0, 180, 0.0)])
    goals = _goals({"rlfw": ours, "sb3": peer}, 0.5)
    assert goals["time_ratio"] == pytest.approx(100 / 180) and goals["time_goal_met"] is False

    loaded_peer = summarize([_run("sb3", 0, 400, 0.6)])
    assert loaded_peer["wall_s"] is None
    goals = _goals({"rlfw": ours, "sb3": loaded_peer}, 0.5)
    assert goals["time_ratio"] is None and goals["time_goal_met"] is None
    text = markdown(
        {
            "suite": "t",
            "about": "a",
            "machine": "m",
            "entries": [
                {
                    "algo": "dqn",
                    "env": "E",
                    "steps": 10,
                    "references": [],
                    "curve_png": None,
                    "frameworks": {"rlfw": ours, "sb3": loaded_peer},
                    "goals": goals,
                }
            ],
        }
    )
    assert "rlfw: seeds [1] were timed under load" in text
    assert "rlfw: seeds [2] ran before runs recorded their load; their seconds are left out" in text
    assert "| under load | under load |" in text
    assert "time: not measured: one side's runs were all timed under load" in text


def test_unrecorded_seconds_are_read_only_where_no_run_was_recorded_quiet():
    old = summarize([_run("sb3", 0, 200), _run("sb3", 1, 240), _run("sb3", 2, 500, 0.4)])
    assert old["wall_s"] == pytest.approx(220)  # seeds 0 and 1: all there is to read
    assert old["load_unrecorded"] == [0, 1] and old["timed_under_load"] == [2]
    text = markdown(
        {
            "suite": "t",
            "about": "a",
            "machine": "m",
            "entries": [
                {
                    "algo": "dqn",
                    "env": "E",
                    "steps": 10,
                    "references": [],
                    "curve_png": None,
                    "frameworks": {"sb3": old},
                    "goals": {},
                }
            ],
        }
    )
    assert "no seed was recorded as timed quietly: the seconds are theirs" in text
