"""The order a batch runs its jobs in (`musacoder.judge.batch.by_task`): a task's jobs together, and the first job of
each task started ahead of the tasks before it, so its first-time work (build, library reading, reference cases) is
done when the rest of its task starts."""

from collections import Counter

from musacoder.judge.batch import VerifyJob, bounded, by_task, leads_ahead
from musacoder.records import Task


def _jobs(tasks: int, per_task: int) -> list[VerifyJob]:
    made = [Task(name=f"t{t}", source=f"# task {t}\n") for t in range(tasks)]
    # given interleaved, as a client may send them
    return [VerifyJob(f"t{t}#{k}", made[t], "code") for k in range(per_task) for t in range(tasks)]


def _ids(jobs) -> list[str]:
    return [j.id for j in jobs]


def test_one_worker_or_one_job_a_task_keeps_plain_task_order():
    assert _ids(by_task(_jobs(3, 2))) == ["t0#0", "t0#1", "t1#0", "t1#1", "t2#0", "t2#1"]
    assert _ids(by_task(_jobs(3, 1), workers=16)) == ["t0#0", "t1#0", "t2#0"]
    assert _ids(by_task(_jobs(1, 8), workers=16)) == [f"t0#{k}" for k in range(8)]


def test_the_first_job_of_a_task_starts_as_many_tasks_ahead_as_the_pool_holds():
    assert leads_ahead(16, [8] * 16) == 2 and leads_ahead(8, [8] * 4) == 1 and leads_ahead(4, [8] * 4) == 0
    order = _ids(by_task(_jobs(5, 4), workers=8))  # the pool holds two tasks' jobs: leaders two tasks ahead
    assert order[:3] == ["t0#0", "t1#0", "t2#0"]
    assert order == ["t0#0", "t1#0", "t2#0", "t0#1", "t0#2", "t0#3", "t3#0", "t1#1", "t1#2", "t1#3", "t4#0",
                     "t2#1", "t2#2", "t2#3", "t3#1", "t3#2", "t3#3", "t4#1", "t4#2", "t4#3"]
    # what the pool runs first: every job of the first tasks, and the leaders of the next ones
    first = order[:8]
    assert Counter(i.split("#")[0] for i in first) == {"t0": 4, "t1": 2, "t2": 1, "t3": 1}


def test_every_job_runs_once_in_any_schedule():
    for tasks, per_task, workers in ((16, 8, 16), (7, 3, 5), (2, 8, 64), (5, 1, 4)):
        jobs = _jobs(tasks, per_task)
        order = by_task(jobs, workers)
        assert sorted(_ids(order)) == sorted(_ids(jobs))
        ran = [j.id for j, _ in bounded(lambda j: j.id, order, workers)]
        assert sorted(ran) == sorted(_ids(jobs))


def test_verify_many_starts_leaders_ahead_unless_told_not_to(monkeypatch):
    from musacoder.judge import batch

    seen = []

    def recorded(fn, jobs, workers):  # the order the pool would draw jobs in
        seen.append(_ids(jobs))
        return iter(())

    monkeypatch.setattr(batch, "bounded", recorded)
    list(batch.verify_many(_jobs(3, 4), workers=8, verifier=lambda *a, **k: None))
    list(batch.verify_many(_jobs(3, 4), workers=8, verifier=lambda *a, **k: None, leaders_ahead=False))
    assert seen[0][:3] == ["t0#0", "t1#0", "t2#0"]
    assert seen[1] == [f"t{t}#{k}" for t in range(3) for k in range(4)]


def test_given_sizes_the_largest_tasks_go_first_and_equal_ones_keep_their_order():
    """On a GPU host: a task whose verifications run one at a time for memory starts its chain first, the small ones
    beside it; the leaders still start ahead."""
    sizes = {"t0": 1, "t1": 30, "t2": 1, "t3": 12}
    size = lambda job: sizes[job.task.name]  # noqa: E731
    assert _ids(by_task(_jobs(4, 2), size=size)) == ["t1#0", "t1#1", "t3#0", "t3#1", "t0#0", "t0#1", "t2#0", "t2#1"]
    order = _ids(by_task(_jobs(4, 4), workers=8, size=size))  # leaders two tasks ahead, as without sizes
    assert order[:3] == ["t1#0", "t3#0", "t0#0"] and order.index("t2#0") < order.index("t3#1")
    assert Counter(order) == Counter(_ids(_jobs(4, 4)))


def test_a_jobs_device_bytes_come_from_its_task_with_its_overrides():
    from pathlib import Path

    from musacoder.judge.batch import device_bytes
    from musacoder.tasks import load_task

    relu = load_task(Path(__file__).resolve().parents[2] / "examples" / "tasks" / "relu.py")
    small = device_bytes(VerifyJob("a", relu, "code"))
    assert small > 0
    assert "batch_size = 64" in relu.source
    assert small == 64 * 4096 * 4  # ReLU: one float32 input of 64 x 4096, no weights
    assert device_bytes(VerifyJob("b", relu, "code", overrides={"batch_size": 640})) == 10 * small
    broken = Task(name="broken", source="raise RuntimeError('no')\n")
    assert device_bytes(VerifyJob("c", broken, "code")) == 0


def test_a_batch_runs_the_largest_task_first_unless_asked_for_the_order_given():
    """`verify_many` runs the tasks with the most bytes of inputs and weights first by default (faster on the GPU,
    docs/benchmarks.md runs 10 and 11), and in the order given when asked (`largest_first=False`)."""
    from pathlib import Path

    from musacoder.judge.batch import verify_many
    from musacoder.records import Verdict
    from musacoder.tasks import load_task

    relu = load_task(Path(__file__).resolve().parents[2] / "examples" / "tasks" / "relu.py")
    big = relu.model_copy(update={"name": "big", "source": relu.source.replace("batch_size = 64", "batch_size = 640")})
    jobs = [VerifyJob("small", relu, "code"), VerifyJob("big", big, "code")]

    def run(**kw) -> list[str]:
        seen = []

        def fake(task, candidate, **_):
            seen.append(task.name)
            return Verdict(status="ok", task=task.key)

        list(verify_many(jobs, workers=1, verifier=fake, **kw))
        return seen

    assert run() == ["big", relu.name]
    assert run(largest_first=False) == [relu.name, "big"]
