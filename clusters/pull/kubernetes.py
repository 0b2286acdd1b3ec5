"""Pull nodes and pods from a Kubernetes API with the official ``kubernetes`` client.

Lists are fetched page by page (``limit`` + ``continue``) so a 25,000-node cluster never
arrives as one huge response, and the raw JSON is kept (``_preload_content=False``) so
the same parser reads a pulled NodeList and a pushed ``kubectl get nodes -o json``.
Each call builds its own ApiClient from the kubeconfig (or the in-cluster service
account) and never touches the client library's global default configuration, so clusters
pulled one after another in one worker cannot leak credentials into each other.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

logger = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE = 500
DEFAULT_TIMEOUT_S = 30.0
# A server that keeps answering with a continue token would otherwise loop forever.
MAX_PAGES = 10_000


class KubernetesPullError(RuntimeError):
    """A pull failed: bad kubeconfig, unreachable API, or the API refused the request.

    The message says which, with the API's own status message where it gave one; it never
    holds tokens, client keys or kubeconfig contents.
    """


def api_client(
    kubeconfig_path: str | None = None,
    context: str | None = None,
    in_cluster: bool = False,
) -> client.ApiClient:
    """An ApiClient for one cluster, from a kubeconfig file or the in-cluster account.

    ``kubeconfig_path=None`` means the client's usual lookup (``$KUBECONFIG``, then
    ``~/.kube/config``); ``context=None`` means the file's current context.
    """
    configuration = client.Configuration()
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(
                config_file=kubeconfig_path,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
    except (ConfigException, OSError, ValueError, TypeError, yaml.YAMLError) as exc:
        source = "the in-cluster service account" if in_cluster else "the kubeconfig"
        raise KubernetesPullError(f"cannot load {source}: {_config_reason(exc)}") from None
    return client.ApiClient(configuration)


def _config_reason(exc: Exception) -> str:
    # ConfigException messages name files and missing keys, never credentials; other
    # exception texts (a YAML error can quote the file) are reduced to their type.
    if isinstance(exc, ConfigException | FileNotFoundError):
        return str(exc)[:300]
    return type(exc).__name__


def _api_message(exc: ApiException) -> str:
    """The Status message the API sent (``nodes is forbidden: ...``), if any."""
    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        return ""
    message = body.get("message") if isinstance(body, dict) else None
    return f": {str(message)[:300]}" if message else ""


def _list_all(
    call: Callable[..., Any],
    *,
    kind: str,
    host: str,
    page_size: int,
    timeout: float,
) -> dict[str, Any]:
    """Follow ``metadata.continue`` until the list is complete; one dict of all items.

    A 410 Gone (the continue token expired mid-list) restarts the list once from the
    first page, which is what the API asks of clients that need a consistent list.
    """
    if page_size < 1:
        raise ValueError("page_size must be at least 1")
    items: list[Any] = []
    token: str | None = None
    resource_version = ""
    pages = 0
    restarted = False
    while True:
        try:
            response = call(
                limit=page_size,
                _continue=token,
                _preload_content=False,
                _request_timeout=timeout,
            )
            payload = response.data
        except ApiException as exc:
            if exc.status == 410 and token and not restarted:
                logger.info("Kubernetes list of %s expired mid-way at %s; restarting", kind, host)
                items, token, pages, restarted = [], None, 0, True
                continue
            raise KubernetesPullError(
                f"the Kubernetes API at {host} answered {exc.status} {exc.reason}"
                f"{_api_message(exc)}"
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubernetesPullError(
                f"cannot reach the Kubernetes API at {host}: {type(exc).__name__}"
            ) from None
        try:
            document = json.loads(payload)
        except ValueError:
            raise KubernetesPullError(
                f"the Kubernetes API at {host} answered something that is not JSON"
            ) from None
        if not isinstance(document, dict) or not isinstance(document.get("items"), list):
            raise KubernetesPullError(f"the Kubernetes API at {host} answered no item list")
        items.extend(document["items"])
        metadata = document.get("metadata") or {}
        resource_version = metadata.get("resourceVersion") or resource_version
        token = metadata.get("continue") or None
        pages += 1
        if token is None:
            break
        if pages >= MAX_PAGES:
            raise KubernetesPullError(
                f"the Kubernetes API at {host} kept paging past {MAX_PAGES} pages"
            )
    logger.info("listed %d %s items from %s in %d page(s)", len(items), kind, host, pages)
    return {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"resourceVersion": resource_version},
        "items": items,
    }


def list_nodes_and_pods(
    kubeconfig_path: str | None = None,
    context: str | None = None,
    in_cluster: bool = False,
    page_size: int = DEFAULT_PAGE_SIZE,
    timeout: float = DEFAULT_TIMEOUT_S,
    *,
    lists: tuple[str, ...] = ("NodeList", "PodList"),
) -> list[dict[str, Any]]:
    """The cluster's NodeList and PodList (or the `lists` named), through one API client.

    Each is a whole list read page by page (``parse_document`` and ``parse_pods`` read them),
    of whole objects and with no field or label selector: the pods' owners, labels, start
    times and finished pods (how a workload ended) are what workloads are grouped by.
    Raises KubernetesPullError on any failure; a partial list is never returned.
    """
    with api_client(kubeconfig_path, context, in_cluster) as api:
        core = client.CoreV1Api(api)
        methods: dict[str, Callable[..., Any]] = {
            "NodeList": core.list_node,
            "PodList": core.list_pod_for_all_namespaces,
        }
        calls = [(methods[kind], kind) for kind in lists]
        return [
            _list_all(
                method,
                kind=kind,
                host=api.configuration.host,
                page_size=page_size,
                timeout=timeout,
            )
            for method, kind in calls
        ]


def list_nodes(
    kubeconfig_path: str | None = None,
    context: str | None = None,
    in_cluster: bool = False,
    page_size: int = DEFAULT_PAGE_SIZE,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> dict[str, Any]:
    """All Nodes of a cluster as one NodeList-shaped dict."""
    options = (kubeconfig_path, context, in_cluster, page_size, timeout)
    return list_nodes_and_pods(*options, lists=("NodeList",))[0]


def list_pods(
    kubeconfig_path: str | None = None,
    context: str | None = None,
    in_cluster: bool = False,
    page_size: int = DEFAULT_PAGE_SIZE,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> dict[str, Any]:
    """All Pods of all namespaces as one PodList-shaped dict."""
    options = (kubeconfig_path, context, in_cluster, page_size, timeout)
    return list_nodes_and_pods(*options, lists=("PodList",))[0]
