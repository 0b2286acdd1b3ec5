"""Where a webhook may post: the rule that keeps a staff account from probing the backend's
own network (loopback, the cloud metadata address, private ranges).

Pure apart from `resolve` (DNS). A URL is checked when it is saved and again before every
attempt, on every address its name resolves to, so a name that later points inside is
refused too; the attempt then connects to the address checked (services/webhooks.py pins
it), so the answer cannot change between the check and the connection.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Shared address space (RFC 6598): carrier-grade NAT, inside someone's network. The stdlib
# calls it neither private nor global, so it is named here.
CGNAT = ipaddress.ip_network("100.64.0.0/10")


class DestinationRefused(ValueError):
    """A webhook URL that may not be posted to; the message says why (never a secret)."""


class Unresolvable(DestinationRefused):
    """The URL's name has no address: refused when saved; at delivery, DNS may be down for
    a while, so the attempt is retried like an unreachable receiver."""


def allowed_networks(value: str) -> list[Network]:
    """ATLAS_WEBHOOK_ALLOWED_NETWORKS parsed: comma-separated CIDRs (a bad one raises)."""
    return [
        ipaddress.ip_network(part.strip(), strict=False)
        for part in value.split(",")
        if part.strip()
    ]


def address_refusal(address: Address, *, allowed: Iterable[Network] = ()) -> str | None:
    """Why `address` is no place for a webhook, or None when it may be posted to.

    An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is judged as the IPv4 it maps to.
    """
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address.version == net.version and address in net for net in allowed):
        return None
    kinds = [
        ("a loopback address", address.is_loopback),
        ("a link-local address", address.is_link_local),
        ("a multicast address", address.is_multicast),
        ("the unspecified address", address.is_unspecified),
        ("a reserved address", address.is_reserved),
        ("a private address", address.is_private or address in CGNAT),
        ("not a globally routable address", not address.is_global),
    ]
    for kind, hit in kinds:
        if hit:
            return f"{address} is {kind}"
    return None


def resolve(host: str, port: int) -> list[Address]:
    """Every address `host` resolves to (an IP literal is itself); [] when it does not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    found: list[Address] = []
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


def url_host_port(url: str) -> tuple[str, int]:
    """The host (without brackets) and port an http(s) URL connects to."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DestinationRefused("only http and https URLs with a host are accepted")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise DestinationRefused("the port is not a number from 1 to 65535") from exc
    return parts.hostname, port


def destination_check(url: str, *, allowed: Iterable[Network] = ()) -> list[Address]:
    """The addresses `url` may be posted to (all that its host resolves to); raises
    DestinationRefused when it does not resolve or any address is forbidden: one forbidden
    answer among many would let a rebinding name pick it."""
    allowed = list(allowed)
    host, port = url_host_port(url)
    addresses = resolve(host, port)
    if not addresses:
        raise Unresolvable(f"{host} does not resolve to an address")
    for address in addresses:
        reason = address_refusal(address, allowed=allowed)
        if reason is not None:
            shown = "" if host == str(address) else f"{host} resolves to "
            raise DestinationRefused(
                f"{shown}{reason}: webhooks may not post inside the network "
                "(ATLAS_WEBHOOK_ALLOWED_NETWORKS lists the ranges that may)"
            )
    return addresses
