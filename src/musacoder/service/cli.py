"""`musacoder serve`: MooreEval over HTTP, on this machine (the local pool) or on a Ray cluster (`--ray`); see
docs/service.md."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        task_root: Optional[Path] = typer.Option(None, "--task-root", envvar="KERNELBENCH_DIR",
                                                 help="KernelBench folder (level1/ level2/ …); requests name tasks "
                                                      "by id under it. Without it, requests send task_source."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; anything but loopback needs "
                                                             "--token."),
        port: int = typer.Option(8000, "--port", help="TCP port."),
        workers: int = typer.Option(1, "--workers", min=1, help="Verifications run at once."),
        token: Optional[str] = typer.Option(None, "--token", envvar="MUSACODER_SERVICE_TOKEN",
                                            help="Bearer token required on /v1 (all but /v1/health)."),
        max_queue: int = typer.Option(256, "--max-queue", min=1, help="Jobs that may wait; more get 429."),
        job_deadline_s: float = typer.Option(1800.0, "--job-deadline-s", help="Seconds from submission to verdict; "
                                                                             "later is an infra_error."),
        max_body_mb: float = typer.Option(4.0, "--max-body-mb", help="Largest request body (MiB); more get 413."),
        cache_size: int = typer.Option(4096, "--cache-size", min=0, help="Verdicts kept for identical jobs."),
        ray_address: Optional[str] = typer.Option(None, "--ray", help="Verify on a Ray cluster: auto (the one "
                                                  "`ray start` runs here), HOST:PORT or ray://HOST:PORT, or local "
                                                  "(a private one). One verifier actor per GPU; builds on CPUs."),
        ray_actors: Optional[int] = typer.Option(None, "--ray-actors", min=1, help="Verifier actors (default: one "
                                                 "per GPU in the cluster)."),
        ray_gpus_per_actor: float = typer.Option(1.0, "--ray-gpus-per-actor", min=0.0,
                                                 help="GPUs each actor holds (0 with --ray-actors for CPU only)."),
        ray_jobs_per_actor: int = typer.Option(2, "--ray-jobs-per-actor", min=1,
                                               help="Verifications one actor runs at once."),
    ):
        """Serve MooreEval over HTTP: POST /v1/verify, /v1/verify/batch; GET /v1/jobs/{id}, /v1/health,
        /v1/metrics; the API schema at /docs."""
        try:
            import uvicorn

            from musacoder.service.app import create_app
            from musacoder.service.auth import BindError, check_bind
            from musacoder.service.config import ServiceConfig
        except ModuleNotFoundError as e:
            typer.echo(f"error: `musacoder serve` needs {e.name}: pip install 'musacoder[serve]'", err=True)
            raise typer.Exit(2)
        try:
            check_bind(host, token)
        except BindError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2)
        if task_root is not None and not task_root.is_dir():
            typer.echo(f"error: --task-root {task_root} is not a folder", err=True)
            raise typer.Exit(2)
        pool = None
        if ray_address is not None:
            from musacoder.service.ray_pool import RayPoolConfig, RayUnavailable, RayVerifier

            pool = RayVerifier(RayPoolConfig(address=ray_address, actors=ray_actors,
                                             gpus_per_actor=ray_gpus_per_actor, jobs_per_actor=ray_jobs_per_actor))
            try:
                pool.start()
            except RayUnavailable as e:
                typer.echo(f"error: {e}", err=True)
                raise typer.Exit(2)
            # threads of the job queue wait on builds as well as on actors: twice the actors' slots keeps both busy
            workers = max(workers, 2 * pool.slots)
        cfg = ServiceConfig(task_root=task_root, host=host, port=port, workers=workers, token=token,
                            max_queue=max_queue, job_deadline_s=job_deadline_s,
                            max_body_bytes=int(max_body_mb * (1 << 20)), result_cache_size=cache_size)
        if pool is None:
            app = create_app(cfg)
        else:
            app = create_app(cfg, verifier=pool, pool_context=lambda: pool, pool_stats=pool.stats)
        uvicorn.run(app, host=host, port=port, log_level="info")
