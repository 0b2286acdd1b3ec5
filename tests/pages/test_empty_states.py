"""Honest empty states: a search that matched nothing says so; setup text only when empty."""

from __future__ import annotations

import pytest

from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db

SETUP = "Agents appear here within a minute"


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def test_search_without_results_says_so_and_offers_to_clear(signed_in):
    apply_reports(make_report("dgx-01"))
    text = signed_in.get("/servers/?search=nothing-like-this&state=").content.decode()
    assert "No servers match search “nothing-like-this”." in text
    assert '<a href="/servers/" id="clear-filters">' in text
    assert SETUP not in text


def test_truly_empty_inventory_shows_the_setup_text(signed_in):
    text = signed_in.get("/servers/").content.decode()
    assert SETUP in text and "match" not in text.split('id="empty-state"')[1]


def test_an_empty_form_submission_is_not_a_filter(signed_in):
    text = signed_in.get("/servers/?search=&model=&state=&sort=hostname").content.decode()
    assert SETUP in text and "clear-filters" not in text


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/gpus/?search=zz-no-gpu", "No GPUs match search “zz-no-gpu”."),
        ("/nodes/?search=zz-no-node", "No nodes match search “zz-no-node”."),
        ("/findings/?open=true&type=duplicate_gpu", "No open findings match type “duplicate_gpu”."),
    ],
)
def test_every_list_names_the_filters_that_matched_nothing(signed_in, path, expected):
    apply_reports(make_report("dgx-01"))
    text = signed_in.get(path).content.decode()
    assert expected in text and 'id="clear-filters"' in text


def test_filter_values_are_escaped_in_the_empty_state(signed_in):
    text = signed_in.get("/servers/?search=<b>x</b>").content.decode()
    assert "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;" in text


def test_placement_errors_name_the_field_as_labelled_and_keep_the_input(signed_in):
    text = signed_in.get("/placement/?tab=placement&gpus=16&gpus_per_node=0").content.decode()
    assert "GPUs per node:" in text and "gpus_per_node:" not in text
    assert 'name="gpus" min="1" value="16"' in text
    assert 'name="gpus_per_node" min="1" value="0"' in text


def test_failed_sign_in_keeps_the_username_typed(client, user):
    response = client.post("/login/", {"username": "some-<b>one", "password": "wrong"})
    text = response.content.decode()
    assert response.status_code == 200 and "did not match" in text
    assert 'value="some-&lt;b&gt;one"' in text
    assert 'name="password" id="id_password" autocomplete' in text and "wrong" not in text
