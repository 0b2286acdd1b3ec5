"""The official ``kubernetes`` client against a local server that pages a NodeList.

No kube-apiserver can run here, so a small HTTP server replays the fixture NodeList at
``/api/v1/nodes``, honouring ``limit`` and ``continue`` and setting ``metadata.continue``
the way the API does; a kubeconfig points the real client at it.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from clusters.parsers import parse_document, parse_pods, parse_snapshot
from clusters.pull.kubernetes import KubernetesPullError, list_nodes, list_pods
from tests.fixtures.scheduler import fixture_json, fixture_text

TOKEN = "kube-secret-token-6f1d"


def _api_items(document: dict[str, Any]) -> list[dict[str, Any]]:
    """kubectl's List items as the API serves them (items carry no kind/apiVersion)."""
    items = copy.deepcopy(document["items"])
    for item in items:
        item.pop("kind", None)
        item.pop("apiVersion", None)
    return items


@dataclass
class FakeApi:
    """What the fake API serves and what it saw."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    expire_next_continue: bool = False
    forbid: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(api: FakeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            with api.lock:
                api.requests.append(
                    {
                        "path": url.path,
                        "query": query,
                        "authorization": self.headers.get("Authorization"),
                    }
                )
            if self.headers.get("Authorization") != f"Bearer {TOKEN}" or api.forbid:
                self._send(
                    403,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "message": 'nodes is forbidden: User "atlas" cannot list resource '
                        '"nodes" in API group "" at the cluster scope',
                        "reason": "Forbidden",
                        "code": 403,
                    },
                )
                return
            collections = {
                "/api/v1/nodes": ("NodeList", api.nodes),
                "/api/v1/pods": ("PodList", api.pods),
            }
            if url.path not in collections:
                self._send(404, {"kind": "Status", "code": 404, "message": "not found"})
                return
            kind, items = collections[url.path]
            start = 0
            if "continue" in query:
                if api.expire_next_continue:
                    api.expire_next_continue = False
                    self._send(
                        410,
                        {
                            "kind": "Status",
                            "code": 410,
                            "reason": "Expired",
                            "message": "The provided continue parameter is too old",
                        },
                    )
                    return
                start = int(base64.b64decode(query["continue"]).decode())
            limit = int(query.get("limit", 0)) or len(items)
            page = items[start : start + limit]
            metadata: dict[str, Any] = {"resourceVersion": "48213999"}
            if start + limit < len(items):
                metadata["continue"] = base64.b64encode(str(start + limit).encode()).decode()
                metadata["remainingItemCount"] = len(items) - start - limit
            self._send(200, {"kind": kind, "apiVersion": "v1", "metadata": metadata, "items": page})

    return Handler


@pytest.fixture
def fake_api() -> Iterator[tuple[FakeApi, str]]:
    api = FakeApi(
        nodes=_api_items(fixture_json("k8s-kubectl-get-nodes-gpu-fleet.json")),
        pods=_api_items(fixture_json("k8s-kubectl-get-pods-gpu.json")),
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield api, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _kubeconfig(tmp_path: Path, contexts: dict[str, str], current: str) -> str:
    """A kubeconfig with one cluster per context, all using the same token user."""
    text = ["apiVersion: v1", "kind: Config", "clusters:"]
    for name, server in contexts.items():
        text += [f"- name: {name}", "  cluster:", f"    server: {server}"]
    text += ["users:", "- name: atlas", "  user:", f"    token: {TOKEN}", "contexts:"]
    for name in contexts:
        text += [f"- name: {name}", "  context:", f"    cluster: {name}", "    user: atlas"]
    text.append(f"current-context: {current}")
    path = tmp_path / "kubeconfig"
    path.write_text("\n".join(text) + "\n")
    return str(path)


def test_all_pages_are_fetched_by_the_official_client(fake_api, tmp_path):
    api, url = fake_api
    kubeconfig = _kubeconfig(tmp_path, {"lab": url}, "lab")

    document = list_nodes(kubeconfig_path=kubeconfig, page_size=2)

    node_requests = [r for r in api.requests if r["path"] == "/api/v1/nodes"]
    assert len(node_requests) == 3  # 6 nodes, 2 a page
    assert [r["query"].get("limit") for r in node_requests] == ["2", "2", "2"]
    assert "continue" not in node_requests[0]["query"]
    assert all("continue" in r["query"] for r in node_requests[1:])
    assert {r["authorization"] for r in node_requests} == {f"Bearer {TOKEN}"}
    assert document["kind"] == "NodeList"
    assert [i["metadata"]["name"] for i in document["items"]] == [
        n["metadata"]["name"] for n in api.nodes
    ]
    # The pulled list and the kubectl output parse to the same records.
    pulled = parse_document(document)
    pushed = parse_snapshot(fixture_text("k8s-kubectl-get-nodes-gpu-fleet.json"))
    assert pulled.nodes == pushed.nodes


def test_a_large_cluster_pages_at_the_default_size(fake_api, tmp_path):
    api, url = fake_api
    template = api.nodes[0]
    api.nodes = []
    for i in range(1201):
        node = copy.deepcopy(template)
        node["metadata"]["name"] = f"gpu-{i:05d}"
        api.nodes.append(node)

    document = list_nodes(kubeconfig_path=_kubeconfig(tmp_path, {"big": url}, "big"))

    assert len(document["items"]) == 1201
    assert len({i["metadata"]["name"] for i in document["items"]}) == 1201
    assert [r["query"]["limit"] for r in api.requests] == ["500", "500", "500"]


def test_an_expired_continue_token_restarts_the_list_once(fake_api, tmp_path):
    api, url = fake_api
    api.expire_next_continue = True

    document = list_nodes(kubeconfig_path=_kubeconfig(tmp_path, {"lab": url}, "lab"), page_size=4)

    assert len(document["items"]) == 6  # no duplicates from the abandoned first page
    statuses = [("continue" in r["query"]) for r in api.requests]
    assert statuses == [False, True, False, True]


def test_the_context_chooses_the_cluster(fake_api, tmp_path):
    _api, url = fake_api
    kubeconfig = _kubeconfig(tmp_path, {"prod": url, "stale": "http://127.0.0.1:9"}, "stale")

    document = list_nodes(kubeconfig_path=kubeconfig, context="prod")

    assert len(document["items"]) == 6


def test_pods_of_all_namespaces_are_paged_too(fake_api, tmp_path):
    api, url = fake_api
    document = list_pods(kubeconfig_path=_kubeconfig(tmp_path, {"lab": url}, "lab"), page_size=3)

    assert len([r for r in api.requests if r["path"] == "/api/v1/pods"]) == 3
    pods = parse_pods(document)
    assert {p.name for p in pods} == {p["metadata"]["name"] for p in api.pods}


def test_pulled_pods_carry_what_grouping_them_into_workloads_needs(fake_api, tmp_path):
    # Issue 24: owners, labels, start times and terminated reasons survive the pull, and no
    # field or label selector drops the finished pods that say how a workload ended.
    api, url = fake_api
    kubectl = fixture_json("k8s-kubectl-get-pods-workloads.json")
    api.pods = _api_items(kubectl)
    document = list_pods(kubeconfig_path=_kubeconfig(tmp_path, {"lab": url}, "lab"), page_size=10)
    pulled = {p.name: p for p in parse_pods(document)}
    assert pulled == {p.name: p for p in parse_pods(kubectl)}
    assert (
        pulled["llama-ft-worker-2"].owner_kind,
        pulled["tokenize-8fj2k"].terminated_reasons,
    ) == (
        "PyTorchJob",
        ("OOMKilled",),
    )
    assert pulled["old-train"].reason == "Evicted" and pulled["llama-ft-master-0"].start_time
    queries = [r["query"] for r in api.requests if r["path"] == "/api/v1/pods"]
    assert queries and not any("fieldSelector" in q or "labelSelector" in q for q in queries)


def test_a_refusal_names_the_api_message_and_never_the_token(fake_api, tmp_path, caplog):
    api, url = fake_api
    api.forbid = True
    caplog.set_level(logging.DEBUG)

    with pytest.raises(KubernetesPullError) as caught:
        list_nodes(kubeconfig_path=_kubeconfig(tmp_path, {"lab": url}, "lab"))

    message = str(caught.value)
    assert "403" in message and "nodes is forbidden" in message
    assert TOKEN not in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert TOKEN not in caplog.text


def test_an_unreachable_api_is_a_pull_error(tmp_path):
    kubeconfig = _kubeconfig(tmp_path, {"gone": "http://127.0.0.1:9"}, "gone")
    with pytest.raises(KubernetesPullError, match="cannot reach the Kubernetes API"):
        list_nodes(kubeconfig_path=kubeconfig, timeout=2)


def test_a_missing_kubeconfig_is_a_pull_error(tmp_path):
    with pytest.raises(KubernetesPullError, match="cannot load the kubeconfig"):
        list_nodes(kubeconfig_path=str(tmp_path / "nope"))


def test_an_unknown_context_is_a_pull_error(fake_api, tmp_path):
    _api, url = fake_api
    with pytest.raises(KubernetesPullError, match="cannot load the kubeconfig"):
        list_nodes(kubeconfig_path=_kubeconfig(tmp_path, {"lab": url}, "lab"), context="nope")


def test_in_cluster_without_a_service_account_is_a_pull_error(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubernetesPullError, match="in-cluster service account"):
        list_nodes(in_cluster=True)
