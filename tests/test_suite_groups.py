"""The suite's own scheduling: what conftest marks to run one at a time reaches xdist, which reads the groups
as it collects (a hook of ours that ran after it left every serial, long and shared-folder test free to run
beside the others: the runs screen's tests rebuilt one fixed folder at once and listed each other's runs); and
each test starting in its worker's own environment, whatever code an earlier test ran in process set."""

from __future__ import annotations

import os

import pytest

from tests import conftest

SET_IN_PROCESS = "VFTUI_TEST_SET_BY_AN_EARLIER_TEST"


@pytest.mark.serial
def test_a_serial_test_runs_in_the_serial_group(request, worker_id):
    if worker_id == "master":
        pytest.skip("one process runs every test one at a time (-n 0)")
    assert request.node.nodeid.endswith("@serial"), request.node.nodeid


@pytest.mark.unit
@pytest.mark.xdist_group("set-then-gone")  # one worker, in this order
def test_code_run_in_process_sets_a_variable_as_the_collectors_quiet_switches_do():
    os.environ[SET_IN_PROCESS] = "1"  # not through monkeypatch: nothing of pytest's would undo it


@pytest.mark.unit
@pytest.mark.xdist_group("set-then-gone")
def test_the_next_test_starts_without_it_and_its_dashboards_fork_their_collector():
    """Every later dashboard of the worker spawned its collector afresh (4 CPU-s each) while one was left."""
    assert SET_IN_PROCESS not in os.environ
    assert conftest._environment() == conftest._worker_environment
