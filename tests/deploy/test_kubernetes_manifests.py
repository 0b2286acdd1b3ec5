"""deploy/kubernetes/: every overlay renders with `kubectl kustomize`, every rendered object
passes the Kubernetes schemas of two current versions (strict: an unknown field fails), and
the objects say what the install depends on: the agent DaemonSet's node selection, mounts,
security and node name; the web probes; one beat; the migration Job; the NetworkPolicy."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import require

KUSTOMIZE_ROOT = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
OVERLAYS = ("small", "production")
# The two newest versions the pinned kubernetes-validate ships schemas for.
KUBERNETES_VERSIONS = ("1.36.0", "1.37.0")

Obj = dict[str, Any]


def kubectl() -> str:
    path = os.environ.get("KUBECTL") or shutil.which("kubectl")
    require(
        path is not None,
        "kubectl not found: apt-get install kubernetes-client (or set KUBECTL) to render "
        "deploy/kubernetes",
    )
    assert path is not None
    return path


@functools.cache
def _render(overlay: str) -> tuple[Obj, ...]:
    done = subprocess.run(
        [kubectl(), "kustomize", str(KUSTOMIZE_ROOT / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"kubectl kustomize {overlay} failed: {done.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def rendered(overlay: str) -> list[Obj]:
    return list(_render(overlay))


def find(objs: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def pod_spec(obj: Obj) -> Obj:
    return obj["spec"]["template"]["spec"]


def container(obj: Obj, name: str) -> Obj:
    (found,) = [c for c in pod_spec(obj)["containers"] if c["name"] == name]
    return found


def mounts_by_host_path(obj: Obj) -> dict[str, Obj]:
    """hostPath -> {mount, type} for every hostPath volume the pod mounts."""
    spec = pod_spec(obj)
    volumes = {v["name"]: v for v in spec["volumes"]}
    result: dict[str, Obj] = {}
    for c in spec["containers"]:
        for mount in c.get("volumeMounts", []):
            host = volumes[mount["name"]].get("hostPath")
            if host:
                result[host["path"]] = {"mount": mount, "type": host.get("type")}
    return result


def tolerates(tolerations: list[Obj], key: str, effect: str) -> bool:
    """Whether a taint `key` (any value) with `effect` is tolerated, as the scheduler reads it."""
    for t in tolerations:
        key_ok = t.get("key") in (None, "", key) if t.get("operator") == "Exists" else False
        if key_ok and t.get("effect") in (None, "", effect):
            return True
    return False


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def objs(overlay: str) -> list[Obj]:
    return rendered(overlay)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_rendered_object_passes_the_schema_strictly(objs: list[Obj], version: str) -> None:
    import kubernetes_validate

    assert objs
    for obj in objs:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} on {version}: {exc.message}")


def test_strict_validation_refuses_an_unknown_field() -> None:
    """The check above has teeth: a misspelt field fails it."""
    import kubernetes_validate

    web = find(rendered("small"), "Deployment", "cluster-atlas-web")
    broken = yaml.safe_load(yaml.safe_dump(web))
    pod_spec(broken)["containers"][0]["readynessProbe"] = {"httpGet": {"path": "/", "port": 1}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[-1], strict=True)


def test_everything_lives_in_the_namespace(objs: list[Obj]) -> None:
    find(objs, "Namespace", "cluster-atlas")
    for obj in objs:
        if obj["kind"] != "Namespace":
            assert obj["metadata"].get("namespace") == "cluster-atlas", obj["metadata"]["name"]


def test_backend_environment_uses_only_the_readmes_variables(objs: list[Obj]) -> None:
    readme = (KUSTOMIZE_ROOT.parents[1] / "README.md").read_text()
    systemd_env = (KUSTOMIZE_ROOT.parent / "systemd" / "atlas.env.example").read_text()
    config = find(objs, "ConfigMap", "cluster-atlas-config")["data"]
    secret = find(objs, "Secret", "cluster-atlas-secrets")["stringData"]
    assert {"DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ATLAS_METRICS_TOKEN"} <= set(secret)
    for name in [*config, *secret]:
        assert f"`{name}`" in readme or f"\n{name}=" in systemd_env, name
    assert not set(config) & set(secret)


def test_daemonset_runs_on_gpu_nodes_and_tolerates_their_taint(objs: list[Obj]) -> None:
    spec = pod_spec(find(objs, "DaemonSet", "cluster-atlas-agent"))
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert tolerates(spec["tolerations"], "nvidia.com/gpu", "NoSchedule")


def test_production_agent_uses_the_nvidia_runtime_class() -> None:
    prod = pod_spec(find(rendered("production"), "DaemonSet", "cluster-atlas-agent"))
    small = pod_spec(find(rendered("small"), "DaemonSet", "cluster-atlas-agent"))
    assert prod["runtimeClassName"] == "nvidia"
    assert "runtimeClassName" not in small
    assert tolerates(prod["tolerations"], "nvidia.com/gpu", "NoExecute")


def test_daemonset_mounts(objs: list[Obj]) -> None:
    mounts = mounts_by_host_path(find(objs, "DaemonSet", "cluster-atlas-agent"))
    read_only = {
        "/sys": ("/sys", "Directory"),
        "/dev/kmsg": ("/dev/kmsg", "CharDevice"),
        "/var/lib/kubelet/pod-resources": ("/var/lib/kubelet/pod-resources", "Directory"),
        "/etc/machine-id": ("/etc/machine-id", "File"),
    }
    for host_path, (mount_path, kind) in read_only.items():
        assert host_path in mounts, host_path
        assert mounts[host_path]["mount"]["mountPath"] == mount_path
        assert mounts[host_path]["mount"].get("readOnly") is True, host_path
        assert mounts[host_path]["type"] == kind, host_path
    state = mounts["/var/lib/cluster-atlas"]
    assert state["type"] == "DirectoryOrCreate"
    assert state["mount"]["mountPath"] == "/var/lib/cluster-atlas"
    assert not state["mount"].get("readOnly")
    # Nothing else of the host is writable.
    writable = [p for p, m in mounts.items() if not m["mount"].get("readOnly")]
    assert writable == ["/var/lib/cluster-atlas"]


def test_daemonset_enrolls_with_the_token_from_a_secret(objs: list[Obj]) -> None:
    ds = find(objs, "DaemonSet", "cluster-atlas-agent")
    agent = container(ds, "agent")
    volumes = {v["name"]: v for v in pod_spec(ds)["volumes"]}
    (enroll,) = [m for m in agent["volumeMounts"] if m["mountPath"] == "/etc/cluster-atlas/enroll"]
    assert enroll["readOnly"] is True
    secret_name = volumes[enroll["name"]]["secret"]["secretName"]
    assert "token" in find(objs, "Secret", secret_name)["stringData"]
    argv = agent["command"] + agent["args"]
    assert argv[:4] == ["python", "-m", "agent", "push"]
    flags = dict(zip(argv[4::2], argv[5::2], strict=False))
    assert flags["--enroll-token-file"] == "/etc/cluster-atlas/enroll/token"
    assert flags["--state-dir"] == "/var/lib/cluster-atlas"
    assert flags["--interval"] == "60"
    assert flags["--url"].startswith("https://")


def test_daemonset_passes_the_node_name_from_the_downward_api(objs: list[Obj]) -> None:
    agent = container(find(objs, "DaemonSet", "cluster-atlas-agent"), "agent")
    env = {e["name"]: e for e in agent["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    args = agent["args"]
    assert args[args.index("--kubernetes-node-name") + 1] == "$(NODE_NAME)"
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"


def test_daemonset_security(objs: list[Obj]) -> None:
    ds = find(objs, "DaemonSet", "cluster-atlas-agent")
    spec = pod_spec(ds)
    sc = container(ds, "agent")["securityContext"]
    assert sc.get("privileged", False) is False
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    # Only what /dev/kmsg needs under kernel.dmesg_restrict=1.
    assert sc["capabilities"].get("add", []) == ["SYSLOG"]
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    # The host's pids (GPU processes' cgroups) and the node's hostname and NICs.
    assert spec["hostPID"] is True
    assert spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["automountServiceAccountToken"] is False
    assert not spec.get("hostIPC")


BACKEND = {
    "Deployment/cluster-atlas-web": "web",
    "Deployment/cluster-atlas-worker": "worker",
    "Deployment/cluster-atlas-beat": "beat",
    "Job/cluster-atlas-migrate": "migrate",
}


@pytest.mark.parametrize("ref", sorted(BACKEND))
def test_backend_pods_run_their_command_non_root_and_read_only(objs: list[Obj], ref: str) -> None:
    kind, name = ref.split("/")
    obj = find(objs, kind, name)
    spec = pod_spec(obj)
    pod_sc = spec["securityContext"]
    assert pod_sc["runAsNonRoot"] is True
    assert pod_sc["runAsUser"] == 10001
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    (c,) = spec["containers"]
    assert c["args"] == [BACKEND[ref]]
    assert "command" not in c  # the image's entrypoint chooses by its argument
    assert c["image"].rsplit(":", 1)[0].endswith("/cluster-atlas")
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 10001
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    writable = {
        m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"] if not m.get("readOnly")
    }
    assert set(writable) == {"/tmp", "/var/lib/cluster-atlas"}
    assert all("emptyDir" in v for v in writable.values())
    config = find(objs, "ConfigMap", "cluster-atlas-config")["data"]
    assert config["ATLAS_VAR_DIR"] == "/var/lib/cluster-atlas"
    assert {"requests", "limits"} <= set(c["resources"])


def test_web_probes_and_service(objs: list[Obj]) -> None:
    web = find(objs, "Deployment", "cluster-atlas-web")
    c = container(web, "web")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    bind_port = int(
        find(objs, "ConfigMap", "cluster-atlas-config")["data"]["ATLAS_WEB_BIND"].rsplit(":", 1)[1]
    )
    assert ports["http"] == bind_port
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in (c["readinessProbe"], c["livenessProbe"]):
        assert probe["httpGet"]["port"] in ("http", bind_port)
        headers = {h["name"]: h["value"] for h in probe["httpGet"].get("httpHeaders", [])}
        allowed = find(objs, "ConfigMap", "cluster-atlas-config")["data"]["DJANGO_ALLOWED_HOSTS"]
        assert headers["Host"] in allowed.split(",")
    service = find(objs, "Service", "cluster-atlas-web")
    assert (
        service["spec"]["selector"].items() <= web["spec"]["template"]["metadata"]["labels"].items()
    )
    assert service["spec"]["ports"][0]["targetPort"] in ("http", bind_port)
    pdb = find(objs, "PodDisruptionBudget", "cluster-atlas-web")
    assert (
        pdb["spec"]["selector"]["matchLabels"].items()
        <= web["spec"]["template"]["metadata"]["labels"].items()
    )


def test_web_replicas_per_overlay() -> None:
    assert find(rendered("small"), "Deployment", "cluster-atlas-web")["spec"]["replicas"] == 1
    assert find(rendered("production"), "Deployment", "cluster-atlas-web")["spec"]["replicas"] >= 2


def test_one_beat_replaced_not_rolled(objs: list[Obj]) -> None:
    beat = find(objs, "Deployment", "cluster-atlas-beat")
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}


def test_migration_job(objs: list[Obj]) -> None:
    job = find(objs, "Job", "cluster-atlas-migrate")
    assert container(job, "migrate")["args"] == ["migrate"]
    assert pod_spec(job)["restartPolicy"] in ("OnFailure", "Never")


def test_network_policy_admits_the_web_port_and_lets_out_dns_database_broker(
    objs: list[Obj],
) -> None:
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    web_labels = find(objs, "Deployment", "cluster-atlas-web")["spec"]["template"]["metadata"][
        "labels"
    ]

    def selects(policy: Obj, labels: dict[str, str]) -> bool:
        selector = policy["spec"]["podSelector"]
        if not selector.get("matchLabels", {}).items() <= labels.items():
            return False
        return all(
            labels.get(e["key"]) in e["values"] for e in selector.get("matchExpressions", [])
        )

    on_web = [p for p in policies if selects(p, web_labels)]
    ingress_ports = {
        port["port"]
        for p in on_web
        for rule in p["spec"].get("ingress", [])
        for port in rule["ports"]
    }
    assert ingress_ports == {8000}
    egress = {
        (port["protocol"], port["port"])
        for p in on_web
        for rule in p["spec"].get("egress", [])
        for port in rule["ports"]
    }
    assert {("UDP", 53), ("TCP", 53), ("TCP", 5432), ("TCP", 6379)} <= egress
    assert all("Egress" in p["spec"]["policyTypes"] for p in on_web if p["spec"].get("egress"))


def test_the_daemonsets_command_line_is_one_the_agent_takes(objs: list[Obj]) -> None:
    """The DaemonSet's args parse with the agent's own parser (the flags exist, with values),
    `$(NODE_NAME)` standing for what the Downward API gives."""
    from agent.__main__ import build_parser

    daemonset = next(o for o in objs if o["kind"] == "DaemonSet")
    agent = pod_spec(daemonset)["containers"][0]
    assert agent["command"][-2:] == ["-m", "agent"]
    args = [a.replace("$(NODE_NAME)", "gpu-node-7") for a in agent["args"]]
    parsed = build_parser().parse_args(args)
    assert parsed.kubernetes_node_name == "gpu-node-7"
    assert parsed.enroll_token_file and parsed.state_dir == "/var/lib/cluster-atlas"
