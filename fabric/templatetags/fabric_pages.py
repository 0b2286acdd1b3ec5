"""Fabric parts of other apps' pages (the server page, the overview), each drawn by its own
include so those pages carry one line for it."""

from django import template

from fabric.selectors import fabric_cards, server_fabric

register = template.Library()


@register.inclusion_tag("fabric/_server_fabric_body.html")
def server_fabric_part(server) -> dict:
    return {"fabrics": server_fabric(server.pk)}


@register.inclusion_tag("fabric/_overview_card_body.html")
def fabric_overview_part() -> dict:
    return {"cards": fabric_cards()}
