"""The registry: one rule per finding type, all run over one fleet. No database."""

from __future__ import annotations

from clusters.rules.registry import FLEET_RULES, RULES, SERVER_RULES, evaluate
from findings.choices import Family, FindingType
from findings.facts import FindingFact

from .fleets import fleet, node, server


def test_every_reconciliation_finding_type_has_its_rule():
    names = {rule.__name__ for rule in RULES}
    assert names == set(FindingType.of_family(Family.RECONCILIATION))


def test_a_healthy_bound_fleet_has_no_findings():
    assert (
        evaluate(fleet([server(1), server(2)], [node(1, server_id=1), node(2, server_id=2)])) == {}
    )


def test_evaluate_keys_findings_by_type_and_subject():
    found = evaluate(fleet([server(1), server(2)], [node(1, server_id=1)]))
    assert list(found) == [("server_without_node", "server:2")]
    assert isinstance(found["server_without_node", "server:2"], FindingFact)


def test_evaluate_runs_only_the_rules_it_is_given():
    f = fleet([server(1, mig_pending=1), server(2)], [node(1, server_id=1)])
    assert len(evaluate(f)) == 2
    (rule,) = (r for r in RULES if r.__name__ == "mig_pending_reboot")
    assert list(evaluate(f, (rule,))) == [("mig_pending_reboot", "server:1")]


def test_server_rules_and_fleet_rules_split_the_registry():
    assert set(SERVER_RULES).isdisjoint(FLEET_RULES)
    assert set(SERVER_RULES) | set(FLEET_RULES) == set(RULES)
    assert {r.__name__ for r in FLEET_RULES} == {
        "node_without_server",
        "duplicate_identity",
        "driver_skew",
        "ip_address_duplicate",
        "rack_units_overlap",
        "node_declared_twice",
        "declared_node_conflict",
    }
