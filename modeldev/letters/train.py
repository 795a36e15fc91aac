"""Train the label reader: ``python -m modeldev.letters.train --out DIR``.

Data are rendered on the fly from (seed, index) (``letters.data``), so a run needs no dataset on
disk and a held-out seed is a different set of labels drawn the same way. Single-threaded by
default: it shares the machine.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from modeldev.letters.data import batch
from ray_jobs.figures.letters.classes import CLASSES
from ray_jobs.figures.letters.model import build


def accuracy(model, x: np.ndarray, y: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    import torch

    model.eval()
    with torch.inference_mode():
        pred = model(torch.from_numpy(x)).argmax(1).numpy()
    return float((pred == y).mean())


def train(
    out: Path, n: int, seed: int, val_seed: int, n_val: int, epochs: int, threads: int
) -> dict:
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    started = time.perf_counter()
    x, y = batch(seed, 0, n)
    xv, yv = batch(val_seed, 0, n_val)
    model = build()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    steps = epochs * (n // 128)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.05)
    gen = np.random.default_rng(seed)
    history = []
    for epoch in range(epochs):
        model.train()
        order = gen.permutation(n)
        for k in range(n // 128):
            idx = order[k * 128 : (k + 1) * 128]
            xb = torch.from_numpy(x[idx])
            shift = int(gen.integers(-3, 4))  # small horizontal shifts: crops are off-centre
            xb = torch.roll(xb, shift, dims=3)
            loss = loss_fn(model(xb), torch.from_numpy(y[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        history.append({"epoch": epoch + 1, "val_accuracy": round(accuracy(model, xv, yv), 4)})
        print(json.dumps(history[-1]), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.half() for k, v in model.state_dict().items()}
    torch.save({"model": state, "classes": list(CLASSES)}, out / "label-reader.pt")
    summary = {
        "train": {"seed": seed, "n": n, "epochs": epochs},
        "val": {"seed": val_seed, "n": n_val, "accuracy": history[-1]["val_accuracy"]},
        "seconds": round(time.perf_counter() - started, 1),
        "history": history,
    }
    (out / "label-reader.train.json").write_text(json.dumps(summary, indent=2))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--val-seed", type=int, default=2)
    parser.add_argument("--n-val", type=int, default=3_000)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    train(args.out, args.n, args.seed, args.val_seed, args.n_val, args.epochs, args.threads)


if __name__ == "__main__":
    main()
