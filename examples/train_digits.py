"""Train a small CNN on scikit-learn's bundled digits (8x8 images, 1797 of them: no download),
with ug: ug.nn's conv2d / max_pool2d / cross_entropy, ug.value_and_grad for the gradients, Adam
written as `p.assign(...)`, the whole step compiled once by ug.jit.

    pip install -e ".[examples]" -e plugins/ug-llvm && python examples/train_digits.py

Prints a progress bar per epoch with the loss, then the test accuracy (>= 97% expected).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from tqdm import tqdm

import ug_core as ug


def init_params(rng: np.random.Generator) -> dict[str, ug.Tensor]:
    def he(*shape: int) -> ug.Tensor:
        fan_in = math.prod(shape[1:]) if len(shape) == 4 else shape[0]
        return ug.tensor((rng.standard_normal(shape) * math.sqrt(2 / fan_in)).astype(np.float32))
    return {
        "c1": he(16, 1, 3, 3), "b1": ug.zeros((16,)),      # 8x8 -> 8x8 (padding 1)
        "c2": he(32, 16, 3, 3), "b2": ug.zeros((32,)),     # 8x8 -> 8x8, pooled to 4x4
        "w3": he(32 * 4 * 4, 64), "b3": ug.zeros((64,)),
        "w4": he(64, 10), "b4": ug.zeros((10,)),
    }


def model(p: dict[str, ug.Tensor], x: ug.Tensor) -> ug.Tensor:
    h = ug.nn.conv2d(x, p["c1"], p["b1"], padding=1).relu()
    h = ug.nn.conv2d(h, p["c2"], p["b2"], padding=1).relu()
    h = ug.nn.max_pool2d(h, 2)
    h = (h.reshape(h.shape[0], -1) @ p["w3"] + p["b3"]).relu()
    return h @ p["w4"] + p["b4"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--device", default=None, help="a ug device (default: the preferred one)")
    args = parser.parse_args()

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]          # (1797, 1, 8, 8) in [0, 1]
    x_train, x_test, y_train, y_test = train_test_split(images, digits.target, test_size=0.25, random_state=0)
    rng = np.random.default_rng(0)
    params = {k: v.to(args.device) if args.device else v for k, v in init_params(rng).items()}
    m = {k: ug.zeros_like(v) for k, v in params.items()}
    v = {k: ug.zeros_like(v) for k, v in params.items()}
    t = ug.zeros((), device=params["c1"].device)
    b1, b2, eps = 0.9, 0.999, 1e-8

    @ug.jit
    def train_step(params, m, v, t, x, y):
        loss, grads = ug.value_and_grad(lambda p: ug.nn.cross_entropy(model(p, x), y))(params)
        t.assign(t + 1)
        for k, p in params.items():
            m[k].assign(b1 * m[k] + (1 - b1) * grads[k])
            v[k].assign(b2 * v[k] + (1 - b2) * grads[k] * grads[k])
            p.assign(p - args.lr * (m[k] / (1 - b1 ** t)) / ((v[k] / (1 - b2 ** t)).sqrt() + eps))
        return loss

    predict = ug.jit(lambda params, x: model(params, x).argmax(axis=-1))
    device = params["c1"].device
    n_batches = len(x_train) // args.batch            # whole batches only: one compiled step
    for epoch in range(args.epochs):
        order = rng.permutation(len(x_train))
        bar = tqdm(range(n_batches), desc=f"epoch {epoch + 1:2d}/{args.epochs}", leave=True)
        total = 0.0
        for i in bar:
            idx = order[i * args.batch:(i + 1) * args.batch]
            loss = train_step(params, m, v, t, ug.tensor(x_train[idx], device=device), ug.tensor(y_train[idx], device=device))
            total += float(loss)
            bar.set_postfix(loss=f"{total / (i + 1):.4f}")
    correct = int((predict(params, ug.tensor(x_test, device=device)).numpy() == y_test).sum())
    print(f"test accuracy: {correct / len(y_test):.4f} ({correct}/{len(y_test)}) on {device}")


if __name__ == "__main__":
    main()
