"""`ug bench`'s training rows: one optimizer step (forward, loss, backward, update) per call, ug
(ug.grad under ug.jit, the update written as `p.assign(...)`) against torch eager, torch.compile,
JAX (jax.jit of value_and_grad plus the same update) and tinygrad (TinyJit of the step with its
Adam), each from the same initial parameters and data. The check compares the losses of the first steps with torch eager's (each framework
starts from the same values, so they agree to rounding); the table gives the median time per step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Collection

import numpy as np

import ug_core as ug

from . import peers

Step = Callable[[], Any]   # one training step; returns the loss (any array-like of one element)


@dataclass
class Training:
    name: str
    title: str
    make: Callable[[np.random.Generator, int], dict[str, np.ndarray]]   # (rng, scale) -> params and data
    build: dict[str, Callable[[dict[str, np.ndarray], str], Step]]       # framework -> (arrays, device) -> step
    rtol: float = 2e-3
    # rows that are not training steps (ug_bench.spectral): each implementation's first result is
    # compared with this float64 reference of the arrays (max error relative to its largest
    # magnitude) instead of its first losses with torch eager's
    reference: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None


ADAM = dict(lr=1e-3, b1=0.9, b2=0.999, eps=1e-8)


def _he(rng: np.random.Generator, *shape: int) -> np.ndarray:
    fan_in = math.prod(shape[1:]) if len(shape) > 2 else shape[0]
    return (rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)).astype(np.float32)


# --- the models, once per framework ----------------------------------------------------------------

MLP_SIZES = (784, 512, 512, 10)


def _mlp_arrays(rng: np.random.Generator, scale: int) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for i, (a, b) in enumerate(zip(MLP_SIZES[:-1], MLP_SIZES[1:])):
        arrays[f"w{i}"] = _he(rng, a, b)
        arrays[f"b{i}"] = np.zeros(b, np.float32)
    batch = max(8, 256 // scale)
    arrays["x"] = rng.standard_normal((batch, MLP_SIZES[0])).astype(np.float32)
    arrays["y"] = rng.integers(0, MLP_SIZES[-1], batch)
    return arrays


def _conv_arrays(rng: np.random.Generator, scale: int) -> dict[str, np.ndarray]:
    batch = max(4, 64 // scale)
    return {
        "c1": _he(rng, 16, 1, 3, 3), "d1": np.zeros(16, np.float32),
        "c2": _he(rng, 32, 16, 3, 3), "d2": np.zeros(32, np.float32),
        "w": _he(rng, 32 * 12 * 12, 10), "b": np.zeros(10, np.float32),
        "x": rng.standard_normal((batch, 1, 28, 28)).astype(np.float32),
        "y": rng.integers(0, 10, batch),
    }


def _ce_arrays(rng: np.random.Generator, scale: int) -> dict[str, np.ndarray]:
    n = max(64, 4096 // scale)
    return {"logits": (rng.standard_normal((n, 4096)) * 2).astype(np.float32), "y": rng.integers(0, 4096, n)}


PARAMS = {"mlp": [f"{k}{i}" for i in range(3) for k in "wb"], "conv": ["c1", "d1", "c2", "d2", "w", "b"]}


def _ug_ce(logits: Any, labels: Any) -> Any:
    """The mean cross-entropy of integer labels: ug.nn's where it has it."""
    nn = getattr(ug, "nn", None)
    if nn is not None and hasattr(nn, "cross_entropy"):
        return nn.cross_entropy(logits, labels)
    lp = logits.log_softmax(axis=-1)
    hit = ug.arange(logits.shape[-1], dtype=labels.dtype, device=logits.device) == labels[:, None]
    return -ug.where(hit, lp, 0.0).sum() / logits.shape[0]


def _ug_forward(kind: str, p: dict[str, Any], x: Any) -> Any:
    if kind == "mlp":
        for i in range(3):
            x = x @ p[f"w{i}"] + p[f"b{i}"]
            if i < 2:
                x = x.relu()
        return x
    h = ug.nn.conv2d(x, p["c1"], p["d1"]).relu()
    h = ug.nn.conv2d(h, p["c2"], p["d2"]).relu()
    h = ug.nn.max_pool2d(h, 2)
    return h.reshape(h.shape[0], -1) @ p["w"] + p["b"]


def _ug_step(kind: str) -> Callable[[dict[str, np.ndarray], str], Step]:
    def build(arrays: dict[str, np.ndarray], device: str) -> Step:
        names = PARAMS[kind]
        params = {k: ug.tensor(arrays[k], device=device) for k in names}
        m = {k: ug.zeros(arrays[k].shape, device=device) for k in names}
        v = {k: ug.zeros(arrays[k].shape, device=device) for k in names}
        t = ug.zeros((), device=device)
        x, y = ug.tensor(arrays["x"], device=device), ug.tensor(arrays["y"], device=device)
        lr, b1, b2, eps = ADAM["lr"], ADAM["b1"], ADAM["b2"], ADAM["eps"]

        @ug.jit
        def step(params: dict[str, Any], m: dict[str, Any], v: dict[str, Any], t: Any, x: Any, y: Any) -> Any:
            loss, grads = ug.value_and_grad(lambda p: _ug_ce(_ug_forward(kind, p, x), y))(params)
            t.assign(t + 1)
            for k, p in params.items():
                m[k].assign(b1 * m[k] + (1 - b1) * grads[k])
                v[k].assign(b2 * v[k] + (1 - b2) * grads[k] * grads[k])
                p.assign(p - lr * (m[k] / (1 - b1 ** t)) / ((v[k] / (1 - b2 ** t)).sqrt() + eps))
            return loss
        return lambda: step(params, m, v, t, x, y).numpy()
    return build


def _ug_ce_step(arrays: dict[str, np.ndarray], device: str) -> Step:
    logits, y = ug.tensor(arrays["logits"], device=device), ug.tensor(arrays["y"], device=device)
    step = ug.jit(ug.value_and_grad(_ug_ce))

    def run() -> Any:
        loss, g = step(logits, y)
        ug.realize(loss, g)
        return loss.numpy()
    return run


def _torch_step(kind: str, compiled: bool) -> Callable[[dict[str, np.ndarray], str], Step]:
    def build(arrays: dict[str, np.ndarray], device: str) -> Step:
        import torch
        import torch.nn.functional as F
        if kind == "ce":
            logits = torch.from_numpy(arrays["logits"]).requires_grad_()
            y = torch.from_numpy(arrays["y"])

            def loss_and_grad(logits: Any, y: Any) -> Any:
                loss = F.cross_entropy(logits, y)
                (g,) = torch.autograd.grad(loss, [logits])
                return loss.detach(), g
            fn: Callable[..., Any] = torch.compile(loss_and_grad) if compiled else loss_and_grad
            return lambda: fn(logits, y)[0].numpy()
        params = {k: torch.from_numpy(arrays[k].copy()).requires_grad_() for k in PARAMS[kind]}
        x, y = torch.from_numpy(arrays["x"]), torch.from_numpy(arrays["y"])

        def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
            if kind == "mlp":
                h = x
                for i in range(3):
                    h = h @ p[f"w{i}"] + p[f"b{i}"]
                    if i < 2:
                        h = h.relu()
            else:
                h = F.relu(F.conv2d(x, p["c1"], p["d1"]))
                h = F.relu(F.conv2d(h, p["c2"], p["d2"]))
                h = F.max_pool2d(h, 2).flatten(1) @ p["w"] + p["b"]
            return F.cross_entropy(h, y)
        step_fn: Callable[..., Any] = torch.compile(loss_fn) if compiled else loss_fn
        opt = torch.optim.Adam(list(params.values()), lr=ADAM["lr"], betas=(ADAM["b1"], ADAM["b2"]), eps=ADAM["eps"])

        def step() -> Any:
            opt.zero_grad(set_to_none=True)
            loss = step_fn(params, x, y)
            loss.backward()
            opt.step()
            return loss.detach().numpy()
        return step
    return build


def _jax_step(kind: str) -> Callable[[dict[str, np.ndarray], str], Step]:
    def build(arrays: dict[str, np.ndarray], device: str) -> Step:
        import jax
        import jax.numpy as jnp

        def ce(logits: Any, y: Any) -> Any:
            lp = jax.nn.log_softmax(logits, axis=-1)
            return -jnp.take_along_axis(lp, y[:, None], axis=1).mean()
        if kind == "ce":
            fn = jax.jit(jax.value_and_grad(ce))
            logits, y = jnp.asarray(arrays["logits"]), jnp.asarray(arrays["y"])

            def run_ce() -> Any:
                loss, g = fn(logits, y)
                g.block_until_ready()
                return np.asarray(loss)
            return run_ce

        def forward(p: dict[str, Any], x: Any) -> Any:
            if kind == "mlp":
                for i in range(3):
                    x = x @ p[f"w{i}"] + p[f"b{i}"]
                    if i < 2:
                        x = jax.nn.relu(x)
                return x
            dn = ("NCHW", "OIHW", "NCHW")
            h = jax.nn.relu(jax.lax.conv_general_dilated(x, p["c1"], (1, 1), "VALID", dimension_numbers=dn)
                            + p["d1"][None, :, None, None])
            h = jax.nn.relu(jax.lax.conv_general_dilated(h, p["c2"], (1, 1), "VALID", dimension_numbers=dn)
                            + p["d2"][None, :, None, None])
            h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
            return h.reshape(h.shape[0], -1) @ p["w"] + p["b"]
        lr, b1, b2, eps = ADAM["lr"], ADAM["b1"], ADAM["b2"], ADAM["eps"]

        @jax.jit
        def step(p: Any, m: Any, v: Any, t: Any, x: Any, y: Any) -> Any:
            loss, g = jax.value_and_grad(lambda p: ce(forward(p, x), y))(p)
            t = t + 1
            m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
            v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
            p = jax.tree_util.tree_map(lambda p, m, v: p - lr * (m / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + eps),
                                       p, m, v)
            return loss, p, m, v, t
        state = {"p": {k: jnp.asarray(arrays[k]) for k in PARAMS[kind]}}
        state["m"] = {k: jnp.zeros_like(a) for k, a in state["p"].items()}
        state["v"] = {k: jnp.zeros_like(a) for k, a in state["p"].items()}
        t = [jnp.float32(0)]
        x, y = jnp.asarray(arrays["x"]), jnp.asarray(arrays["y"])

        def run() -> Any:
            loss, state["p"], state["m"], state["v"], t[0] = step(state["p"], state["m"], state["v"], t[0], x, y)
            return np.asarray(loss)
        return run
    return build


def _tinygrad_step(kind: str) -> Callable[[dict[str, np.ndarray], str], Step]:
    def build(arrays: dict[str, np.ndarray], device: str) -> Step:
        tg, _ = peers.tinygrad()
        from tinygrad import Device, TinyJit
        from tinygrad.helpers import Context
        from tinygrad.nn.optim import Adam

        Tensor = tg.Tensor
        wait = Device[Device.DEFAULT].synchronize
        y = Tensor(arrays["y"]).realize()
        if kind == "ce":
            logits = Tensor(arrays["logits"]).realize()

            @TinyJit
            def loss_and_grad() -> Any:
                loss = logits.sparse_categorical_crossentropy(y)
                (g,) = loss.gradient(logits)
                return loss.realize(), g.realize()

            def run_ce() -> Any:
                loss, _ = loss_and_grad()
                wait()
                return loss.numpy()
            return run_ce
        params = {k: Tensor(arrays[k].copy()).realize() for k in PARAMS[kind]}
        x = Tensor(arrays["x"]).realize()

        def forward(p: dict[str, Any], h: Any) -> Any:
            if kind == "mlp":
                for i in range(3):
                    h = h @ p[f"w{i}"] + p[f"b{i}"]
                    if i < 2:
                        h = h.relu()
                return h
            h = h.conv2d(p["c1"], p["d1"]).relu()
            h = h.conv2d(p["c2"], p["d2"]).relu()
            return h.max_pool2d(2).flatten(1) @ p["w"] + p["b"]
        opt = Adam(list(params.values()), lr=ADAM["lr"], b1=ADAM["b1"], b2=ADAM["b2"], eps=ADAM["eps"])

        @TinyJit
        def step() -> Any:
            with Context(TRAINING=1):   # tinygrad's optimizers step only in training mode
                opt.zero_grad()
                loss = forward(params, x).sparse_categorical_crossentropy(y)
                loss.backward()
                # the loss with the update, in one schedule: realized after opt.step() it would be
                # recomputed from the updated parameters
                Tensor.realize(loss, *opt.schedule_step())
                return loss

        def run() -> Any:
            loss = step()
            wait()
            return loss.numpy()
        return run
    return build


def _frameworks(kind: str) -> dict[str, Callable[[dict[str, np.ndarray], str], Step]]:
    return {"torch": _torch_step(kind, False), "torch.compile": _torch_step(kind, True), "jax": _jax_step(kind),
            "tinygrad": _tinygrad_step(kind), "ug": _ug_ce_step if kind == "ce" else _ug_step(kind)}


TRAININGS = [
    Training("T1", "MLP 784-512-512-10 step, batch 256, Adam", _mlp_arrays, _frameworks("mlp")),
    Training("T2", "conv step: 2 conv3x3+pool+linear, batch 64 of 28x28, Adam", _conv_arrays, _frameworks("conv")),
    Training("T3", "softmax+cross-entropy fwd+bwd 4096x4096", _ce_arrays, _frameworks("ce")),
]


def run_training(devices: list[str], names: list[str] | None, scale: int, repeat: int, torch_compile: bool,
                 timer: Callable[[list[Step], int], list[float]], out: Callable[[str], None] = print,
                 rows: list[Training] | None = None, peer_names: Collection[str] | None = None
                 ) -> list[tuple[str, str, bool]]:
    """Each training row (or `rows`): build every framework's step (of the peers in
    `peer_names`, default all), check its first losses against torch eager's (or its result
    against the row's reference), time those that agree (`timer`: bench's round-robin medians)
    and print a row per implementation (one that disagrees is reported, not timed). Returns the
    (row, implementation, ok) of every implementation that ran."""
    results = []
    for tr in TRAININGS if rows is None else rows:
        if names and tr.name not in names:
            continue
        arrays = tr.make(np.random.default_rng(0), scale)
        impls: list[tuple[str, Callable[[dict[str, np.ndarray], str], Step], str]] = []
        for fw, build in tr.build.items():
            if fw == "ug":
                impls += [(f"ug:{d}", build, d) for d in devices]
            elif peer_names is not None and fw not in peer_names:
                continue
            elif fw != "torch.compile" or torch_compile:
                impls.append((fw, build, "cpu"))
        steps: list[tuple[str, Step, list[float]]] = []
        notes: dict[str, str] = {}
        for impl, build, device in impls:
            try:
                step = build(arrays, device)
                if tr.reference is not None:
                    steps.append((impl, step, [_relative_error(step(), tr.reference(arrays))]))
                else:
                    steps.append((impl, step, [float(np.asarray(step()).reshape(())) for _ in range(3)]))
            except (ImportError, peers.Unavailable, peers.PeerLacks) as e:
                notes[impl] = f"skipped: {e}" if not isinstance(e, ImportError) else f"unavailable: {e}"
            except Exception as e:
                notes[impl] = f"failed: {type(e).__name__}: {str(e)[:80]}"
        if tr.reference is not None:
            ok = {impl: errors[0] <= tr.rtol for impl, _, errors in steps}
        else:
            reference = next((losses for impl, _, losses in steps if impl == "torch"), None)
            ok = {impl: reference is None or bool(np.allclose(losses, reference, rtol=tr.rtol, atol=1e-5))
                  for impl, _, losses in steps}
        agreeing = [(impl, step) for impl, step, _ in steps if ok[impl]]   # a wrong result is not timed
        timed = dict(zip([impl for impl, _ in agreeing], timer([step for _, step in agreeing], repeat) if agreeing else []))
        ran = [(impl, t) for impl, t in timed.items() if not impl.startswith("ug:")]
        best = min(ran, key=lambda p: p[1]) if ran else None
        for impl, _, losses in steps:
            t = timed.get(impl)
            ratio = f"{t / best[1]:.2f}x vs {best[0]}" if impl.startswith("ug:") and best and t is not None else ""
            check = "ok" if ok[impl] else (f"MISMATCH error {losses[0]:.2e}, not timed" if tr.reference is not None
                                           else f"MISMATCH losses {np.round(losses, 5).tolist()}, not timed")
            shown = f"{t * 1e3:10.3f} ms" if t is not None else f"{'-':>13}"
            out(f"| {tr.name:4} | {tr.title[:28]:28} | {impl:14} | {shown} | {'per step':>15} | {ratio:22} | {check}")
            results.append((tr.name, impl, ok[impl]))
        del agreeing, steps
        peers.release()
        for impl, note in notes.items():
            out(f"| {tr.name:4} | {tr.title[:28]:28} | {impl:14} | {'-':>13} | {'':>15} | {'':22} | {note}")
            if impl.startswith("ug:"):
                results.append((tr.name, impl, False))
    return results


def _relative_error(got: Any, want: np.ndarray) -> float:
    """max |got - want| / max |want| (inf where the shapes differ)."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return math.inf
    return float(np.max(np.abs(got.astype(want.dtype) - want)) / max(float(np.max(np.abs(want))), 1e-30))
