"""The suite's own scheduling: what conftest marks to run one at a time reaches xdist, which reads the groups
as it collects (a hook of ours that ran after it left every serial, long and shared-folder test free to run
beside the others: the runs screen's tests rebuilt one fixed folder at once and listed each other's runs)."""

from __future__ import annotations

import pytest


@pytest.mark.serial
def test_a_serial_test_runs_in_the_serial_group(request, worker_id):
    if worker_id == "master":
        pytest.skip("one process runs every test one at a time (-n 0)")
    assert request.node.nodeid.endswith("@serial"), request.node.nodeid
