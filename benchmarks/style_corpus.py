"""The style corpus (tests/style_corpus) through the whole MooreEval pipeline: false rejects and false accepts
against its labels.

    python benchmarks/style_corpus.py [--backends cuda,triton,cpu] [--full-size | --small] [--workers N] \
        [--only 'cu_*'] [--trials 5] [--json style_corpus.json] [--kernelbench-dir DIR]

On a GPU host the default is every candidate at the task's shipped sizes (`--full-size`); on a CPU-only host only
the cpu and triton candidates run (Triton under its interpreter) and every task is shrunk (`--small`): a label's own
`set`, else every integer size constant above SMALL_LIMIT set to SMALL_LIMIT. Level tasks are read from
--kernelbench-dir (default $KERNELBENCH_DIR, else /work/shared/kernelbench), never copied.

Candidates labelled `gpu_only` (what they show needs GPU hardware) are skipped without a GPU. A candidate whose
compiled code differs on the GPU carries `gpu_label` (with `gpu_reason`), which counts there instead of `label`:
a Triton broadcast-multiply-sum GEMM is fp32 under the interpreter and a TF32 `tl.dot` once compiled for the GPU.
A false reject is a legitimate candidate whose status is not `ok`; a false accept is an illegitimate one whose status
is `ok`. `infra_error` verdicts are neither (the verifier failed) and are listed apart. Prints one line per candidate
and a summary, and writes --json (labels, verdicts and the summary) after the run.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "style_corpus"
SMALL_LIMIT = 256


def _task_path(task: str, kernelbench: Path) -> Path:
    return REPO / task if task.startswith("examples/") else kernelbench / task


def _small_set(task_file: Path, label: dict) -> dict:
    """The label's own `set`, else every integer size constant above SMALL_LIMIT shrunk to it."""
    if label.get("set"):
        return dict(label["set"])
    from musacoder.tasks import size_constants

    return {k: SMALL_LIMIT for k, v in size_constants(task_file.read_text()).items()
            if isinstance(v, int) and not isinstance(v, bool) and v > SMALL_LIMIT}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default=None, help="comma list (default: all with a GPU, cpu,triton without)")
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--full-size", action="store_true", help="the tasks' shipped sizes (default with a GPU)")
    size.add_argument("--small", action="store_true", help="shrunk tasks (default without a GPU)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--only", default="", help="comma list of globs on candidate file names")
    ap.add_argument("--label", choices=("legitimate", "illegitimate"), default=None,
                    help="only the candidates of this label (the legitimate ones first, where a run may be cut)")
    ap.add_argument("--json", type=Path, default=Path("style_corpus.json"))
    ap.add_argument("--kernelbench-dir", type=Path,
                    default=Path(os.environ.get("KERNELBENCH_DIR", "/work/shared/kernelbench")))
    args = ap.parse_args()

    import torch

    from musacoder.config import VerifyConfig
    from musacoder.judge.batch import verify_batch

    gpu = torch.cuda.is_available()
    backends = set((args.backends or ("cpu,triton,cuda" if gpu else "cpu,triton")).split(","))
    small = args.small or not (args.full_size or gpu)
    labels = json.loads((CORPUS / "labels.json").read_text())
    if gpu:  # the label of what the GPU's compiler makes of it
        labels = {n: {**lab, "label": lab.get("gpu_label", lab["label"]), "reason": lab.get("gpu_reason", lab["reason"])}
                  for n, lab in labels.items()}
    globs = [g for g in args.only.split(",") if g]
    chosen = {n: lab for n, lab in sorted(labels.items()) if lab["backend"] in backends
              and (not globs or any(fnmatch.fnmatch(n, g) for g in globs))
              and (args.label is None or lab["label"] == args.label)}
    for n in [n for n in chosen if chosen[n].get("gpu_only") and not gpu]:
        print(f"{n:40s} skipped without a GPU: {chosen.pop(n)['gpu_only']}")
    work = Path(tempfile.mkdtemp(prefix="style-corpus-"))
    manifest, out = work / "manifest.jsonl", work / "results.jsonl"
    with open(manifest, "w") as f:
        for n, lab in chosen.items():
            task = _task_path(lab["task"], args.kernelbench_dir)
            f.write(json.dumps({"id": n, "task": str(task), "candidate": str(CORPUS / n), "backend": lab["backend"],
                                "set": _small_set(task, lab) if small else {}}) + "\n")
    cfg = VerifyConfig(trials=args.trials, time_candidate=False)
    verdicts: dict[str, dict] = {}

    def on_result(i, v):
        print(f"{i:40s} {chosen[i]['label']:13s} {v.status:14s} reward {v.reward if v.reward is None else round(v.reward, 3)}",
              flush=True)
        verdicts[i] = v.model_dump(mode="json")
        write_json(args.json, chosen, verdicts, gpu, small)  # after every verdict: a cut run keeps what it judged

    verify_batch(manifest, out, workers=args.workers, config=cfg, on_result=on_result)
    summary = write_json(args.json, chosen, verdicts, gpu, small)
    print_table(summary)
    print(f"wrote {args.json}")
    return 0


def write_json(path: Path, chosen: dict, verdicts: dict, gpu: bool, small: bool) -> dict:
    summary = summarise(chosen, verdicts)
    path.write_text(json.dumps({"device": "cuda" if gpu else "cpu", "small": small, "summary": summary,
                                "candidates": {n: {**chosen[n], "status": verdicts[n]["status"],
                                                   "reward": verdicts[n]["reward"],
                                                   "violations": verdicts[n]["violations"][:5],
                                                   "error": (verdicts[n].get("error") or "")[:800],
                                                   "systematic_defect": verdicts[n].get("systematic_defect"),
                                                   "failed_trials": [
                                                       {k: t.get(k) for k in ("trial", "kind", "message",
                                                                              "precision_error", "precision_bound")}
                                                       for t in verdicts[n].get("trials") or []
                                                       if not t.get("passed")][:4]}
                                               for n in chosen if n in verdicts}}, indent=1))
    return summary


def summarise(chosen: dict, verdicts: dict) -> dict:
    legit = [n for n in chosen if chosen[n]["label"] == "legitimate" and n in verdicts]
    bad = [n for n in chosen if chosen[n]["label"] == "illegitimate" and n in verdicts]
    infra = [n for n in verdicts if verdicts[n]["status"] == "infra_error"]
    return {
        "infra_error_legitimate": len([n for n in legit if n in infra]),
        "infra_error_illegitimate": len([n for n in bad if n in infra]),
        "legitimate": len(legit), "illegitimate": len(bad),
        "false_rejects": {n: verdicts[n]["status"] for n in legit if verdicts[n]["status"] not in ("ok", "infra_error")},
        "false_accepts": [n for n in bad if verdicts[n]["status"] == "ok"],
        "infra_error": infra,
        "statuses": {n: verdicts[n]["status"] for n in verdicts},
    }


def print_table(s: dict) -> None:
    print("\n| | candidates | false rejects | false accepts | infra_error |\n|---|---|---|---|---|")
    print(f"| legitimate | {s['legitimate']} | {len(s['false_rejects'])} | - | {s['infra_error_legitimate']} |")
    print(f"| illegitimate | {s['illegitimate']} | - | {len(s['false_accepts'])} | {s['infra_error_illegitimate']} |")
    for n, st in s["false_rejects"].items():
        print(f"false reject: {n} -> {st}")
    for n in s["false_accepts"]:
        print(f"false accept: {n}")


if __name__ == "__main__":
    sys.exit(main())
