"""Structured pruning of the generator, and distillation back towards the original.

Pruning keeps, for every convolution whose width may shrink, the output
channels with the largest filter norm times the magnitude of their
normalisation scale, and slices the next layer's inputs to match. The
result is the same :class:`Generator` class with smaller widths, so it
loads, exports and runs like any style. The four inverted residual
blocks keep their shared ``res`` width: their skip connections add it.

Pruning alone damages the picture (one-group GroupNorm normalises across
channels, so every removed channel shifts the others), so the pruned
"student" is then trained to reproduce the unpruned "teacher" on random
photo crops: L1 on pixels plus a colour-statistics term, because L1 alone
lets reds and magentas drift to brown while the mean error stays small.
"""
from __future__ import annotations

import io
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

import numpy as np
import torch
from torch import nn

from storage.files import replacing
from inference.generator import Generator, GeneratorWidths

if TYPE_CHECKING:
    from weights.registry import ModelEntry
    from weights.store import ModelStore

Layer = tuple[nn.Conv2d, "nn.GroupNorm | None"]
_Widths = TypeVar("_Widths", bound=tuple[int, ...])


def _scaled(n: int, ratio: float) -> int:
    """``n * ratio`` rounded to a multiple of 8 (what CPU kernels vectorise over), at least 8."""
    return max(8, int(round(n * ratio / 8)) * 8)


def pruned_widths(w: GeneratorWidths, ratio: float) -> GeneratorWidths:
    def s(values: _Widths) -> _Widths:  # same length out as in
        return cast(_Widths, tuple(_scaled(v, ratio) for v in values))

    return replace(w, a=s(w.a), b=s(w.b), c_in=_scaled(w.c_in, ratio), hidden=s(w.hidden),
                   c_out=_scaled(w.c_out, ratio), d=s(w.d), e=s(w.e))


def _layers(net: Generator) -> list[Layer]:
    """Every convolution in data order, with the norm that follows it."""
    def cnl(m: nn.Module) -> Layer:
        return m[1], m[2]  # type: ignore[index, return-value]

    out = [cnl(m) for m in (*net.block_a, *net.block_b)]
    c = list(net.block_c)
    out.append(cnl(c[0]))
    for block in c[1:-1]:
        expand, depthwise, project, norm = block.layers  # type: ignore[attr-defined, misc]  # an InvertedResBlock
        out += [cnl(expand), cnl(depthwise), (project, norm)]
    out.append(cnl(c[-1]))
    out += [cnl(m) for m in (*net.block_d, *net.block_e)]
    out.append((net.out_layer[0], None))  # type: ignore[arg-type]
    return out


def prune(net: Generator, ratio: float) -> Generator:
    """A copy of ``net`` with every prunable width scaled by ``ratio`` (1.0 copies it exactly)."""
    small = Generator(pruned_widths(net.widths, ratio), net.upsample, net.block_a[0][2].eps).eval()  # type: ignore[index]  # nn.Sequential items are typed Module; this one is a ConvNormLReLU
    keep = torch.arange(3)
    with torch.no_grad():
        for (bc, bn), (sc, sn) in zip(_layers(net), _layers(small)):
            if bc.groups > 1:  # depthwise: channels pass straight through
                out = keep
                sc.weight.copy_(bc.weight[out])
            else:
                w = bc.weight[:, keep]
                if sc.out_channels == bc.out_channels:
                    out = torch.arange(bc.out_channels)
                else:
                    score = w.abs().sum(dim=(1, 2, 3)) * (bn.weight.abs() if bn is not None else 1)
                    out = torch.sort(torch.topk(score, sc.out_channels).indices).values
                sc.weight.copy_(w[out])
            if bc.bias is not None:
                assert sc.bias is not None  # same architecture, so it has a bias where the original has one
                sc.bias.copy_(bc.bias[out])
            if bn is not None and sn is not None:
                sn.weight.copy_(bn.weight[out])
                sn.bias.copy_(bn.bias[out])
            keep = out
    return small


def parameter_count(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())


# --- distillation ---------------------------------------------------------------------


def random_crops(photos: Sequence[np.ndarray], n: int, size: int, rng: np.random.Generator) -> torch.Tensor:
    """``n`` random square crops (with random flips) as an NCHW batch in [-1, 1]."""
    crops = []
    for _ in range(n):
        img = photos[int(rng.integers(len(photos)))]
        h, w = img.shape[:2]
        y, x = rng.integers(0, h - size + 1), rng.integers(0, w - size + 1)
        crop = img[y:y + size, x:x + size]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        crops.append(np.ascontiguousarray(crop))
    return torch.from_numpy(np.stack(crops)).permute(0, 3, 1, 2).float() / 127.5 - 1


def distill_loss(student_out: torch.Tensor, teacher_out: torch.Tensor, colour_weight: float = 1.0) -> torch.Tensor:
    """Pixel L1 plus the L1 between each image's per-channel mean and spread."""
    l1 = (student_out - teacher_out).abs().mean()
    dims = (2, 3)
    stats = (student_out.mean(dims) - teacher_out.mean(dims)).abs().mean() + \
        (student_out.std(dims) - teacher_out.std(dims)).abs().mean()
    return l1 + colour_weight * stats


@dataclass
class Progress:
    step: int
    seconds: float
    train_loss: float
    held_out_loss: float


@dataclass(frozen=True)
class Budget:
    """How much more training a session may do: ``seconds`` of wall-clock time, ``max_steps`` steps, or
    whichever ends first. A user budgets time (``animebot prune --minutes``); a test budgets steps, so
    that what it checks does not depend on how busy the machine is."""

    seconds: float = math.inf
    max_steps: int | None = None

    def __post_init__(self) -> None:
        if self.seconds == math.inf and self.max_steps is None:
            raise ValueError("distill needs a budget: seconds, max_steps or both")


@dataclass(frozen=True)
class Recipe:
    """How the student is trained: square crops of ``crop`` px, ``batch`` of them a step, Adam at ``lr``,
    measured on the held-out crops every ``eval_every`` steps, the crops drawn from ``seed``."""

    crop: int = 256
    batch: int = 8
    lr: float = 2e-4
    eval_every: int = 50
    seed: int = 0


def distill(student: Generator, teacher: Generator, photos: Sequence[np.ndarray], budget: Budget,
            recipe: Recipe = Recipe(), device: str = "cpu", checkpoint: Path | None = None,
            on_progress: Callable[[Progress], None] | None = None) -> list[Progress]:
    """Train ``student`` to match ``teacher`` within ``budget`` (resuming from ``checkpoint``).

    The last photo is held out: its fixed crops measure progress, so the reported loss is on pixels the
    student never trained on.
    """
    crop, batch, seed = recipe.crop, recipe.batch, recipe.seed
    seconds, max_steps = budget.seconds, budget.max_steps
    train, held = (photos[:-1], photos[-1:]) if len(photos) > 1 else (photos, photos)
    rng = np.random.default_rng(seed)
    held_x = random_crops(held, batch, crop, np.random.default_rng(seed + 1)).to(device)
    teacher = teacher.to(device).eval()
    student = student.to(device).train()
    opt = torch.optim.Adam(student.parameters(), lr=recipe.lr)
    done_s, step = 0.0, 0
    if checkpoint is not None and checkpoint.is_file():
        state = torch.load(checkpoint, map_location=device, weights_only=True)
        student.load_state_dict(state["student"])
        opt.load_state_dict(state["optimizer"])
        done_s, step = float(state["seconds"]), int(state["step"])
    with torch.no_grad():
        held_t = teacher(held_x)

    def held_out() -> float:
        student.eval()
        with torch.no_grad():
            value = float(distill_loss(student(held_x), held_t))
        student.train()
        return value

    history = [Progress(step, done_s, float("nan"), held_out())]
    session = time.monotonic()

    def elapsed() -> float:  # training time over every session, for the quality curve
        return done_s + time.monotonic() - session

    first_step = step

    def budget_left() -> bool:
        if max_steps is not None and step - first_step >= max_steps:
            return False
        return time.monotonic() - session < seconds

    while budget_left():
        x = random_crops(train, batch, crop, rng).to(device)
        with torch.no_grad():
            target = teacher(x)
        loss = distill_loss(student(x), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % recipe.eval_every == 0:
            history.append(Progress(step, elapsed(), float(loss.detach()), held_out()))
            if on_progress:
                on_progress(history[-1])
            if checkpoint is not None:
                _save_checkpoint(checkpoint, student, opt, elapsed(), step)
    if history[-1].step != step:
        history.append(Progress(step, elapsed(), float("nan"), held_out()))
    if checkpoint is not None:
        _save_checkpoint(checkpoint, student, opt, elapsed(), step)
    student.eval().cpu()
    return history


def _save_checkpoint(path: Path, student: Generator, opt: torch.optim.Optimizer, seconds: float, step: int) -> None:
    with replacing(path, ".pt") as tmp:
        torch.save({"student": student.state_dict(), "optimizer": opt.state_dict(), "seconds": seconds,
                    "step": step}, tmp)


def save_lite(store: "ModelStore", base: "ModelEntry", name: str, student: Generator, ratio: float) -> "ModelEntry":
    """Install ``student`` as a style of its own (``name``) in the data dir's local registry."""
    buf = io.BytesIO()
    torch.save(student.state_dict(), buf)
    return store.add_derived(base, name, f"lite ({ratio:.2f} width)", "pytorch", buf.getvalue(),
                             widths=student.widths.to_dict(), upsample=student.upsample,
                             eps=student.block_a[0][2].eps)  # type: ignore[index]  # nn.Sequential items are typed Module; this one is a ConvNormLReLU
