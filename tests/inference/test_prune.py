"""Pruning and distillation on small random generators, and the lite model as a style of its own."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from inference.engine import load_stylizer
from inference.generator import Generator, GeneratorWidths
from inference.prune import Budget, Recipe, distill, distill_loss, parameter_count, prune, random_crops, save_lite
from weights.store import ModelStore

pytestmark = pytest.mark.slow  # every test here distils a lite generator

SMALL = GeneratorWidths(a=(16, 32, 32), b=(64, 64), c_in=64, res=64, hidden=(64, 128, 128, 128), c_out=64, d=(64, 64),
                        e=(32, 32, 16))


@pytest.fixture
def teacher() -> Generator:
    torch.manual_seed(0)
    return Generator(SMALL, upsample="asymmetric").eval()


def test_pruning_keeps_the_class_and_lowers_the_parameter_count(teacher: Generator) -> None:
    x = torch.rand(1, 3, 32, 40) * 2 - 1
    with torch.no_grad():
        assert torch.equal(prune(teacher, 1.0)(x), teacher(x))  # nothing removed: the same network
    small = prune(teacher, 0.5)
    assert type(small) is Generator and small.upsample == "asymmetric"
    assert small.widths.e == (16, 16, 8) and small.widths.res == SMALL.res  # skips keep their width
    assert parameter_count(small) < 0.5 * parameter_count(teacher)
    with torch.no_grad():
        assert small(x).shape == x.shape


def test_distillation_lowers_the_loss_on_held_out_crops(teacher: Generator) -> None:
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:96, 0:128]
    photos = [np.stack([(x * k) % 256, (y * 2) % 256, (x + y * k) % 256], 2).astype(np.uint8) for k in (1, 2, 3)]
    student = prune(teacher, 0.5)
    history = distill(student, teacher, photos, Budget(max_steps=6), Recipe(crop=32, batch=4, lr=1e-3, eval_every=3))
    assert [p.step for p in history] == [0, 3, 6]  # a step budget, not a time: the same on any machine
    assert history[-1].held_out_loss < 0.8 * history[0].held_out_loss
    crops = random_crops(photos, 2, 32, rng)
    with torch.no_grad():
        assert float(distill_loss(teacher(crops), teacher(crops))) == 0.0


def test_distillation_resumes_from_its_checkpoint(teacher: Generator, tmp_path) -> None:  # type: ignore[no-untyped-def]
    photos = [np.full((64, 64, 3), v, np.uint8) for v in (40, 200)]
    ckpt = tmp_path / "lite.pt"
    first = distill(prune(teacher, 0.5), teacher, photos, Budget(max_steps=2), Recipe(crop=32, batch=2, eval_every=1),
                    checkpoint=ckpt)
    again = distill(prune(teacher, 0.5), teacher, photos, Budget(max_steps=2), Recipe(crop=32, batch=2, eval_every=1),
                    checkpoint=ckpt)
    assert first[-1].step == 2 and again[0].step == 2 and again[-1].step == 4  # the budget counts from the resume
    assert again[0].held_out_loss == pytest.approx(first[-1].held_out_loss)  # the trained student, not a fresh one
    assert again[-1].seconds > first[-1].seconds  # training time adds up over sessions


def test_distillation_refuses_to_run_without_a_budget(teacher: Generator) -> None:
    photos = [np.full((64, 64, 3), 90, np.uint8)]
    with pytest.raises(ValueError, match="needs a budget"):
        distill(prune(teacher, 0.5), teacher, photos, Budget(), Recipe(crop=32, batch=2))


def test_the_lite_model_is_a_style_of_its_own(teacher: Generator, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = ModelStore(tmp_path)
    base = store.entry("hayao")
    student = prune(teacher, 0.5)
    save_lite(store, base, "hayao-lite", student, 0.5)
    again = ModelStore(tmp_path)  # a fresh process sees it through the local registry
    entry = again.entry("hayao-lite")
    assert again.is_installed(entry) and entry.widths == student.widths.to_dict() and entry.upsample == "asymmetric"
    x = np.random.default_rng(1).uniform(-1, 1, (24, 32, 3)).astype(np.float32)
    with torch.no_grad():
        expected = student(torch.from_numpy(x).permute(2, 0, 1)[None])[0].permute(1, 2, 0).numpy()
    for backend in ("eager", "onnxruntime"):
        lite = load_stylizer(again, "hayao-lite", backend)
        assert np.abs(lite(x) - expected).max() < 1e-4
    default = load_stylizer(again, "hayao-lite")  # OpenVINO: bfloat16 where the CPU has it
    assert default.backend == "openvino" and np.abs(default(x) - expected).max() < 0.05
    with pytest.raises(Exception, match="published model's name"):
        save_lite(store, base, "hayao", student, 0.5)
