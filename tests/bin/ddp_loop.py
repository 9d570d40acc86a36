"""An upstream-style DDP training script, as PyTorch's torchrun tutorials write one.

Nothing lab-specific: torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT) is read by ``init_process_group`` (Gloo on CPU), the model is wrapped in
``DistributedDataParallel``, a ``DistributedSampler`` gives each rank its share of a
random dataset, and rank 0 saves ``snapshot.pt`` where it runs after each epoch. Each rank
says ``[CPU r] Epoch e | Batchsize: b | Steps: s``; rank 0 times every epoch and reports
``Iter #e: X img/sec per CPU``, then ``Img/sec per CPU: X +-Y`` and ``Total img/sec on N
CPU(s): X +-Y`` over the epochs after the first, as Horovod's benchmarks do.

    python ddp_loop.py TOTAL_EPOCHS SAVE_EVERY [--batch_size 16]
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def ddp_setup() -> None:
    dist.init_process_group(backend="gloo")


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every, snapshot_path):
        self.rank = int(os.environ["RANK"])
        self.model = DDP(model)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.snapshot_path = snapshot_path
        self.epochs_run = 0
        self.rates = []

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(source), targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        steps = len(self.train_data)
        print(f"[CPU {self.rank}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {steps}", flush=True)
        self.train_data.sampler.set_epoch(epoch)
        start = time.perf_counter()
        for source, targets in self.train_data:
            self._run_batch(source, targets)
        rate = b_sz * steps / (time.perf_counter() - start)
        if self.rank == 0:
            print(f"Iter #{epoch}: {rate:.1f} img/sec per CPU", flush=True)
        if epoch > 0:  # the first epoch warms up
            self.rates.append(rate)

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch + 1}
        torch.save(snapshot, self.snapshot_path)
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}", flush=True)

    def train(self, max_epochs):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.rank == 0 and (epoch + 1) % self.save_every == 0:
                self._save_snapshot(epoch)
        if self.rank == 0 and self.rates:
            world = dist.get_world_size()
            mean = sum(self.rates) / len(self.rates)
            var = sum((r - mean) ** 2 for r in self.rates) / len(self.rates)
            conf = 1.96 * var**0.5
            print(f"Img/sec per CPU: {mean:.1f} +-{conf:.1f}", flush=True)
            print(
                f"Total img/sec on {world} CPU(s): {world * mean:.1f} +-{world * conf:.1f}",
                flush=True,
            )


def load_train_objs():
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(256, 3, 32, 32, generator=generator)
    labels = torch.randint(0, 10, (256,), generator=generator)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 4 * 4, 10),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    return TensorDataset(images, labels), model, optimizer


def prepare_dataloader(dataset, batch_size):
    return DataLoader(
        dataset, batch_size=batch_size, shuffle=False, sampler=DistributedSampler(dataset)
    )


def main(save_every, total_epochs, batch_size, snapshot_path="snapshot.pt"):
    ddp_setup()
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, save_every, snapshot_path)
    trainer.train(total_epochs)
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("save_every", type=int, help="How often to save a snapshot")
    parser.add_argument("--batch_size", default=16, type=int, help="Input batch size on each rank")
    args = parser.parse_args()
    main(args.save_every, args.total_epochs, args.batch_size)
