"""What the ranks run: workloads started as ``python -m lab.bench.<name>``.

``lab.bench.synthetic`` is the synthetic image-classification benchmark of the KungFu and
Horovod papers (random images, a keras application or a small smoke model) on real
engines: no communication (``single``), Horovod all-reduce, TensorFlow parameter servers,
TensorFlow MultiWorkerMirroredStrategy, and KungFu where it is installed. It prints
``@lab`` records on stdout (lab.metrics.records) and the upstream benchmarks' text lines.
``lab.bench.monitors`` holds KungFu's gradient noise scale and gradient variance monitors.
Nothing heavy is imported here: TensorFlow is loaded by the backend that needs it.
"""
