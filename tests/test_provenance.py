"""measure/provenance.py: what a run records about the host it ran on."""

from attnbench.measure import provenance


def test_the_run_records_the_host_cpus_model(monkeypatch, tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Test CPU Model 9000 @ 3.1GHz\n\n")
    real_path = provenance.Path
    monkeypatch.setattr(provenance, "Path", lambda p, *a: info if p == "/proc/cpuinfo" else real_path(p, *a))
    prov = provenance.collect("cpu", 0)
    assert prov["host_cpu"] == "Test CPU Model 9000 @ 3.1GHz"
    assert prov["device"]["name"] == "CPU Test CPU Model 9000 @ 3.1GHz"


def test_without_cpuinfo_the_model_falls_back_to_the_platforms_word(monkeypatch, tmp_path):
    real_path = provenance.Path
    monkeypatch.setattr(provenance, "Path", lambda p, *a: tmp_path / "absent" if p == "/proc/cpuinfo" else real_path(p, *a))
    monkeypatch.setattr(provenance.platform, "processor", lambda: "")
    monkeypatch.setattr(provenance.platform, "machine", lambda: "x86_64")
    assert provenance.collect("cpu", 0)["host_cpu"] == "x86_64"
