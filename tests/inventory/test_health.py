"""The GPU health rule: over plain values, and in SQL with the same answer for the same rows."""

from __future__ import annotations

import itertools

import pytest
from django.db.models import Count

from inventory.health import (
    HEALTH_FIELDS,
    PROBLEMS,
    GpuHealth,
    GpuProblem,
    gpu_health,
    gpu_problem_code,
    problem_of_code,
    problem_q,
)
from inventory.models import Gpu, Server


def test_a_gpu_without_counters_is_healthy():
    assert gpu_health({"status": "ok"}) == GpuHealth(healthy=True)
    assert gpu_health({}).problem is None


def test_every_reason_is_named_most_serious_first():
    health = gpu_health(
        {
            "status": "error",
            "remapped_rows_failure": True,
            "retired_pages_pending": True,
            "ecc_errors_uncorrected": 4,
        }
    )
    assert not health.healthy
    assert health.reasons == ("nvml_error", "row_remap_failed", "reset_pending", "uncorrected_ecc")
    assert health.problem == "nvml_error"
    assert health.counter_texts == (
        "row remap failed",
        "page retirement or row remap pending a reset",
        "uncorrected ECC errors",
    )


def test_a_lost_gpu_is_lost_and_nothing_else():
    health = gpu_health({"status": "lost", "ecc_errors_uncorrected": 9})
    assert health.reasons == ("lost",) and health.counter_texts == ()


def test_a_pending_row_remap_alone_and_corrected_errors_alone():
    assert gpu_health({"status": "ok", "remapped_rows_pending": True}).reasons == ("reset_pending",)
    assert gpu_health({"status": "ok", "ecc_errors_uncorrected": 0}).healthy


def test_problem_codes_count_from_one_in_order():
    assert problem_of_code(0) is None
    assert [problem_of_code(i + 1) for i in range(len(PROBLEMS))] == list(GpuProblem.values)
    with pytest.raises(ValueError):
        problem_q("overheating")


@pytest.mark.django_db
def test_sql_and_python_agree_on_every_combination_of_facts():
    """243 GPUs: each status with every null/false/true flag and null/zero/positive ECC."""
    server = Server.objects.create(identity="uuid:health", hostname="health")
    combos = itertools.product(
        ("ok", "error", "lost"),
        (None, False, True),
        (None, False, True),
        (None, False, True),
        (None, 0, 3),
    )
    Gpu.objects.bulk_create(
        Gpu(
            server=server,
            index=i % 256,
            uuid=f"GPU-{i}",
            **dict(zip(HEALTH_FIELDS, combo, strict=True)),
        )
        for i, combo in enumerate(combos)
    )
    rows = {r["uuid"]: gpu_health(r) for r in Gpu.objects.values("uuid", *HEALTH_FIELDS)}
    assert len(rows) == 243

    unhealthy = set(Gpu.objects.unhealthy().values_list("uuid", flat=True))
    healthy = set(Gpu.objects.healthy().values_list("uuid", flat=True))
    assert unhealthy == {u for u, h in rows.items() if not h.healthy}
    assert healthy == {u for u, h in rows.items() if h.healthy}
    assert healthy | unhealthy == set(rows) and len(healthy) == 2**4

    coded = dict(Gpu.objects.annotate(code=gpu_problem_code()).values_list("uuid", "code"))
    assert {u: problem_of_code(c) for u, c in coded.items()} == {
        u: h.problem for u, h in rows.items()
    }
    counts = Gpu.objects.aggregate(**{p: Count("id", filter=problem_q(p)) for p in PROBLEMS})
    assert counts == {p: sum(1 for h in rows.values() if p in h.reasons) for p in GpuProblem.values}


@pytest.mark.django_db
def test_a_gpu_row_judges_itself_by_the_same_rule():
    server = Server.objects.create(identity="uuid:one", hostname="one")
    gpu = Gpu.objects.create(server=server, index=0, uuid="GPU-1", retired_pages_pending=True)
    assert gpu.health.reasons == ("reset_pending",)
