"""Report validation: the JSON Schema, then the cross-references the schema cannot state.

Errors are keyed by the path of the field at fault (`gpus.3.uuid`), so a 400 names it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from agent.schema import load_schema

MAX_ERRORS = 50


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(load_schema())


def _path(parts) -> str:
    return ".".join(str(p) for p in parts) or "body"


def report_errors(payload: Any) -> dict[str, list[str]]:
    """Field path -> messages; empty when the report is valid."""
    errors: dict[str, list[str]] = {}

    def add(path: str, message: str) -> None:
        if sum(len(v) for v in errors.values()) < MAX_ERRORS:
            errors.setdefault(path, []).append(message)

    for error in _validator().iter_errors(payload):
        parts = list(error.absolute_path)
        if error.validator == "required":
            missing = [p for p in error.validator_value if p not in (error.instance or {})]
            for name in missing:
                add(_path([*parts, name]), "This field is required.")
            continue
        if error.validator == "additionalProperties":
            add(_path(parts), error.message)
            continue
        message = error.message
        if len(message) > 300:
            message = f"{message[:300]}…"
        add(_path(parts), message)
    if errors:
        return errors
    _check_references(payload, add)
    return errors


def _check_references(payload: dict[str, Any], add) -> None:
    gpu_indexes: set[int] = set()
    uuids: set[str] = set()
    mig_uuids: set[str] = set()
    for i, gpu in enumerate(payload.get("gpus", [])):
        if gpu["index"] in gpu_indexes:
            add(f"gpus.{i}.index", f"GPU index {gpu['index']} appears twice.")
        gpu_indexes.add(gpu["index"])
        uuid = gpu["uuid"].lower()
        if uuid in uuids:
            add(f"gpus.{i}.uuid", "GPU UUID appears twice.")
        uuids.add(uuid)
        placements: set[tuple[int, int]] = set()
        for j, mig in enumerate(gpu.get("mig_devices", [])):
            if mig["uuid"] in mig_uuids:
                add(f"gpus.{i}.mig_devices.{j}.uuid", "MIG device UUID appears twice.")
            mig_uuids.add(mig["uuid"])
            key = (mig["gpu_instance_id"], mig["compute_instance_id"])
            if None in key:
                if payload.get("partial") is not True:
                    add(
                        f"gpus.{i}.mig_devices.{j}",
                        "GPU and compute instance ids may be null only in a partial report.",
                    )
                continue
            if key in placements:
                add(f"gpus.{i}.mig_devices.{j}", "GPU instance and compute instance appear twice.")
            placements.add(key)
    if payload.get("partial") is not True:  # a partial report may leave out a pod's GPU
        _check_pod_devices(
            payload.get("pod_resources"), uuids | {m.lower() for m in mig_uuids}, add
        )
    nic_names: set[str] = set()
    for i, nic in enumerate(payload.get("nics", [])):
        if nic["name"] in nic_names:
            add(f"nics.{i}.name", f"NIC {nic['name']} appears twice.")
        nic_names.add(nic["name"])
    for i, link in enumerate(payload.get("links", [])):
        ends = (link["a"], link["b"])
        if ends[0] == ends[1]:
            add(f"links.{i}", "a link joins two different devices.")
        for side, end in zip("ab", ends, strict=True):
            kind, _, ref = end.partition(":")
            if kind == "gpu" and int(ref) not in gpu_indexes:
                add(f"links.{i}.{side}", f"no GPU with index {ref} in this report.")
            elif kind == "nic" and ref not in nic_names:
                add(f"links.{i}.{side}", f"no NIC named {ref} in this report.")


def _check_pod_devices(view: Any, devices: set[str], add) -> None:
    """Every device id the kubelet's pod-resources view names is a GPU or MIG device of this
    report (lower-cased UUIDs in `devices`), or a time-slicing replica of one
    (`GPU-<uuid>::N`): a pod on a device the server does not have is a wrong report."""
    if not isinstance(view, dict):
        return
    for p, pod in enumerate(view.get("pods") or []):
        for c, container in enumerate((pod or {}).get("containers") or []):
            for d, device in enumerate((container or {}).get("devices") or []):
                for k, device_id in enumerate((device or {}).get("ids") or []):
                    if str(device_id).split("::", 1)[0].lower() not in devices:
                        add(
                            f"pod_resources.pods.{p}.containers.{c}.devices.{d}.ids.{k}",
                            f"no GPU or MIG device {device_id} in this report.",
                        )
