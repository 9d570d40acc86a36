"""Parser tables: real output lines of the papers' scripts -> expected records."""

from __future__ import annotations

import pytest

from lab.metrics import parsers
from lab.metrics.parsers import SCHEMA, go_duration, parse_line, parse_lines
from lab.metrics.records import format_record

# (line, expected fields of the single record). Lines are verbatim from KungFu's
# osdi20/README.md (seed 000), Horovod's synthetic benchmark and MXNet/TF logs.
SINGLE = [
    # KungFu, kungfu-run tags (seed 000)
    (
        "[127.0.0.1.10000::stdout] Iter #2: 48.7 img/sec per /gpu:0",
        {
            "kind": "step",
            "rank": 0,
            "step": 2,
            "throughput": 48.7,
            "source": "kungfu",
            "device": "/gpu:0",
        },
    ),
    (
        "[127.0.0.1.10002::stdout] Iter #2: 48.8 img/sec per /gpu:0",
        {
            "kind": "step",
            "rank": 2,
            "step": 2,
            "throughput": 48.8,
            "source": "kungfu",
            "port": 10002,
        },
    ),
    (
        "[127.0.0.1.10003::stderr] Gradient Noise Scale: -1050.39917",
        {
            "kind": "metric",
            "rank": 3,
            "name": "gradient_noise_scale",
            "value": -1050.39917,
            "source": "kungfu",
        },
    ),
    (
        "[127.0.0.1.10000::stderr] Gradient Noise Scale: 6270.37646",
        {"kind": "metric", "rank": 0, "name": "gradient_noise_scale", "value": 6270.37646},
    ),
    (
        "[127.0.0.1.10001::stderr] Variance: 0.000108428423",
        {
            "kind": "metric",
            "rank": 1,
            "name": "gradient_variance",
            "value": 0.000108428423,
            "source": "kungfu",
        },
    ),
    (
        "[127.0.0.1.10003::stdout] Img/sec per /gpu:0: 30.5 +-2.2",
        {
            "kind": "summary",
            "rank": 3,
            "name": "per_device",
            "throughput": 30.5,
            "error": 2.2,
            "source": "kungfu",
        },
    ),
    (
        '[10.0.0.40.10000::stdout] RESULT: 43.429020 +-1.212320 {"framework":"kungfu","np":32,'
        '"strategy":"MULTI_BINARY_TREE_STAR","bs":32,"model":"ResNet50","kf-opt":"sync-sgd","fuse":false}',
        {
            "kind": "summary",
            "rank": 0,
            "name": "result",
            "throughput": 43.42902,
            "error": 1.21232,
            "np": 32,
            "source": "kungfu",
            "host": "10.0.0.40",
        },
    ),
    (
        "[10.0.0.40.10000::stdout] Warmup Step #1: 43.1 img/sec per /gpu:0, took 0.742s",
        {
            "kind": "step",
            "step": 1,
            "throughput": 43.1,
            "seconds": 0.742,
            "warmup": True,
            "source": "kungfu",
        },
    ),
    (
        "[10.0.0.7.10000::stdout] Cluster response Iter #20: 30.2 img/sec per /gpu:0",
        {"kind": "step", "rank": 0, "step": 20, "throughput": 30.2},
    ),
    (
        "[10.0.0.19.10000::stdout] resize 1 -> 2 took 20.39s",
        {"kind": "metric", "name": "resize_seconds", "value": 20.39, "from_size": 1, "to_size": 2},
    ),
    # Horovod's benchmark (upstream print formats; KungFu's README, Fig 9 baseline)
    (
        "Iter #3: 12.0 img/sec per GPU",
        {"kind": "step", "step": 3, "throughput": 12.0, "source": "horovod"},
    ),
    (
        "Iter #3: 152.4 img/sec per GPU",
        {"kind": "step", "rank": None, "throughput": 152.4, "source": "horovod"},
    ),
    (
        "Img/sec per GPU: 12.7 +-0.7",
        {
            "kind": "summary",
            "name": "per_device",
            "throughput": 12.7,
            "error": 0.7,
            "source": "horovod",
        },
    ),
    (
        "Total img/sec on 32 GPU(s): 406.5 +-22.7",
        {
            "kind": "summary",
            "name": "total",
            "throughput": 406.5,
            "error": 22.7,
            "np": 32,
            "source": "horovod",
        },
    ),
    (
        "Total img/sec on 4 GPU(s): 820.5 +-2.5",
        {"kind": "summary", "name": "total", "throughput": 820.5, "np": 4, "device": "GPU"},
    ),
    (
        'RESULT: 12.701925 +-0.708324 {"framework":"horovod","version":"0.16.1","np":32,'
        '"bs":32,"model":"ResNet50"}',
        {
            "kind": "summary",
            "name": "result",
            "throughput": 12.701925,
            "source": "horovod",
            "np": 32,
        },
    ),
    # mpirun --tag-output and horovodrun prefixes name the rank
    (
        "[1,3]<stdout>:Iter #0: 12.9 img/sec per GPU",
        {"kind": "step", "rank": 3, "throughput": 12.9},
    ),
    ("[2]<stdout>:Img/sec per CPU: 41.0 +-1.5", {"kind": "summary", "rank": 2, "throughput": 41.0}),
    # TensorFlow's step counter, python and absl forms (KungFu README, §4.3)
    (
        "[127.0.0.1.10001::stderr] INFO:tensorflow:global_step/sec: 1.58563",
        {
            "kind": "metric",
            "rank": 1,
            "name": "global_step/sec",
            "value": 1.58563,
            "source": "tensorflow",
        },
    ),
    (
        "[127.0.0.1.10002::stderr] I0904 16:59:44.791208 140353563645760 tpu_estimator.py:2307] "
        "global_step/sec: 1.58332",
        {"kind": "metric", "rank": 2, "name": "global_step/sec", "value": 1.58332},
    ),
    (
        "INFO:tensorflow:global_step/sec: 3.24512",
        {"kind": "metric", "value": 3.24512, "rank": None},
    ),
    (
        "[127.0.0.1.10002::stderr] INFO:tensorflow:examples/sec: 12.6666",
        {"kind": "step", "rank": 2, "throughput": 12.6666, "source": "tensorflow"},
    ),
    (
        "INFO:tensorflow:loss = 2.3025851, step = 100 (0.532 sec)",
        {"kind": "metric", "name": "loss", "value": 2.3025851, "step": 100, "seconds": 0.532},
    ),
]

NOTHING = [
    "",
    "Running benchmark...",
    "[127.0.0.1.10000::stdout] Running warmup...",
    "[I] all 4/4 local peers finished, took 1m56.574329056s",
    "[10.0.0.7.10000::stdout] [I] MonitorStrategy:: Checking Throughput = 119.70 MiB/s, "
    "reff= 92.11 MiB/s",
    "Model: ResNet50",
    "@lab not json",
    "INFO:root:Epoch[0] Train-accuracy=0.993666",
]


@pytest.mark.parametrize(("line", "expected"), SINGLE)
def test_single_record_lines(line: str, expected: dict) -> None:
    recs = parse_line(line)
    assert len(recs) == 1, recs
    rec = recs[0]
    assert set(SCHEMA) <= set(rec)
    for key, value in expected.items():
        assert rec[key] == (pytest.approx(value) if isinstance(value, float) else value), key


@pytest.mark.parametrize("line", NOTHING)
def test_lines_without_records(line: str) -> None:
    assert parse_line(line) == []


def test_ansi_colour_codes_are_stripped() -> None:
    line = "\x1b[1;32m[127.0.0.1.10001::stdout]\x1b[0m Iter #2: 47.4 img/sec per /gpu:0\r\n"
    (rec,) = parse_line(line)
    assert (rec["rank"], rec["step"], rec["throughput"]) == (1, 2, 47.4)


def test_explicit_rank_wins_over_tag() -> None:
    (rec,) = parse_line("[127.0.0.1.10003::stdout] Iter #9: 29.6 img/sec per /gpu:0", rank=7)
    assert rec["rank"] == 7
    assert rec["local_rank"] == 3  # what the tag said is kept


def test_lab_record_delegates_to_records_module() -> None:
    line = format_record("step", rank=1, step=12, samples=64, seconds=0.5, time=1.0)
    (rec,) = parse_line(line)
    assert rec["source"] == "lab"
    assert (rec["kind"], rec["rank"], rec["step"], rec["samples"]) == ("step", 1, 12, 64)
    assert rec["throughput"] == pytest.approx(128.0)
    assert rec["time"] == 1.0  # extra fields survive


def test_lab_record_behind_a_tag_keeps_its_own_rank() -> None:
    line = "[127.0.0.1.10001::stdout] " + format_record("metric", rank=1, name="loss", value=0.5)
    (rec,) = parse_line(line)
    assert (rec["kind"], rec["rank"], rec["name"], rec["value"]) == ("metric", 1, "loss", 0.5)


MXNET = [
    # the brief's form, and real logs (Speedometer's "Batch [n]" and "Batch [a-b]" forms)
    (
        "INFO:root:Epoch[0] Batch [20]\tSpeed: 256.32 samples/sec\taccuracy=0.1",
        0,
        20,
        256.32,
        {"accuracy": 0.1},
    ),
    (
        "INFO:root:Epoch[0] Batch [0-20]\tSpeed: 520.85 samples/sec\tacc=0.572545\t"
        "MAE=10.734747\tCUM_5=0.240699",
        0,
        20,
        520.85,
        {"acc": 0.572545, "MAE": 10.734747, "CUM_5": 0.240699},
    ),
    (
        "INFO:root:Epoch[0] Batch [50]   Speed: 1.16 samples/sec Train-accuracy=0.894318",
        0,
        50,
        1.16,
        {"Train-accuracy": 0.894318},
    ),
    (
        "INFO:root:Epoch[0] Batch [20]\tSpeed: 6.41 samples/sec\t"
        "Train-RPNAcc=0.784970,\tRPNLogLoss=0.575420,\t",
        0,
        20,
        6.41,
        {"Train-RPNAcc": 0.78497, "RPNLogLoss": 0.57542},
    ),
    ("INFO:root:Iter[3] Batch [100]\tSpeed: 400.00 samples/sec", 3, 100, 400.0, {}),
    # lab.bench.p3.mxnet_workload on MXNet 1.9.1 (emulated-2, 475mbit; its logging format)
    (
        "Epoch[0] Batch [4-5]\tSpeed: 99.35 samples/sec\tloss=2.260402",
        0,
        5,
        99.35,
        {"loss": 2.260402},
    ),
]


@pytest.mark.parametrize(("line", "epoch", "batch", "speed", "metrics"), MXNET)
def test_mxnet_speedometer(line: str, epoch: int, batch: int, speed: float, metrics: dict) -> None:
    recs = parse_line(line, rank=0)
    step, *rest = recs
    assert (step["kind"], step["epoch"], step["step"], step["source"]) == (
        "step",
        epoch,
        batch,
        "mxnet",
    )
    assert step["throughput"] == pytest.approx(speed)
    assert {r["name"]: r["value"] for r in rest} == pytest.approx(metrics)
    assert all(r["kind"] == "metric" and r["step"] == batch and r["rank"] == 0 for r in rest)


def test_parse_lines_of_a_kungfu_log_from_seed_000() -> None:
    log = """...
[127.0.0.1.10001::stderr] Variance: 0.000108428423
[127.0.0.1.10000::stderr] Variance: 0.000108428423
[127.0.0.1.10002::stderr] Variance: 0.000108428423
[127.0.0.1.10000::stdout] Iter #2: 47.4 img/sec per /gpu:0
[127.0.0.1.10001::stdout] Iter #2: 47.4 img/sec per /gpu:0
[127.0.0.1.10002::stdout] Iter #2: 47.4 img/sec per /gpu:0
[127.0.0.1.10003::stderr] Variance: 0.000108428423
[127.0.0.1.10003::stdout] Iter #2: 47.4 img/sec per /gpu:0
...""".splitlines()
    recs = parse_lines(log)
    steps = [r for r in recs if r["kind"] == "step"]
    metrics = [r for r in recs if r["kind"] == "metric"]
    assert sorted(r["rank"] for r in steps) == [0, 1, 2, 3]
    assert sorted(r["rank"] for r in metrics) == [0, 1, 2, 3]
    assert {r["throughput"] for r in steps} == {47.4}


def test_go_durations() -> None:
    assert go_duration("20.39s") == pytest.approx(20.39)
    assert go_duration("40.12ms") == pytest.approx(0.04012)
    assert go_duration("1m56.574329056s") == pytest.approx(116.574329056)
    with pytest.raises(ValueError):
        go_duration("12 parsecs")


def test_register_format_adds_and_orders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parsers, "FORMATS", list(parsers.FORMATS))

    @parsers.register_format("custom", r"^samples/s = (?P<v>\d+)$", before="lab")
    def _custom(m, ctx):  # type: ignore[no-untyped-def]
        return [{"kind": "step", "throughput": float(m["v"]), "source": "custom"}]

    assert parsers.FORMATS[0].name == "custom"
    (rec,) = parse_line("samples/s = 12")
    assert (rec["throughput"], rec["source"]) == (12.0, "custom")


def test_a_records_own_rank_wins_over_the_logs() -> None:
    """The ps chief's log holds step records of each worker (rank = the worker's index)."""
    chief = '@lab {"kind": "step", "rank": 1, "step": 4, "samples": 32, "seconds": 0.5}'
    assert [r["rank"] for r in parse_line(chief, rank=3)] == [1]
    assert [r["rank"] for r in parse_line("Iter #2: 48.7 img/sec per GPU", rank=3)] == [3]
