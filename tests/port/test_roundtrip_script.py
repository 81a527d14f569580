"""benchmarks/musa_roundtrip.py in its dry mode (no GPU): every candidate asked for is ported completely."""

import json


def test_dry_run_ports_the_candidates(tmp_path, benchmark_script):
    mod = benchmark_script("musa_roundtrip")
    out = tmp_path / "rt.json"
    rc = mod.main(["--kernelbench-dir", str(tmp_path), "--dry-run", "--only", "level1/19_*", "--only", "level2/1_*",
                   "--json", str(out)])
    res = json.loads(out.read_text())
    assert rc == 0 and res["dry_run"] is True
    assert [r["candidate"] for r in res["rows"]] == ["level1/19_ReLU", "level2/1_Conv2D_ReLU_BiasAdd"]
    assert all(r["port"] == "complete" and r["rewrites"] > 0 and r["unmapped"] == [] for r in res["rows"])
