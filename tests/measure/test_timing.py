import time

import pytest
import torch

from abstraction_cost.measure import timing


def test_step_timer_on_the_cpu_measures_each_step():
    timer = timing.StepTimer(torch.device("cpu"))
    for seconds in (0.01, 0.03):
        with timer.step():
            time.sleep(seconds)
    first, second = timer.elapsed_ms()
    assert 9 <= first < 25 and 29 <= second < 50


def test_step_timer_refuses_unbalanced_calls():
    timer = timing.StepTimer(torch.device("cpu"))
    with pytest.raises(RuntimeError, match="without start"):
        timer.stop()
    timer.start()
    with pytest.raises(RuntimeError, match="twice"):
        timer.start()


def test_benchmark_warms_up_rotates_inputs_and_repeats():
    seen = []
    times = timing.benchmark(lambda x: seen.append(x), [(1,), (2,), (3,)], device=torch.device("cpu"),
                             warmup=2, repeats=4)
    assert len(times) == 4 and all(t >= 0 for t in times)
    assert seen == [1, 2, 1, 2, 3, 1]


@pytest.mark.gpu
def test_cuda_events_time_gpu_work_not_launch():
    device = torch.device("cuda")
    a = torch.randn(4096, 4096, device=device)
    times = timing.benchmark(lambda: a @ a, device=device, warmup=2, repeats=5, flush_l2=True)
    # 2·4096³ flop at < 1000 TFLOP/s takes > 0.1 ms; a launch alone would read ~0.01 ms
    assert min(times) > 0.1
    timer = timing.StepTimer(device)
    with timer.step():
        torch.cuda._sleep(10_000_000)
    assert timer.elapsed_ms()[0] > 1.0
