"""An upstream-style Horovod TF2 benchmark: tf.keras model, hvd.DistributedGradientTape.

Written the way Horovod's own TF2 examples are (nothing lab-specific: no records, no
TF_USE_LEGACY_KERAS of its own), so it shows what a user's unmodified script gets under
``--launcher horovod``. Rank 0 alone reports, as those examples do: ``Iter #k: X img/sec
per CPU`` lines, then ``Img/sec per CPU: X +-Y`` and ``Total img/sec on N CPU(s): X +-Y``.

    python tests/bin/hvd_tf2_tape.py [--batch-size 8] [--iters 3] [--batches-per-iter 2]
"""

import argparse
import timeit

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--batches-per-iter", type=int, default=2)
    args = p.parse_args()

    hvd.init()
    model = tf.keras.Sequential(
        [tf.keras.Input((16, 16, 3)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)]
    )
    opt = tf.optimizers.SGD(0.01 * hvd.size())
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    images = tf.random.uniform([args.batch_size, 16, 16, 3])
    labels = tf.random.uniform([args.batch_size], maxval=10, dtype=tf.int64)

    @tf.function
    def step(first: bool) -> None:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        if first:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables(), root_rank=0)

    def say(text: str) -> None:
        if hvd.rank() == 0:
            print(text, flush=True)

    step(first=True)
    rates = []
    for i in range(args.iters):
        seconds = timeit.timeit(lambda: step(first=False), number=args.batches_per_iter)
        rate = args.batch_size * args.batches_per_iter / seconds
        say(f"Iter #{i}: {rate:.1f} img/sec per CPU")
        rates.append(rate)
    mean, conf = np.mean(rates), 1.96 * np.std(rates)
    say(f"Img/sec per CPU: {mean:.1f} +-{conf:.1f}")
    say(f"Total img/sec on {hvd.size()} CPU(s): {hvd.size() * mean:.1f} +-{hvd.size() * conf:.1f}")


if __name__ == "__main__":
    main()
