#!/usr/bin/env bash
# One H200 call: GPU tests, throughput cold/warm, and the KernelBench-style baseline on the same candidates.
# Usage on the device machine (repo root): bash benchmarks/h200_run.sh  (writes logs/JSON under $OUT)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl; fi
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 MUSACODER_CACHE_DIR=/tmp/mc-cache
KB=${KB:-.kb}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch;print('torch', torch.__version__, 'cap', torch.cuda.get_device_capability())" | tee -a "$OUT/gpu.txt"
# 1. GPU tests (pre-build their candidates in parallel first)
python3 - <<'PY' > /tmp/gpu_manifest.jsonl
import json, pathlib
for p in [q for q in sorted(pathlib.Path("tests/gpu/candidates").glob("*.py")) if q.stem != "infinite_loop"] + [pathlib.Path("examples/candidates/relu_cuda.py")]:
    print(json.dumps({"id": p.stem, "task": "examples/tasks/relu.py", "candidate": str(p), "backend": "cuda"}))
PY
timeout ${T_PRE:-120} python3 -m musacoder.cli verify-batch /tmp/gpu_manifest.jsonl --out "$OUT/gpu_prewarm.jsonl" --workers 10 --no-timing > "$OUT/prewarm.log" 2>&1
timeout ${T_TEST:-150} python3 -m pytest tests/gpu -q -p no:cacheprovider > "$OUT/gpu_tests.log" 2>&1
tail -15 "$OUT/gpu_tests.log"
# 2. throughput, cold then warm, fast builds
timeout ${T_THR:-200} python3 benchmarks/throughput.py --kernelbench-dir "$KB" --candidates benchmarks/candidates/cuda \
  --workers ${WORKERS:-12} --limit ${LIMIT:-16} --max-input-mb 256 --json "$OUT/throughput.json" > "$OUT/throughput.log" 2>&1
tail -6 "$OUT/throughput.log"
# 3. baseline: sequential in-process load_inline + time (cold builds), same first candidates
timeout ${T_BASE:-130} python3 benchmarks/kernelbench_style_baseline.py --kernelbench-dir "$KB" --candidates benchmarks/candidates/cuda \
  --limit ${BASE_LIMIT:-2} --set batch_size=16 --json "$OUT/baseline.json" > "$OUT/baseline.log" 2>&1
tail -8 "$OUT/baseline.log"
