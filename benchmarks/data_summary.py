"""Summarise a stage-1 run: validation yield, reject reasons, decontamination and operator-family histograms.

    python benchmarks/data_summary.py RUN_DIR [--json OUT.json]

RUN_DIR holds `tasks/manifest.jsonl` (`musacoder data tasks --out RUN_DIR/tasks`), and optionally `decontam.json`
(`musacoder data decontam RUN_DIR/tasks --report RUN_DIR/decontam.json`) and `diag/profiles.jsonl`
(`musacoder data diagnose RUN_DIR/tasks --out RUN_DIR/diag`). Prints a table; the JSON (default RUN_DIR/summary.json)
holds the same numbers.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def summarise(run: Path) -> dict:
    manifest = _rows(run / "tasks" / "manifest.jsonl")
    if not manifest:
        raise SystemExit(f"{run / 'tasks' / 'manifest.jsonl'}: missing or empty; run `musacoder data tasks` first")
    kept = [r for r in manifest if r["kept"]]
    reasons = Counter(r["reason"].split(":")[0] for r in manifest if not r["kept"])
    decontam = {Path(r["file"]).name: r for r in json.loads((run / "decontam.json").read_text())} \
        if (run / "decontam.json").exists() else {}
    profiles = {r["file"]: r for r in _rows(run / "diag" / "profiles.jsonl")}
    clean = [r for r in kept if decontam and not decontam.get(r["file"], {}).get("contaminated", False)]
    return {
        "candidates": len(manifest),
        "kept": len(kept),
        "yield": round(len(kept) / len(manifest), 4),
        "rejected": dict(reasons.most_common()),
        "kinds_kept": dict(Counter(r["kind"] for r in kept).most_common()),
        "generator_families_kept": dict(Counter(r["family"] for r in kept).most_common()),
        "decontaminated": bool(decontam),
        "contaminated": sum(bool(r.get("contaminated")) for r in decontam.values()),
        "clean_kept": len(clean) if decontam else None,
        "closest_matches": Counter(Path(r["match"]).parts[0] for r in decontam.values()
                                   if r.get("contaminated") and r.get("match")).most_common(),
        "operator_families_kept": dict(Counter(profiles[r["file"]]["family"] for r in kept
                                               if r["file"] in profiles and profiles[r["file"]]["family"]).most_common()),
        "operator_families_clean": dict(Counter(profiles[r["file"]]["family"] for r in clean
                                                if r["file"] in profiles and profiles[r["file"]]["family"]).most_common()),
        "profile_errors": sum(bool(p.get("error")) for p in profiles.values()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    s = summarise(args.run)
    (args.json or args.run / "summary.json").write_text(json.dumps(s, indent=1))
    print(f"candidates {s['candidates']}, kept {s['kept']} (yield {100 * s['yield']:.1f} %)")
    print("rejected: " + (", ".join(f"{k} {n}" for k, n in s["rejected"].items()) or "none"))
    print("kept by kind: " + ", ".join(f"{k} {n}" for k, n in s["kinds_kept"].items()))
    if s["decontaminated"]:
        print(f"contaminated {s['contaminated']}, clean kept {s['clean_kept']}; contaminated by level: "
              + ", ".join(f"{k} {n}" for k, n in s["closest_matches"]))
    print("| family (profiler) | kept | clean |")
    print("|---|---:|---:|")
    for fam, n in s["operator_families_kept"].items():
        print(f"| {fam} | {n} | {s['operator_families_clean'].get(fam, 0) if s['decontaminated'] else '-'} |")


if __name__ == "__main__":
    main()
