"""Placement's chosen GPUs, outlined on the server page's interconnect matrix."""

import pytest

from topology.figures import highlight_gpus, interconnect_matrix_figure
from topology.interconnect import interconnect_matrix


def interconnect(gpus: int, nics: int = 1) -> dict:
    devices = [{"key": f"GPU{i}", "kind": "gpu", "index": i, "numa_node": 0} for i in range(gpus)]
    devices += [{"key": f"mlx5_{n}", "kind": "nic", "name": f"mlx5_{n}"} for n in range(nics)]
    links = [
        {"a": f"GPU{a}", "b": f"GPU{b}", "link_class": "NV18"}
        for a in range(gpus)
        for b in range(a + 1, gpus)
    ]
    return {"devices": devices, "links": links, "matrix": interconnect_matrix(devices, links)}


def test_the_pairs_between_chosen_gpus_are_outlined():
    data = interconnect(8)
    figure = interconnect_matrix_figure(data)
    marked = highlight_gpus(figure, data, [0, 1, 2, 3])
    shapes = marked["layout"]["shapes"]
    assert len(shapes) == 4 * 3  # ordered pairs of 4 GPUs, the diagonal left alone
    assert {(s["x0"] + 0.5, s["y0"] + 0.5) for s in shapes} == {
        (x, y) for x in range(4) for y in range(4) if x != y
    }
    assert any(t.get("name") == "chosen by placement" for t in marked["data"])
    assert "shapes" not in figure["layout"] or figure["layout"]["shapes"] == []  # input kept


def test_unknown_indexes_leave_the_figure_alone():
    data = interconnect(2)
    figure = interconnect_matrix_figure(data)
    assert highlight_gpus(figure, data, [7]) is figure


@pytest.mark.django_db
def test_server_page_outlines_the_gpus_named_in_the_link(client, user):
    from tests.reports import apply_reports, make_report

    servers = apply_reports(make_report("dgx-01"))
    client.force_login(user)
    response = client.get(f"/servers/{servers['dgx-01'].pk}/?gpus=4,5,x,99")
    assert response.context["chosen_gpus"] == [4, 5]
    assert len(response.context["figures"]["interconnect_matrix"]["layout"]["shapes"]) == 2
    assert response.content.decode().count('class="chosen"') == 2
