"""Reading an exposition back: samples by family and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def families(text: str) -> dict:
    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(text: str, family: str, *label_names: str, suffix: str = "") -> dict:
    """{(label values...): value} of one family's samples (histograms: pick a suffix)."""
    found = families(text)[family]
    return {
        tuple(sample.labels.get(name, "") for name in label_names): sample.value
        for sample in found.samples
        if sample.name == family + suffix
    }
