"""Pieces shared by the Slurm formats: GRES strings, node states, reasons, node records.

Every Slurm output (``scontrol`` text, ``sinfo``/``scontrol --json``, slurmrestd) spells a
node's GPUs as a GRES string (``gpu:h100:8(S:0-1)``) and its state as a base state plus
flags, so the parsing lives here once and the format modules only find the fields.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any

from clusters.parsers.records import GresRecord, NodeRecord

_NULLS = frozenset({"", "(null)", "n/a", "none", "null"})

# Slurm accepts a K/M/G/T/P suffix on GRES counts (gres.conf: Count=4G), meaning x1024.
_COUNT = re.compile(r"^(\d+)([KMGTP]?)$", re.IGNORECASE)
_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}

# A MIG profile at the end of a GRES type: "1g.10gb", "nvidia_a100_1g.5gb",
# "a100_3g.20gb", "nvidia_h100_80gb_hbm3_1g.10gb", "1c.3g.40gb", "1g.10gb+me".
_MIG_PROFILE = re.compile(r"(?:^|[_\-.])((?:\d+c\.)?\d+g\.\d+gb(?:\+me)?)$", re.IGNORECASE)

BASE_STATES = frozenset({"idle", "mixed", "allocated", "down", "error", "future", "unknown"})
_BASE_ALIASES = {
    "alloc": ("allocated", ()),
    "allocated": ("allocated", ()),
    "mix": ("mixed", ()),
    "drained": ("idle", ("drain",)),
    "drain": ("idle", ("drain",)),
    "draining": ("allocated", ("drain",)),
    "drng": ("allocated", ("drain",)),
    "fail": ("down", ("fail",)),
    "failing": ("allocated", ("fail",)),
    "maint": ("idle", ("maintenance",)),
    # sinfo's names for a node whose flag hides the base state (`%T`, `%t`, StateLong)
    "comp": ("allocated", ("completing",)),
    "completing": ("allocated", ("completing",)),
    "failg": ("allocated", ("fail",)),
    "futr": ("future", ()),
    "inval": ("idle", ("invalid",)),
    "plnd": ("idle", ("planned",)),
    "planned": ("idle", ("planned",)),
    "resv": ("idle", ("reserved",)),
    "reserved": ("idle", ("reserved",)),
    "unk": ("unknown", ()),
    "blocked": ("idle", ("blocked",)),
    "pow_dn": ("idle", ("powered_down",)),
    "powered_down": ("idle", ("powered_down",)),
    "powering_down": ("idle", ("powering_down",)),
    "pow_up": ("idle", ("powering_up",)),
    "powering_up": ("idle", ("powering_up",)),
}
_FLAG_ALIASES = {
    "maint": "maintenance",
    "no_respond": "not_responding",
    "npc": "not_responding",
    "power_save": "powered_down",
    "reboot": "reboot_requested",
}
# sinfo/scontrol append one symbol to the state name for some flags ("IDLE~", "DOWN*").
_SUFFIX_FLAGS = {
    "*": "not_responding",
    "~": "powered_down",
    "#": "powering_up",
    "%": "powering_down",
    "!": "power_down",
    "@": "reboot_requested",
    "^": "reboot_issued",
    "-": "planned",
    "$": "maintenance",
}
_NOT_READY_BASE = frozenset({"down", "error", "future", "unknown"})
_NOT_READY_FLAGS = frozenset({"not_responding", "powered_down", "powering_up"})
_NOT_SCHEDULABLE_FLAGS = frozenset(
    {"drain", "fail", "maintenance", "not_responding", "invalid_reg", "invalid", "powering_down"}
)

_REASON = re.compile(r"^(?P<text>.*?)\s*\[(?P<user>[^\]@\s]+)@(?P<when>[^\]]*)\]\s*$", re.DOTALL)


def is_null(value: object) -> bool:
    """True for the many ways Slurm says "nothing": None, "", "(null)", "N/A"."""
    return value is None or (isinstance(value, str) and value.strip().lower() in _NULLS)


def clean(value: object) -> str | None:
    """A stripped string, or None when Slurm says nothing."""
    if is_null(value):
        return None
    return str(value).strip()


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside parentheses: ``gpu:a:2(IDX:0,2),gpu:b:1`` is two items."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def mig_profile_of(gres_type: str | None) -> str | None:
    """The MIG profile a GRES type names (``nvidia_a100_1g.5gb`` -> ``1g.5gb``), else None."""
    if not gres_type:
        return None
    match = _MIG_PROFILE.search(gres_type)
    return match.group(1).lower() if match else None


def _parse_count(token: str) -> int | None:
    match = _COUNT.match(token)
    if not match:
        return None
    return int(match.group(1)) * _SUFFIX[match.group(2).upper()]


def parse_gres(text: str | None) -> list[GresRecord]:
    """Parse a GRES string: ``gpu:h100:8(S:0-1),shard:h100:32`` -> records.

    Accepts every spelling seen in Slurm 22.05-25.11 outputs: untyped (``gpu:8``), typed,
    MIG-typed (``gpu:1g.10gb:7``), socket or index suffixes (``(S:0-1)``,
    ``(IDX:0-3,5-7)``), ``(null)`` types, and count suffixes (``4G``). Entries with the
    same name and type (one per socket) are summed. ``(null)``/``N/A``/empty is no GRES.
    """
    if is_null(text):
        return []
    merged: dict[tuple[str, str | None], GresRecord] = {}
    for entry in split_top_level(str(text)):
        # An untyped GRES may print its type as "(null)": not the start of a suffix.
        entry = re.sub(r"\(null\)", "", entry, flags=re.IGNORECASE)
        extra = None
        paren = entry.find("(")
        if paren != -1:
            extra = entry[paren + 1 : entry.rfind(")")] if ")" in entry else entry[paren + 1 :]
            entry = entry[:paren]
        fields = [f.strip() for f in entry.split(":")]
        name = fields[0]
        if not name:
            continue
        gres_type: str | None = None
        count = 1
        if len(fields) >= 3:
            gres_type = clean(fields[1])
            parsed = _parse_count(fields[2])
            count = parsed if parsed is not None else 1
        elif len(fields) == 2:
            parsed = _parse_count(fields[1])
            if parsed is None:
                gres_type = clean(fields[1])
            else:
                count = parsed
        indexes = None
        if extra and extra.upper().startswith("IDX:"):
            indexes = clean(extra[4:])
        key = (name, gres_type)
        previous = merged.get(key)
        if previous is not None:
            count += previous.count
            if previous.used_indexes and indexes:
                indexes = f"{previous.used_indexes},{indexes}"
            indexes = indexes or previous.used_indexes
        merged[key] = GresRecord(
            name=name,
            type=gres_type,
            count=count,
            used_indexes=indexes,
            mig_profile=mig_profile_of(gres_type) if name == "gpu" else None,
        )
    return list(merged.values())


def combine_gres(configured: str | None, used: str | None, used_known: bool) -> list[GresRecord]:
    """Configured GRES with the ``used`` figure of each attached from GresUsed.

    ``used_known`` says whether the source carried a GresUsed field at all (plain
    ``scontrol show node`` does not); when it did, an entry missing from it is 0 in use.
    """
    totals = parse_gres(configured)
    if not used_known:
        return totals
    in_use = parse_gres(used)
    by_key = {(g.name, g.type): g for g in in_use}
    by_name: dict[str, list[GresRecord]] = {}
    for g in in_use:
        by_name.setdefault(g.name, []).append(g)
    result = []
    for g in totals:
        match = by_key.get((g.name, g.type))
        if match is None and len(by_name.get(g.name, [])) == 1 and g.type is None:
            match = by_name[g.name][0]
        result.append(
            GresRecord(
                name=g.name,
                type=g.type,
                count=g.count,
                used=match.count if match else 0,
                used_indexes=match.used_indexes if match else None,
                mig_profile=g.mig_profile,
            )
        )
    return result


def tres_counts(text: object) -> dict[tuple[str, str | None], int]:
    """The GRES counts in a TRES string: ``cpu=8,mem=64G,gres/gpu=4,gres/gpu:h100=4`` ->
    ``{("gpu", None): 4, ("gpu", "h100"): 4}`` (types lower-cased, as Slurm keeps TRES)."""
    counts: dict[tuple[str, str | None], int] = {}
    if is_null(text):
        return counts
    for item in str(text).split(","):
        key, _, value = item.strip().partition("=")
        if not key.startswith("gres/") or not value.strip().isdigit():
            continue
        name, _, gres_type = key[len("gres/") :].partition(":")
        counts[(name.lower(), gres_type.lower() or None)] = int(value)
    return counts


def used_from_tres(
    gres: list[GresRecord], alloc_tres: object, cfg_tres: object
) -> tuple[list[GresRecord], dict[str, int]]:
    """GRES in use from ``AllocTRES``, for outputs without ``GresUsed`` (plain ``scontrol
    show node``): the records with ``used`` set, and the total in use per GRES name.

    Known only for GRES the cluster accounts as TRES (``AccountingStorageTRES``), which
    then appear in ``CfgTRES``/``AllocTRES``; where they do not, nothing is claimed. Slurm
    prints the untyped total beside the typed counts (``gres/gpu=4,gres/gpu:h100=4`` is 4
    GPUs, not 8). A typed record takes its typed count (0 when its type is accounted but
    not allocated); an untyped or lone record takes the total; otherwise its share is
    unknown (None) while the total stays known.
    """
    if "gres/" not in f"{alloc_tres}{cfg_tres}":
        return gres, {}  # no GRES accounted as TRES: most clusters, and quick
    allocated = tres_counts(alloc_tres)
    accounted = allocated.keys() | tres_counts(cfg_tres).keys()
    names = {name for name, _ in accounted}
    totals: dict[str, int] = {}
    for name in names:
        typed = sum(v for (n, t), v in allocated.items() if n == name and t)
        totals[name] = allocated.get((name, None), typed)
    result = []
    for g in gres:
        if g.name.lower() not in names:
            result.append(g)
            continue
        key = (g.name.lower(), g.type.lower() if g.type else None)
        siblings = sum(1 for other in gres if other.name == g.name)
        if g.type and key in accounted:
            used: int | None = allocated.get(key, 0)
        elif siblings == 1 or totals[key[0]] == 0:
            used = totals[key[0]]
        else:
            used = None
        result.append(dataclasses.replace(g, used=used))
    return result, totals


def gpu_figures(gres: Iterable[GresRecord], used_known: bool) -> dict[str, Any]:
    """GPU capacity, use, MIG counts and product for a node, per DESIGN.md's contract.

    Capacity is the sum of every ``gpu`` GRES count, typed or not, MIG-typed included
    (``gpu:h100:2,gpu:h200:4`` is 6). The product is the GRES type; for MIG types, the
    part before the profile (``nvidia_a100_1g.5gb`` -> ``nvidia_a100``); several distinct
    types are joined with commas so none is lost.
    """
    gpus = [g for g in gres if g.name == "gpu"]
    capacity = sum(g.count for g in gpus)
    used = sum(g.used or 0 for g in gpus) if used_known else None
    mig: dict[str, int] = {}
    products: list[str] = []
    for g in gpus:
        product = g.type
        if g.mig_profile:
            mig[g.mig_profile] = mig.get(g.mig_profile, 0) + g.count
            product = _MIG_PROFILE.sub("", g.type or "") or None
        if product and product not in products:
            products.append(product)
    return {
        "gpu_capacity": capacity,
        "gpu_allocatable": capacity,
        "gpu_used": used,
        "mig_resources": mig,
        "gpu_product": ",".join(products) or None,
    }


def parse_state(state: object, flags: Iterable[str] = ()) -> tuple[str, list[str], str]:
    """Normalise a Slurm node state to (base, flags, raw spelling).

    Takes ``IDLE+DRAIN``, ``DOWN*``, ``MIXED+DRAIN+NOT_RESPONDING`` (text), ``"idle"`` with
    ``state_flags=["DRAIN"]`` (v0.0.38) or ``["IDLE", "DRAIN"]`` (v0.0.39+).
    """
    if isinstance(state, list | tuple):
        tokens = [str(s) for s in state]
        raw = "+".join(tokens)
    else:
        raw = str(state or "").strip()
        tokens = [t for t in raw.split("+") if t]
    tokens += [str(f) for f in flags]
    base: str | None = None
    out_flags: list[str] = []

    def add_flag(flag: str) -> None:
        if flag and flag not in out_flags:
            out_flags.append(flag)

    for token in tokens:
        word = token.strip()
        while word and word[-1] in _SUFFIX_FLAGS:
            add_flag(_SUFFIX_FLAGS[word[-1]])
            word = word[:-1]
        word = word.lower()
        if not word:
            continue
        if base is None and word in BASE_STATES:
            base = word
        elif base is None and word in _BASE_ALIASES:
            base, implied = _BASE_ALIASES[word]
            for flag in implied:
                add_flag(flag)
        else:
            add_flag(_FLAG_ALIASES.get(word, word))
    if raw and flags:
        raw = "+".join([raw, *[str(f) for f in flags]])
    return base or "unknown", out_flags, raw


def readiness(base: str, flags: Iterable[str]) -> tuple[bool, bool]:
    """(ready, schedulable) for a Slurm state.

    Ready: the node answers and is up (not DOWN, NOT_RESPONDING, powered down, FUTURE).
    Schedulable: Slurm would start new work there (not drained, failing, in maintenance,
    down, or not responding).
    """
    flag_set = set(flags)
    ready = base not in _NOT_READY_BASE and not (flag_set & _NOT_READY_FLAGS)
    schedulable = base not in _NOT_READY_BASE and not (flag_set & _NOT_SCHEDULABLE_FLAGS)
    return ready, schedulable


def split_reason(reason: object) -> tuple[str | None, str | None]:
    """``Kill task failed [root@2024-01-01T00:00:00]`` -> (``Kill task failed``, ``root``)."""
    text = clean(reason)
    if text is None:
        return None, None
    match = _REASON.match(text)
    if match:
        return (match.group("text").strip() or None), match.group("user")
    return text, None


def kernel_of(os_string: str | None) -> str | None:
    """The kernel release in Slurm's OS string: ``Linux 5.15.0-91-generic #101 ...``."""
    if not os_string:
        return None
    words = os_string.split()
    if len(words) >= 2 and words[0].lower() == "linux":
        return words[1]
    return None


_HOSTLIST_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(expression: str) -> list[str]:
    """Expand a Slurm hostlist: ``gpu-node[1-3,7],cpu01`` -> four names.

    Handles one bracket group per name, zero padding (``n[01-03]``) and comma lists; a
    malformed group is returned as written rather than guessed at.
    """
    names: list[str] = []
    for item in split_top_level(expression.replace("[", "(").replace("]", ")")):
        open_at = item.find("(")
        if open_at == -1 or ")" not in item[open_at:]:
            names.append(item.replace("(", "[").replace(")", "]"))
            continue
        close_at = item.find(")", open_at)
        prefix, body, suffix = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
        expanded: list[str] = []
        for part in body.split(","):
            match = _HOSTLIST_RANGE.match(part.strip())
            if not match:
                expanded = []
                break
            low, high = match.group(1), match.group(2) or match.group(1)
            width = len(low) if low.startswith("0") else 0
            if int(high) < int(low) or int(high) - int(low) > 100_000:
                expanded = []
                break
            expanded.extend(
                f"{prefix}{str(n).zfill(width)}{suffix}" for n in range(int(low), int(high) + 1)
            )
        names.extend(expanded or [item.replace("(", "[").replace(")", "]")])
    return names


def split_list(value: object) -> list[str]:
    """A comma list (``gpu,debug``) or a JSON list, without empties and nulls."""
    if value is None:
        return []
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(i).strip() for i in items if not is_null(i)]


def to_int(value: object) -> int | None:
    """An int from a plain number, a numeric string, or a v0.0.39+ ``{set, infinite,
    number}`` object (unset or infinite is None)."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        try:
            return int(float(text))
        except ValueError:
            return None


def build_node(
    *,
    name: str,
    hostname: object = None,
    address: object = None,
    state: object = None,
    state_flags: Iterable[str] = (),
    reason: object = None,
    reason_set_by: object = None,
    partitions: object = None,
    features: object = None,
    cpus: object = None,
    cpus_effective: object = None,
    real_memory_mb: object = None,
    gres: object = None,
    gres_used: object = None,
    gres_used_known: bool = False,
    alloc_tres: object = None,
    cfg_tres: object = None,
    os_string: object = None,
    slurm_version: object = None,
    architecture: object = None,
) -> NodeRecord:
    """One Slurm NodeRecord from the fields every Slurm format carries in some spelling.

    GRES in use come from ``gres_used`` when the source has it, else from ``alloc_tres``
    (with ``cfg_tres``) when given: see ``used_from_tres``.
    """
    base, flags, raw = parse_state(state, state_flags)
    ready, schedulable = readiness(base, flags)
    reason_text, reason_user = split_reason(reason)
    records = combine_gres(clean(gres), clean(gres_used), gres_used_known)
    tres_totals: dict[str, int] = {}
    if not gres_used_known and alloc_tres is not None:
        records, tres_totals = used_from_tres(records, alloc_tres, cfg_tres)
    figures = gpu_figures(records, gres_used_known or "gpu" in tres_totals)
    if "gpu" in tres_totals:
        figures["gpu_used"] = tres_totals["gpu"]
    memory_mb = to_int(real_memory_mb)
    os_text = clean(os_string)
    host = clean(hostname)
    addresses = []
    addr = clean(address)
    if addr:
        addresses = [a.strip() for a in addr.split(",") if a.strip()]
    return NodeRecord(
        name=name,
        kind="slurm",
        hostname=host,
        addresses=addresses,
        state=base,
        raw_state=raw or None,
        state_flags=flags,
        ready=ready,
        schedulable=schedulable,
        reason=reason_text,
        reason_set_by=clean(reason_set_by) or reason_user,
        partitions=split_list(partitions),
        features=split_list(features),
        cpus=to_int(cpus),
        cpus_effective=to_int(cpus_effective),
        memory_bytes=memory_mb * 1024 * 1024 if memory_mb is not None else None,
        gres=[g.to_dict() for g in records],
        kernel_version=kernel_of(os_text),
        slurm_version=clean(slurm_version),
        architecture=clean(architecture),
        os=os_text,
        **figures,
    )
