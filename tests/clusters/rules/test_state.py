"""Node state rules on hand-built facts: stale agents, unhealthy GPUs, idle healthy hardware.
No database."""

from __future__ import annotations

from datetime import timedelta

from clusters.rules.state import node_unavailable, stale_agent, unhealthy_gpu
from findings.choices import FindingType, Severity

from .fleets import NOW, fleet, node, one, server, slurm_node, unhealthy

STALE = NOW - timedelta(hours=3)


def test_a_ready_node_whose_agent_went_quiet():
    found = one(stale_agent(fleet([server(last_seen=STALE)], [node()])))
    assert (found.type, found.server_id, found.node_id) == (FindingType.STALE_AGENT, 1, 1)
    assert found.message == (
        "worker-1 (prod): the node is ready and schedulable but the agent on dgx-01 last "
        f"reported {STALE:%Y-%m-%d %H:%M} UTC; its hardware facts may be old"
    )


def test_a_fresh_agent_or_a_drained_node_is_not_stale():
    assert stale_agent(fleet([server()], [node()])) == []
    assert stale_agent(fleet([server(last_seen=STALE)], [node(schedulable=False)])) == []


def test_an_ecc_error_on_a_schedulable_node_is_a_warning():
    s = server(unhealthy=unhealthy(a={"ecc_errors_uncorrected": 2}))
    found = one(unhealthy_gpu(fleet([s], [node()])))
    assert (found.type, found.severity) == (FindingType.UNHEALTHY_GPU, Severity.WARNING)
    assert found.message == (
        "worker-1 (prod): schedulable, but dgx-01 has 1 GPU(s) with uncorrected ECC errors; "
        "drain it before jobs land on a bad GPU"
    )
    assert found.details == {"problems": ["1 GPU(s) with uncorrected ECC errors"], "gpus": ["a"]}


def test_a_lost_gpu_is_critical_and_a_drained_node_is_no_finding():
    s = server(unhealthy=unhealthy(a={"status": "lost"}, b={"remapped_rows_pending": True}))
    found = one(unhealthy_gpu(fleet([s], [node()])))
    assert found.severity == Severity.CRITICAL
    assert "1 GPU(s) lost; 1 GPU(s) with page retirement/row remap pending" in found.message
    assert unhealthy_gpu(fleet([s], [node(schedulable=False)])) == []


def test_a_drained_node_with_healthy_fresh_hardware_is_information():
    drained = slurm_node(
        ready=True, schedulable=False, state="drained", raw_state="DRAIN", reason="maint"
    )
    found = one(node_unavailable(fleet([server()], [drained])))
    assert (found.type, found.severity) == (FindingType.NODE_UNAVAILABLE, Severity.INFO)
    assert found.message == (
        "gpu001 (hpc): DRAIN in hpc (maint), while the hardware of dgx-01 looks healthy: "
        "8 GPUs idle"
    )


def test_an_unavailable_node_says_its_flags_when_no_reason_is_given():
    down = slurm_node(ready=False, state="down", state_flags=("NOT_RESPONDING",))
    assert (
        "down in hpc (NOT_RESPONDING)" in one(node_unavailable(fleet([server()], [down]))).message
    )


def test_an_unavailable_node_on_sick_or_stale_hardware_is_explained_elsewhere():
    down = node(ready=False)
    sick = server(unhealthy=unhealthy(a={"status": "error"}))
    assert node_unavailable(fleet([sick], [down])) == []
    assert node_unavailable(fleet([server(last_seen=STALE)], [down])) == []
    assert node_unavailable(fleet([server()], [node()])) == []
