from agent.schema import load_schema, normalize_pci_bus_id


def test_pci_bus_ids_from_nvml_and_sysfs_compare_equal():
    assert normalize_pci_bus_id("00000000:19:00.0") == normalize_pci_bus_id("0000:19:00.0")
    assert normalize_pci_bus_id("0000:1B:00.0") == "0000:1b:00.0"
    assert normalize_pci_bus_id("N/A") is None


def test_schema_names_its_version():
    assert load_schema()["properties"]["schema"]["const"] == "cluster-atlas/report/v1"


def test_max_warnings_is_the_schemas_bound():
    from agent.schema import MAX_WARNINGS, load_schema

    assert load_schema()["properties"]["warnings"]["maxItems"] == MAX_WARNINGS
