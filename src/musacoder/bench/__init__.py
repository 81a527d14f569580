"""The benchmark runner: evaluate a model on KernelBench (or any KernelBench-format tasks) through MooreEval.

`suites` picks tasks, `runner` generates and verifies (multi-turn, resumable), `rundir` owns the run's files,
`metrics` holds the pure metric functions, `report` writes summary.json, report.md and report.html,
`cli` adds `musacoder bench` and `musacoder report`.
"""
