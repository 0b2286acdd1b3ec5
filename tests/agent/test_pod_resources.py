"""The pod-resources client against a real gRPC server on a unix socket, serving the real
`podresources/v1` proto (the kubelet itself cannot run here)."""

from __future__ import annotations

import json
import os
import socket as socketlib
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from agent.podresources import api_pb2 as pb
from agent.podresources import api_pb2_grpc as pb_grpc
from agent.podresources import list_pod_resources

GPU_A = "GPU-5a1e0c4b-8f3a-4b7e-9d2c-1f6a7b8c9d0e"
GPU_B = "GPU-7c2d1e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f"
MIG_A = "MIG-1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718"


def listing() -> pb.ListPodResourcesResponse:
    return pb.ListPodResourcesResponse(
        pod_resources=[
            pb.PodResources(
                name="trainer-0",
                namespace="ml",
                containers=[
                    pb.ContainerResources(
                        name="pytorch",
                        devices=[
                            pb.ContainerDevices(
                                resource_name="nvidia.com/gpu",
                                device_ids=[GPU_B, GPU_A],
                                topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=0)]),
                            ),
                            pb.ContainerDevices(resource_name="rdma/ib", device_ids=["mlx5_0"]),
                        ],
                        cpu_ids=[0, 1, 2, 3],
                    ),
                    pb.ContainerResources(name="sidecar"),  # holds no GPU: left out
                ],
            ),
            pb.PodResources(
                name="notebook",
                namespace="alice",
                containers=[
                    pb.ContainerResources(
                        name="jupyter",
                        devices=[
                            pb.ContainerDevices(
                                resource_name="nvidia.com/mig-1g.10gb", device_ids=[MIG_A]
                            )
                        ],
                    )
                ],
            ),
            pb.PodResources(
                name="coredns-abc",
                namespace="kube-system",
                containers=[pb.ContainerResources(name="coredns")],
            ),
        ]
    )


class Kubelet(pb_grpc.PodResourcesListerServicer):
    def List(self, request, context):
        return listing()


class OldKubelet(pb_grpc.PodResourcesListerServicer):
    """Serves the service without List: what a kubelet without v1 answers (UNIMPLEMENTED)."""


class SlowKubelet(pb_grpc.PodResourcesListerServicer):
    def List(self, request, context):
        time.sleep(2)
        return listing()


def serve(servicer, tmp_path: Path) -> Iterator[str]:
    # a short path: unix socket paths are limited to 108 bytes
    path = str(tmp_path / "kubelet.sock")
    if len(path) > 100:
        path = f"/tmp/atlas-{os.getpid()}-{id(servicer)}.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_PodResourcesListerServicer_to_server(servicer, server)
    server.add_insecure_port(f"unix://{path}")
    server.start()
    try:
        yield path
    finally:
        server.stop(grace=None)
        if os.path.exists(path):
            os.unlink(path)


@pytest.fixture
def kubelet(tmp_path):
    yield from serve(Kubelet(), tmp_path)


def test_list_gives_each_containers_gpu_and_mig_ids(kubelet):
    assert list_pod_resources(kubelet, timeout_s=5) == {
        "available": True,
        "error": None,
        "pods": [
            {
                "namespace": "alice",
                "name": "notebook",
                "containers": [
                    {
                        "name": "jupyter",
                        "devices": [{"resource": "nvidia.com/mig-1g.10gb", "ids": [MIG_A]}],
                    }
                ],
            },
            {
                "namespace": "ml",
                "name": "trainer-0",
                "containers": [
                    {
                        "name": "pytorch",
                        "devices": [{"resource": "nvidia.com/gpu", "ids": sorted([GPU_A, GPU_B])}],
                    }
                ],
            },
        ],
    }


def test_an_older_kubelet_answers_unimplemented(tmp_path):
    for path in serve(OldKubelet(), tmp_path):
        found = list_pod_resources(path, timeout_s=5)
        assert found["available"] is False and found["pods"] == []
        assert "does not serve podresources v1" in found["error"]


def test_a_kubelet_too_slow_is_a_timeout(tmp_path):
    for path in serve(SlowKubelet(), tmp_path):
        found = list_pod_resources(path, timeout_s=0.3)
        assert found == {
            "available": False,
            "error": "the kubelet did not answer within 0.3 s",
            "pods": [],
        }


def test_without_the_socket_the_report_says_so(tmp_path):
    missing = tmp_path / "pod-resources" / "kubelet.sock"
    found = list_pod_resources(str(missing))
    assert found["available"] is False and found["pods"] == []
    assert found["error"].startswith(f"no kubelet pod-resources socket at {missing}")


def test_a_file_that_is_no_socket(tmp_path):
    plain = tmp_path / "kubelet.sock"
    plain.write_text("")
    assert list_pod_resources(str(plain))["error"] == f"{plain} is not a socket"


def test_a_socket_nobody_listens_on(tmp_path):
    path = str(tmp_path / "dead.sock")
    if len(path) > 100:
        pytest.skip("tmp path too long for a unix socket")
    sock = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
    sock.bind(path)
    sock.close()  # the file stays, nothing accepts
    found = list_pod_resources(path, timeout_s=1)
    assert found["available"] is False
    assert "UNAVAILABLE" in found["error"] or "did not answer" in found["error"]


def test_collect_adds_the_kubelets_answer_to_the_report(kubelet, samples, validate):
    """End to end: the agent process asks the server in this test over its unix socket."""
    from .test_transport import agent

    xml = samples / "nvsmi-q-x-a100-sxm4-40gb-mig-netdata.xml"
    done = agent(
        "collect",
        "--nvidia-smi-xml",
        str(xml),
        "--hostname",
        "a100",
        "--pod-resources-socket",
        kubelet,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    validate(report)
    found = report["pod_resources"]
    assert found["available"] is True
    assert [(p["namespace"], p["name"]) for p in found["pods"]] == [
        ("alice", "notebook"),
        ("ml", "trainer-0"),
    ]


def test_the_default_socket_is_asked_only_where_it_exists(monkeypatch, tmp_path):
    from agent import __main__ as cli

    args = cli.build_parser().parse_args(["collect"])
    monkeypatch.setattr(cli, "POD_RESOURCES_SOCKET", str(tmp_path / "kubelet.sock"))
    assert cli.pod_resources_socket(args) is None
    (tmp_path / "kubelet.sock").write_text("")
    assert cli.pod_resources_socket(args) == str(tmp_path / "kubelet.sock")
    args = cli.build_parser().parse_args(["collect", "--no-pod-resources"])
    assert cli.pod_resources_socket(args) is None
    saved = cli.build_parser().parse_args(["collect", "--nvidia-smi-xml", "q.xml"])
    assert cli.pod_resources_socket(saved) is None  # saved files describe a past moment
    named = cli.build_parser().parse_args(["collect", "--pod-resources-socket", "/x.sock"])
    assert cli.pod_resources_socket(named) == "/x.sock"


def test_the_kept_generated_code_matches_the_proto(tmp_path):
    """api_pb2*.py are what regenerate.sh makes of api.proto today: nobody edited them, and
    nobody changed the proto without regenerating."""
    protoc = pytest.importorskip("grpc_tools.protoc")
    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "out"
    out.mkdir()
    status = protoc.main(
        [
            "protoc",
            f"-I{repo}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            str(repo / "agent/podresources/api.proto"),
        ]
    )
    assert status == 0
    for name in ("api_pb2.py", "api_pb2_grpc.py"):
        kept = (repo / "agent/podresources" / name).read_text()
        assert (out / "agent/podresources" / name).read_text() == kept, name


def test_a_kubelet_starting_after_the_agent_is_found_by_the_next_report(monkeypatch, tmp_path):
    from agent import __main__ as cli

    socket = tmp_path / "kubelet.sock"
    if len(str(socket)) > 100:
        pytest.skip("tmp path too long for a unix socket")
    monkeypatch.setattr(cli, "POD_RESOURCES_SOCKET", str(socket))
    args = cli.build_parser().parse_args(["collect"])
    make = cli.with_workloads(lambda: {"gpus": []}, args)
    assert "pod_resources" not in make()  # no kubelet yet: nothing asked
    for _ in serve(Kubelet(), tmp_path):
        assert make()["pod_resources"]["available"] is True
