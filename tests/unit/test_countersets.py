"""Counter sets as data: per-architecture names, pass splitting, validation, derived metrics."""

import re

import pytest

from profilectl import countersets
from profilectl.errors import UsageError


def test_every_shipped_set_resolves_for_cdna_rdna_and_hopper():
    sets = countersets.available_sets()
    assert {"basic", "extended", "compute_bound", "memory_bound", "communication", "instruction_mix"} <= set(sets)
    for name in sets:
        for vendor, arch in (("amd", "gfx942"), ("amd", "gfx1100"), ("nvidia", "sm_90")):
            resolved = countersets.load(name, vendor, arch)
            assert resolved.counters, (name, vendor, arch)
            assert not any("{" in c for c in resolved.counters)


def test_l2_counters_are_tcc_on_cdna_and_gl2c_on_rdna():
    assert {"TCC_HIT", "TCC_MISS"} <= set(countersets.load("basic", "amd", "gfx942").counters)
    rdna = countersets.load("basic", "amd", "gfx1100")
    assert {"GL2C_HIT", "GL2C_MISS"} <= set(rdna.counters) and "TCC_HIT" not in rdna.counters
    assert "GL2C_HIT" in rdna.derived["L2 hit rate (%)"]


def test_family_override_for_rdna():
    assert "SQ_INSTS_VALU_MFMA_MOPS_F16" in countersets.load("compute_bound", "amd", "gfx942").counters
    assert "SQ_INSTS_VALU_MFMA_MOPS_F16" not in countersets.load("compute_bound", "amd", "gfx1101").counters


def test_nvidia_metrics_are_valid_on_the_real_h200(device_fixtures):
    from profilectl.formats import ncu
    available = ncu.available_metrics((device_fixtures / "ncu-query-metrics.names.txt").read_text())
    for name in countersets.available_sets():
        metrics = countersets.load(name, "nvidia", "sm_90").counters
        countersets.validate(metrics, available, "H200", key=ncu.metric_base)


def test_split_passes_respects_block_limits():
    counters = tuple(f"TCC_C{i}" for i in range(6)) + tuple(f"SQ_C{i}" for i in range(10)) + ("GRBM_GUI_ACTIVE",)
    passes = countersets.split_passes(counters)
    assert sorted(c for p in passes for c in p) == sorted(counters)
    for p in passes:
        assert sum(c.startswith("TCC_") for c in p) <= 4 and sum(c.startswith("SQ_") for c in p) <= 8
    assert len(passes) == 2


def test_unknown_set_suggests_the_close_name():
    with pytest.raises(UsageError, match="did you mean 'basic'"):
        countersets.load("basci", "amd", "gfx942")


def test_validate_suggests_close_counter_names():
    with pytest.raises(UsageError, match=r"SQ_WAVEZ \(did you mean SQ_WAVES\?\)"):
        countersets.validate(("SQ_WAVES", "SQ_WAVEZ"), {"SQ_WAVES", "SQ_INSTS_VALU"}, "gfx90a")


def test_pmc_text_file_keeps_its_passes(tmp_path):
    path = tmp_path / "my.txt"
    path.write_text("# two passes\npmc: SQ_WAVES SQ_INSTS_VALU\npmc: TCC_HIT, TCC_MISS\n")
    counter_set = countersets.load(str(path), "amd", "gfx942")
    assert counter_set.explicit_passes == (("SQ_WAVES", "SQ_INSTS_VALU"), ("TCC_HIT", "TCC_MISS"))


def test_bad_pmc_file_names_the_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("pmc: SQ_WAVES\nSQ_BUSY_CYCLES\n")
    with pytest.raises(UsageError, match=r"bad.txt:2: expected 'pmc:"):
        countersets.load(str(path), "amd", "gfx942")


def test_user_yaml_set_with_broken_yaml(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("amd:\n  counters: [SQ_WAVES\n")
    with pytest.raises(UsageError, match="mine.yaml.*not valid YAML"):
        countersets.load(str(path), "amd", "gfx942")


@pytest.mark.parametrize("expression, expected", [
    ("100 * TCC_HIT / (TCC_HIT + TCC_MISS)", 75.0),
    ("dram__bytes_read.sum + dram__bytes_write.sum", 30.0),
    ("SQ_WAVES / ZERO", None),
    ("UNKNOWN_COUNTER * 2", None),
    ("__import__('os')", None),
])
def test_derived_metric_evaluation(expression, expected):
    values = {"TCC_HIT": 3.0, "TCC_MISS": 1.0, "dram__bytes_read.sum": 10.0, "dram__bytes_write.sum": 20.0,
              "SQ_WAVES": 5.0, "ZERO": 0.0}
    assert countersets.evaluate(expression, values) == expected


@pytest.mark.parametrize("formula, words", [("100 * (TCC_HIT", "not a valid formula"),
                                            ("TCC_HIT ** 2", "only + - * /"),
                                            ("max(TCC_HIT, 1)", "only + - * /")])
def test_a_broken_derived_metric_is_an_error_naming_it(tmp_path, formula, words):
    path = tmp_path / "mine.yaml"
    path.write_text(f"amd:\n  counters: [TCC_HIT]\nderived:\n  amd:\n    my metric: \"{formula}\"\n")
    with pytest.raises(UsageError, match=re.escape(f"mine.yaml: derived metric 'my metric': {words}")):
        countersets.load(str(path), "amd", "gfx942")


def test_a_folder_or_binary_file_as_counter_set_is_one_clear_error(tmp_path):
    with pytest.raises(UsageError, match="is a folder"):
        countersets.load(str(tmp_path) + "/", "amd", "gfx942")
    binary = tmp_path / "blob.txt"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(UsageError, match="not a text file"):
        countersets.load(str(binary), "amd", "gfx942")
