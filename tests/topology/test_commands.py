"""topology.commands: the scheduler commands a page offers to copy, shell-quoted (pure)."""

from __future__ import annotations

import shlex

from topology.commands import REASON_CHARS, drain_reason, node_commands, scheduler_commands


def test_a_drain_reason_is_one_line_from_the_worst_finding_and_says_where_it_came_from():
    assert drain_reason("dgx-07: GPU 5\n  lost") == "atlas: dgx-07: GPU 5 lost"
    assert drain_reason(None) == drain_reason("  ") == "maintenance"
    long = drain_reason("x" * 500)
    assert len(long) == len("atlas: ") + REASON_CHARS and long.endswith("...")


def test_slurm_drains_and_resumes_and_kubernetes_cordons_and_uncordons():
    drain, resume = node_commands(kind="slurm", name="gpu007", reason="atlas: GPU 5 lost")
    assert drain.text == "scontrol update nodename=gpu007 state=drain reason='atlas: GPU 5 lost'"
    assert resume.text == "scontrol update nodename=gpu007 state=resume"
    cordon, uncordon = node_commands(kind="kubernetes", name="dgx-07", reason="ignored")
    assert (cordon.text, uncordon.text) == ("kubectl cordon dgx-07", "kubectl uncordon dgx-07")
    assert node_commands(kind="other", name="x", reason="y") == ()


def test_every_value_is_one_shell_word_whatever_it_holds():
    evil_name = "n1; rm -rf / #"
    evil_reason = 'it\'s $(reboot) `id` "quoted" <script>alert(1)</script>'
    drain, resume = node_commands(kind="slurm", name=evil_name, reason=evil_reason)
    words = shlex.split(drain.text)
    assert words == [
        "scontrol",
        "update",
        f"nodename={evil_name}",
        "state=drain",
        f"reason={evil_reason}",
    ]
    assert shlex.split(resume.text)[2] == f"nodename={evil_name}"
    (cordon, _) = node_commands(kind="kubernetes", name=evil_name, reason="")
    assert shlex.split(cordon.text) == ["kubectl", "cordon", evil_name]


def test_scheduler_commands_keep_the_nodes_order_and_skip_unknown_kinds():
    groups = scheduler_commands(
        [("slurm", "gpu007", "hpc"), ("weird", "w", "x"), ("kubernetes", "dgx-07", "prod")],
        message="GPU 5 lost",
    )
    assert [(g.node, g.cluster, g.kind) for g in groups] == [
        ("gpu007", "hpc", "slurm"),
        ("dgx-07", "prod", "kubernetes"),
    ]
    assert groups[0].commands[0].text.endswith("reason='atlas: GPU 5 lost'")
