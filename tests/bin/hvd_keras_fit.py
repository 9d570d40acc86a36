"""An upstream-style Horovod Keras script: ``model.fit`` with Horovod's callbacks.

Written the way Horovod's TF2 Keras examples are (nothing lab-specific): the optimizer is
wrapped in ``hvd.DistributedOptimizer``, rank 0's variables are broadcast by
``hvd.callbacks.BroadcastGlobalVariablesCallback`` and metrics averaged by
``MetricAverageCallback``; rank 0 saves a checkpoint to the working directory. As in
Horovod's Keras synthetic benchmark, ``fit`` runs silently and rank 0 reports ``Iter #k: X
img/sec per CPU`` once an epoch, then ``Img/sec per CPU: X +-Y`` and ``Total img/sec on N
CPU(s): X +-Y`` over the epochs after the first (warm-up).

    python hvd_keras_fit.py [--batch-size 8] [--epochs 3] [--steps 4]
"""

import argparse
import timeit

import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf


class Timing(tf.keras.callbacks.Callback):
    """Images a second of each epoch, on this rank."""

    def __init__(self, images_per_epoch: int) -> None:
        super().__init__()
        self.images, self.rates, self.start = images_per_epoch, [], 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self.start = timeit.default_timer()

    def on_epoch_end(self, epoch, logs=None):
        rate = self.images / (timeit.default_timer() - self.start)
        if hvd.rank() == 0:
            print(f"Iter #{epoch}: {rate:.1f} img/sec per CPU", flush=True)
        if epoch > 0:  # the first epoch builds the graph
            self.rates.append(rate)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=4)
    args = p.parse_args()

    hvd.init()
    model = tf.keras.Sequential(
        [tf.keras.Input((8, 8, 3)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)]
    )
    opt = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.01 * hvd.size()))
    model.compile(
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=opt,
        metrics=["accuracy"],
    )
    n = args.batch_size * args.steps
    images = np.random.rand(n, 8, 8, 3).astype("float32")
    labels = np.random.randint(0, 10, size=(n,))
    timing = Timing(n)
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        timing,
    ]
    if hvd.rank() == 0:
        callbacks.append(tf.keras.callbacks.ModelCheckpoint("./checkpoint-{epoch}.h5"))
    model.fit(
        images,
        labels,
        batch_size=args.batch_size,
        epochs=args.epochs,
        callbacks=callbacks,
        verbose=0,
    )
    if hvd.rank() == 0:
        mean, conf = np.mean(timing.rates), 1.96 * np.std(timing.rates)
        size = hvd.size()
        print(f"Img/sec per CPU: {mean:.1f} +-{conf:.1f}")
        print(f"Total img/sec on {size} CPU(s): {size * mean:.1f} +-{size * conf:.1f}")


if __name__ == "__main__":
    main()
