"""Every intake, a wrong type at every depth: never a 5xx, and what is accepted ends somewhere.

A deterministic mutator walks every path of a valid body (every key and list index, at every
depth) and puts there one value of another JSON type, chosen by an RNG seeded by the path;
each object also loses one key. Text bodies are cut, have a line printed twice, a character
flipped, a NUL or an overlong line. ``ATLAS_FUZZ_EXAMPLES`` adds that many random cases per
intake (a few by default), so the tier stays bounded in CI and can run long on demand.

Each case is POSTed through the test client with the on-commit tasks run. The answer is never
a 5xx; a 400 names the fields at fault (``errors`` by path, or DRF's fields at the top level);
a 2xx means the input was applied, or stored with a status that ends applied or failed with
its reason (a snapshot's status URL, a report's row).
"""

from __future__ import annotations

import copy
import itertools
import json
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.scheduler import fixture_json, fixture_text
from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text
from tests.reports import make_report

from .conftest import FUZZ_EXAMPLES, TALLY

pytestmark = [pytest.mark.django_db, pytest.mark.fuzz]

SEED = 26
EXTRA = FUZZ_EXAMPLES or 3  # random cases per intake beyond the walk
WORKLOADS = Path(__file__).resolve().parents[1] / "fixtures" / "workloads"
FABRIC = Path(__file__).resolve().parents[1] / "fabric" / "fixtures"
_ids = itertools.count()

# Values of every JSON type, beyond the columns and empty or huge.
SUBSTITUTES: list[Any] = [None, True, 0, -1, 2**63, 1.5, "", "x" * 300, [], {}, [[1, [2]]]]
DROP = object()  # a case that removes the key instead of replacing its value

JsonPath = tuple[str | int, ...]


def _kind(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return repr(value) if value is None else "bool"
    return "number" if isinstance(value, int | float) else type(value).__name__


# A number's own type can still be beyond its column: a number may become one of these too.
EDGE_NUMBERS = [-1, 2**63]


def walk(value: Any, prefix: JsonPath = ()) -> Iterator[JsonPath]:
    """Every path below ``value``, parents before children."""
    children = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in children:
        yield (*prefix, key)
        if isinstance(item, dict | list):
            yield from walk(item, (*prefix, key))


def _at(document: Any, path: JsonPath) -> Any:
    for key in path:
        document = document[key]
    return document


def mutate(document: Any, path: JsonPath, value: Any) -> Any:
    """A copy of ``document`` with ``path`` set to ``value`` (or removed, for DROP)."""
    broken = copy.deepcopy(document)
    parent = _at(broken, path[:-1])
    if value is DROP:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return broken


def _other_type(rng: random.Random, original: Any) -> Any:
    edges = EDGE_NUMBERS if _kind(original) == "number" else []
    return rng.choice([v for v in SUBSTITUTES if _kind(v) != _kind(original)] + edges)


def json_cases(base: Any, name: str) -> list[tuple[str, bytes]]:
    """Each path once with one substitute, one key dropped per object, and EXTRA random ones."""
    cases: list[tuple[str, bytes]] = []
    paths = list(walk(base))
    for path in paths:
        rng = random.Random(f"{SEED}:{name}:{path}")
        value = _other_type(rng, _at(base, path))
        cases.append((f"{path}={value!r:.20}", _dumps(mutate(base, path, value))))
    for parent in [(), *paths]:
        node = _at(base, parent)
        if isinstance(node, dict) and node:
            key = random.Random(f"{SEED}:{name}:drop:{parent}").choice(sorted(node))
            cases.append((f"{(*parent, key)} dropped", _dumps(mutate(base, (*parent, key), DROP))))
    rng = random.Random(f"{SEED}:{name}:extra")
    for _ in range(EXTRA):
        path = rng.choice(paths)
        value = rng.choice([*SUBSTITUTES, DROP])
        cases.append((f"extra {path}", _dumps(mutate(base, path, value))))
    return cases


def _dumps(document: Any) -> bytes:
    return json.dumps(document).encode()


def text_cases(base: str, name: str, count: int = 12) -> list[tuple[str, bytes]]:
    """Cut at random points, a line twice, a character flipped, a NUL, an overlong line."""
    rng = random.Random(f"{SEED}:{name}")
    lines = base.splitlines(keepends=True)
    cases: list[tuple[str, bytes]] = []
    for i in range(count + EXTRA):
        how = ("cut", "twice", "flip", "nul", "long")[i % 5]
        at = rng.randrange(len(lines))
        changed = list(lines)
        if how == "cut":
            text = base[: rng.randrange(len(base) + 1)]
        else:
            if how == "twice":
                changed.insert(at, lines[at])
            elif how == "flip" and lines[at]:
                col = rng.randrange(len(lines[at]))
                flipped = chr(rng.randrange(0x21, 0x7F))
                changed[at] = lines[at][:col] + flipped + lines[at][col + 1 :]
            elif how == "nul":
                col = rng.randrange(len(lines[at]) + 1)
                changed[at] = lines[at][:col] + "\x00" + lines[at][col:]
            else:
                changed[at] = lines[at].rstrip("\n") + "=" + "y" * 70_000 + "\n"
            text = "".join(changed)
        cases.append((f"{how} line {at}", text.encode()))
    return cases


def trimmed(document: Any, keep: int) -> Any:
    """``document`` with every list cut to ``keep`` items: the shapes stay, the walk shrinks."""
    if isinstance(document, dict):
        return {k: trimmed(v, keep) for k, v in document.items()}
    if isinstance(document, list):
        return [trimmed(v, keep) for v in document[:keep]]
    return document


# The assertions ----------------------------------------------------------------------------


def _messages(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [m for item in value for m in _messages(item)]
    if isinstance(value, dict):
        return [m for item in value.values() for m in _messages(item)]
    return []


# The parsers' safety net: an exception caught and named, where a typed read names the path.
CRASH = re.compile(r"is malformed \((KeyError|TypeError|ValueError|AttributeError|IndexError)\)")


def assert_field_errors(body: Any, label: str) -> None:
    """A refusal names what is at fault: ``errors`` by path, or DRF's fields at the top level,
    and never by the name of an exception a parser's safety net caught."""
    errors = body.get("errors", {k: v for k, v in body.items() if k != "detail"})
    assert isinstance(errors, dict) and errors, (label, body)
    assert all(isinstance(k, str) and k for k in errors), (label, body)
    messages = _messages(errors)
    assert messages, (label, body)
    assert not [m for m in messages if CRASH.search(m)], (label, body)


def _answered(response: Any, label: str, accepted: tuple[int, ...]) -> bool:
    """True when accepted; asserts a refusal is a field-level 400; never a 5xx."""
    TALLY[f"intake {label.split(':')[0]}"] += 1
    assert response.status_code < 500, (label, response.status_code, response.content[:500])
    if response.status_code == 400:
        assert_field_errors(response.json(), label)
        return False
    assert response.status_code in accepted, (label, response.status_code, response.content[:500])
    return True


# Bases -------------------------------------------------------------------------------------


def _report() -> dict[str, Any]:
    report = make_report("fz-01", gpus=2, nics=1, mig_gpus={1: ["3g.40gb", "3g.40gb"]})
    report["host"]["guests"] = [{"uuid": "0f0e0d0c-0000-4000-8000-000000000001", "name": "vm"}]
    report["gpus"][0]["nvlinks"] = [{"link": 0, "active": True}]
    return report


JSON_SNAPSHOTS: dict[str, Callable[[], Any]] = {
    "kubectl nodes": lambda: json.loads(
        k8s_node_list(
            k8s_node("dgx-01", labels={"nvidia.com/gpu.product": "H100"}),
            k8s_node("dgx-02", unschedulable=True),
        )
    ),
    "kubectl pods": lambda: trimmed(fixture_json("k8s-kubectl-get-pods-gpu.json"), 3),
    "slurmrestd nodes 0.0.41": lambda: trimmed(fixture_json("slurmrestd-v0.0.41-nodes.json"), 1),
    "slurmrestd nodes 0.0.44": lambda: trimmed(fixture_json("slurmrestd-v0.0.44-nodes.json"), 1),
    "sinfo json": lambda: trimmed(fixture_json("slurm-sinfo-json-2311-v0.0.40-grouped.json"), 1),
    "scontrol json": lambda: trimmed(
        fixture_json("slurm-scontrol-show-node-json-2302-v0.0.39.json"), 1
    ),
    "slurmrestd jobs": lambda: trimmed(
        _json(WORKLOADS / "slurm-local-2205-running-slurmrestd-v0.0.38-jobs.json"), 1
    ),
    "squeue json": lambda: trimmed(_json(WORKLOADS / "slurm-squeue-2311-v0.0.40-own.json"), 1),
    "sacct json": lambda: trimmed(_json(WORKLOADS / "slurm-sacct-2405-v0.0.41-own.json"), 1),
}
TEXT_SNAPSHOTS: dict[str, Callable[[], str]] = {
    "scontrol node": lambda: scontrol_text(scontrol_node("gpu-01"), scontrol_node("gpu-02")),
    "scontrol -o node": lambda: fixture_text(
        "slurm-2505-scontrol-o-show-node-cloud-no-final-newline.txt"
    ),
    "sinfo text": lambda: fixture_text(
        "slurm-local-2205-sinfo-N-O-nodelist-partition-gres-gresused-statelong.txt"
    ),
    "scontrol job": lambda: (WORKLOADS / "slurm-scontrol-show-job-d-own.txt").read_text(),
    "kubectl yaml": lambda: _yaml_node_list(),
    "kubectl describe": lambda: fixture_text("k8s-kubectl-describe-nodes.txt"),
}


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def _yaml_node_list() -> str:
    import yaml

    return yaml.safe_dump(json.loads(k8s_node_list(k8s_node("dgx-01"), k8s_node("dgx-02"))))


def _cases(bases: dict[str, Callable[[], Any]], make: Callable[[Any, str], Any]) -> list[Any]:
    return [
        pytest.param(name, body, id=f"{name}: {label}")
        for name, base in bases.items()
        for label, body in make(base(), name)
    ]


# Reports -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("label", "body"), _cases({"report": _report}, json_cases))
def test_reports(post_report, label: str, body: bytes) -> None:
    from inventory.choices import ReportStatus
    from inventory.models import AgentToken, Report
    from inventory.services import agent_token_create

    AgentToken.objects.update(identity=None)  # every case's server is free to claim
    key = agent_token_create(name=f"fuzz-{next(_ids)}")[1]
    response = post_report(body, key)
    if _answered(response, f"report: {label}", (202,)):
        report = Report.objects.get(pk=response.json()["id"])
        assert report.status in (ReportStatus.APPLIED, ReportStatus.FAILED), (label, report.status)
        if report.status == ReportStatus.FAILED:
            TALLY["intake report failed after 202"] += 1
            assert report.error, label


# Cluster snapshots -------------------------------------------------------------------------


def _post_snapshot(staff_api, capture, settings, name: str, body: bytes) -> None:
    """Half the cases (by the RNG) take the worker's path, so the status URL is read too."""
    worker = random.Random(f"{SEED}:{body!r}").random() < 0.5
    if worker:
        settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 0
    cluster = f"fz-{next(_ids)}"
    if name == "kubectl pods":  # pods need their cluster's nodes, or the walk stops there
        from clusters.services import snapshot_ingest

        nodes = [k8s_node(n) for n in ("dgx-h100-01", "a100-ts-01", "h100-mig-01")]
        snapshot_ingest(cluster_name=cluster, raw=k8s_node_list(*nodes))
    with capture(execute=True):
        response = staff_api.generic(
            "POST", f"/api/v1/clusters/{cluster}/snapshots/", body, "text/plain"
        )
    if not _answered(response, f"snapshot {name}: {body[:80]!r}", (201, 202)):
        return
    answer = response.json()
    if response.status_code == 201:
        assert answer["status"] in ("applied", "superseded"), (name, answer)
        return
    status = staff_api.get(answer["url"]).json() if answer.get("url") else answer
    assert status["status"] in ("applied", "failed", "held", "superseded"), (name, status)
    if status["status"] == "failed":
        TALLY[f"intake snapshot {name} failed after 202"] += 1
        assert_field_errors(status, f"{name}: {body[:80]!r}")
    if status["status"] == "held":
        assert status.get("reason") or status.get("errors") or status.get("detail"), status


@pytest.mark.parametrize(("name", "body"), _cases(JSON_SNAPSHOTS, json_cases))
def test_json_snapshots(
    staff_api, django_capture_on_commit_callbacks, settings, name: str, body: bytes
) -> None:
    _post_snapshot(staff_api, django_capture_on_commit_callbacks, settings, name, body)


@pytest.mark.parametrize(("name", "body"), _cases(TEXT_SNAPSHOTS, text_cases))
def test_text_snapshots(
    staff_api, django_capture_on_commit_callbacks, settings, name: str, body: bytes
) -> None:
    _post_snapshot(staff_api, django_capture_on_commit_callbacks, settings, name, body)


# Fabric: snapshots, the node-name map, a Slurm topology.conf --------------------------------

FABRIC_TEXTS: dict[str, Callable[[], str]] = {
    "ibnetdiscover": lambda: (FABRIC / "ibnetdiscover-router-dualport.out").read_text(),
    "ibnetdiscover -p": lambda: (FABRIC / "ibnetdiscover-p-split.out").read_text(),
}


@pytest.mark.parametrize(("name", "body"), _cases(FABRIC_TEXTS, text_cases))
def test_fabric_snapshots(
    staff_api, django_capture_on_commit_callbacks, name: str, body: bytes
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_api.generic(
            "POST", f"/api/v1/fabrics/fz-{next(_ids)}/snapshots/", body, "text/plain"
        )
    if _answered(response, f"fabric {name}", (201,)):
        from fabric.models import Fabric

        assert Fabric.objects.filter(name=response.wsgi_request.path.split("/")[4]).exists()


@pytest.fixture
def fabric_and_cluster(staff_api, django_capture_on_commit_callbacks) -> str:
    """A fabric with hosts and a Slurm cluster, so maps and topology.conf reach past parsing."""
    from clusters.services import snapshot_ingest

    with django_capture_on_commit_callbacks(execute=True):
        staff_api.generic(
            "POST", "/api/v1/fabrics/ib/snapshots/", FABRIC_TEXTS["ibnetdiscover"](), "text/plain"
        )
    snapshot_ingest(cluster_name="hpc", raw=scontrol_node("gpu-a1"))
    return "ib"


@pytest.mark.parametrize(
    ("name", "body"),
    _cases({"map": lambda: (FABRIC / "node-name-map-variants.txt").read_text()}, text_cases),
)
def test_node_name_maps(
    staff_api, django_capture_on_commit_callbacks, fabric_and_cluster, name: str, body: bytes
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_api.generic(
            "PUT", f"/api/v1/fabrics/{fabric_and_cluster}/node-name-map/", body, "text/plain"
        )
    if _answered(response, f"node-name-map {name}", (200,)):
        got = staff_api.get(f"/api/v1/fabrics/{fabric_and_cluster}/node-name-map/")
        assert got.status_code == 200


@pytest.mark.parametrize(
    ("name", "body"),
    _cases({"topology": lambda: (FABRIC / "topology-guid-named.conf").read_text()}, text_cases),
)
def test_topology_confs(
    staff_api, django_capture_on_commit_callbacks, fabric_and_cluster, name: str, body: bytes
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_api.generic(
            "POST",
            f"/api/v1/clusters/hpc/topology/?fabric={fabric_and_cluster}",
            body,
            "text/plain",
        )
    if _answered(response, f"topology {name}", (200,)):
        assert isinstance(response.json()["agrees"], bool), name


# Enrollment and webhooks -------------------------------------------------------------------


def _enrollment() -> dict[str, Any]:
    return {
        "hostname": "fz-enrolled",
        "system_uuid": "4c4c4544-0000-4000-8000-000000000026",
        "machine_id": "0123456789abcdef0123456789abcdef",
        "kubernetes_node_name": "fz-enrolled",
        "slurm_node_name": "fz-enrolled",
    }


@pytest.mark.parametrize(("label", "body"), _cases({"enroll": _enrollment}, json_cases))
def test_enrollments(client, label: str, body: bytes) -> None:
    from inventory.models import AgentToken
    from inventory.services import enrollment_token_create

    key = enrollment_token_create(name="fz", uses=1)[1]
    response = client.post(
        "/api/v1/agents/enroll/",
        data=body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {key}",
    )
    if _answered(response, f"enroll: {label}", (201,)):
        assert AgentToken.objects.filter(server_id=response.json()["server"]).exists(), label


def _webhook() -> dict[str, Any]:
    return {
        "url": "https://93.184.216.34/hook",
        "secret": "s" * 24,
        "events": ["finding.raised", "finding.resolved"],
        "active": True,
    }


@pytest.mark.parametrize(("label", "body"), _cases({"webhook": _webhook}, json_cases))
def test_webhooks(staff_api, label: str, body: bytes) -> None:
    from integrations.models import Webhook

    response = staff_api.generic("POST", "/api/v1/webhooks/", body, "application/json")
    if _answered(response, f"webhook: {label}", (201,)):
        assert Webhook.objects.filter(pk=response.json()["id"]).exists(), label


# The mutator itself ------------------------------------------------------------------------


def test_the_walk_reaches_every_depth_and_every_object_loses_a_key() -> None:
    document = {"a": [{"b": {"c": 1}}], "d": "x"}
    cases = json_cases(document, "t")
    assert list(walk(document)) == [("a",), ("a", 0), ("a", 0, "b"), ("a", 0, "b", "c"), ("d",)]
    assert len(cases) == 5 + 3 + EXTRA  # each path once, a key from each of 3 objects
    assert cases == json_cases(document, "t"), "deterministic"
    assert json.loads(cases[3][1])["a"][0]["b"]["c"] != 1
