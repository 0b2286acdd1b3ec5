"""Filter forms built from the FilterSets: the page's filters, its words, dropdowns for choices,
and what the user typed kept."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from clusters.filters import NodeFilter
from clusters.models import Node
from clusters.selectors import node_list
from clusters.tables import NODE_FILTERS
from core.forms import FilterForm
from findings.filters import FindingFilter
from findings.tables import FINDING_FILTERS
from inventory.filters import ServerFilter
from inventory.models import Server
from inventory.selectors import server_list
from inventory.tables import SERVER_FILTERS

pytestmark = pytest.mark.django_db


def _form(filterset_class, spec: FilterForm, query: str, known=None):
    queryset = {ServerFilter: server_list(), NodeFilter: node_list()}.get(
        filterset_class, filterset_class.Meta.model.objects.all()
    )
    filterset = filterset_class(QueryDict(query), queryset=queryset)
    filterset.qs  # noqa: B018 (filtering first, as a page does)
    return spec.build(filterset, known=known)


def test_the_form_shows_the_page_filters_in_order_with_page_words():
    form = _form(ServerFilter, SERVER_FILTERS, "")
    assert list(form.fields) == ["search", "model", "state", "health", "mig", "rack", "cluster"]
    assert [form[name].label for name in form.fields] == [
        "Search",
        "GPU model",
        "State",
        "Health",
        "MIG",
        "Rack",
        "Cluster",
    ]


def test_choice_and_yes_no_filters_render_as_dropdowns_with_any_first():
    form = _form(ServerFilter, SERVER_FILTERS, "state=stale&mig=true")
    state = str(form["state"])
    assert state.startswith("<select") and '<option value="">any</option>' in state
    assert '<option value="stale" selected>Stale</option>' in state
    assert '<option value="true" selected>MIG enabled</option>' in str(form["mig"])


def test_text_filters_with_known_values_become_dropdowns():
    form = _form(ServerFilter, SERVER_FILTERS, "rack=r2", known={"rack": ["r1", "r2"]})
    rack = str(form["rack"])
    assert '<option value="r2" selected>r2</option>' in rack
    assert '<option value="r1">r1</option>' in rack
    assert '<input type="search" name="cluster"' in str(form["cluster"])


def test_typed_text_is_kept_and_escaped():
    form = _form(NodeFilter, NODE_FILTERS, "search=%22%3E%3Cscript%3E")
    html = str(form["search"])
    assert 'value="&quot;&gt;&lt;script&gt;"' in html and "<script>" not in html
    assert form["search"].field.widget.attrs["placeholder"] == "node or server name"


def test_hidden_filters_travel_unseen():
    form = _form(FindingFilter, FINDING_FILTERS, "open=false")
    assert [f.name for f in form.hidden_fields()] == ["open"]
    assert 'type="hidden" name="open" value="false"' in str(form["open"])
    assert [f.name for f in form.visible_fields()] == ["type", "severity", "cluster"]


def test_a_bad_value_is_a_field_error_on_the_form_not_a_failure():
    form = _form(NodeFilter, FilterForm(fields=("server", "kind")), "server=abc&kind=nope")
    assert set(form.errors) == {"server", "kind"}
    assert Node.objects.count() == 0 and Server.objects.count() == 0
