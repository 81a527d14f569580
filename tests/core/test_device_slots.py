"""GPU pool scheduling with logical devices (no GPU needed): one verification per device at a time."""

import threading
import time

from musacoder.judge.pipeline import DeviceSlots


def test_each_gpu_has_one_holder_and_all_are_used():
    slots = DeviceSlots(cuda_count=3)
    active: dict[str, int] = {}
    seen, clashes = set(), []
    lock = threading.Lock()

    def job():
        with slots.hold("cuda") as dev:
            with lock:
                active[dev] = active.get(dev, 0) + 1
                if active[dev] > 1:
                    clashes.append(dev)
                seen.add(dev)
            time.sleep(0.02)
            with lock:
                active[dev] -= 1

    threads = [threading.Thread(target=job) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clashes == [] and seen == {"cuda:0", "cuda:1", "cuda:2"}


def test_named_gpu_waits_for_the_pool_holder():
    slots = DeviceSlots(cuda_count=1)
    order = []
    with slots.hold("cuda") as dev:
        assert dev == "cuda:0"
        t = threading.Thread(target=lambda: slots.hold("cuda:0").__enter__() and order.append("second"))
        t.start()
        time.sleep(0.05)
        order.append("first-released")
    t.join(timeout=2)
    assert order == ["first-released", "second"]


def test_cpu_is_one_slot():
    slots = DeviceSlots()
    with slots.hold("cpu") as d:
        assert d == "cpu"
        got = []
        t = threading.Thread(target=lambda: got.append(slots.hold("cpu").__enter__()))
        t.start()
        t.join(timeout=0.1)
        assert got == []
    t.join(timeout=2)
    assert got == ["cpu"]
