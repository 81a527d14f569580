"""Write a verl dataset (parquet) of KernelBench tasks for `musacoder_grpo.yaml`.

    python examples/verl/make_dataset.py $KERNELBENCH_DIR/level1 data/kb_level1.parquet --backend cuda
    python examples/verl/make_dataset.py $KERNELBENCH_DIR/level1 data/kb_level1_val.parquet --backend cuda --split val

One row per task file: `prompt` (musacoder's first-turn chat messages), `reward_model.ground_truth` (the task id the
service resolves under its --task-root, e.g. level1/19_ReLU), `extra_info` (backend, task name, split), `agent_name`.
Rows of the `val` split are never turned into repair prompts by the agent loop's Buffered Dynamic Retry (verl 0.9
does not tell an agent loop that it is validating, so the rows say it).
Needs pandas and pyarrow (both come with verl).
"""

import argparse
from pathlib import Path

from musacoder.prompts import first_turn_messages


def rows(folder: Path, backend: str, agent: str, split: str = "train") -> list[dict]:
    out = []
    for path in sorted(folder.glob("*.py")):
        task_id = f"{folder.name}/{path.stem}"
        out.append({"data_source": "kernelbench", "agent_name": agent,
                    "prompt": first_turn_messages(path.read_text(), backend),
                    "reward_model": {"style": "rule", "ground_truth": task_id},
                    "extra_info": {"backend": backend, "task_name": task_id, "split": split}})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="a KernelBench level folder, e.g. KernelBench/level1")
    ap.add_argument("out", type=Path, help="parquet file to write")
    ap.add_argument("--backend", default="cuda", choices=["cuda", "triton", "cpu"])
    ap.add_argument("--agent", default="mooreeval_agent", help="verl agent loop per row")
    ap.add_argument("--split", default="train", choices=["train", "val"],
                    help="val: rows for data.val_files (measured as they are, never replaced by repair prompts)")
    args = ap.parse_args()
    import pandas as pd

    data = rows(args.folder, args.backend, args.agent, args.split)
    if not data:
        raise SystemExit(f"no task files (*.py) in {args.folder}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(data).to_parquet(args.out)
    print(f"{len(data)} tasks -> {args.out}")


if __name__ == "__main__":
    main()
