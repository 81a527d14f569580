"""MooreEval over HTTP: `musacoder serve` and the API it answers.

On one machine the service runs the local pool (the same `verify` that `verify-batch` runs, in `--workers`
threads, each verification in its own sandboxed worker process). Modules, from the edge inwards:

- `cli`: the `serve` command (refuses to listen beyond loopback without a bearer token);
- `app`: the FastAPI application (routes, the body-size and token guard, error messages);
- `requests`: request bodies, task ids resolved under the task root, the options a client may set;
- `jobs`: the bounded queue, deduplication, the result cache, deadlines and the worker threads;
- `metrics`: counters and histograms in the Prometheus text format;
- `auth`: loopback check and token comparison.

`musacoder.client.RemoteVerifier` is the matching client.
"""

from musacoder.service.config import ServiceConfig

__all__ = ["ServiceConfig", "create_app"]


def create_app(config: ServiceConfig | None = None, verifier=None):
    """The FastAPI application; see `musacoder.service.app.create_app`."""
    from musacoder.service.app import create_app as _create_app

    return _create_app(config, verifier=verifier)
