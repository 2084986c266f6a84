"""HD's model: Real-CUGAN 2x is two published files (ncnn's .param and .bin), installed, verified and
provisioned together, over real HTTP, like every model."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bot.styles import Styles
from inference.pipeline import ConvertSettings
from weights.download import download
from weights.provision import provision
from weights.registry import builtin_entries
from weights.store import ModelStore, WeightsError
from testkit.file_server import serving
from testkit.models import CUGAN_BIN, CUGAN_PARAM, HAYAO_FILE, MODELS


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    """What the server serves: the two real files, and the weights with one bit flipped."""
    for path in (CUGAN_PARAM, CUGAN_BIN):
        if not path.is_file():
            pytest.skip(f"real model file {path} is absent (it lives in ../shared/models on CI)")
    weights = CUGAN_BIN.read_bytes()
    mid = len(weights) // 2
    return {"/up2x.param": CUGAN_PARAM.read_bytes(), "/up2x.bin": weights,
            "/flipped.bin": weights[:mid] + bytes([weights[mid] ^ 0x10]) + weights[mid + 1:]}


@pytest.fixture(scope="module")
def server(files: dict[str, bytes]) -> Iterator[str]:
    with serving(files) as url:
        yield url


def _store(home: Path, server: str, weights_path: str = "/up2x.bin") -> ModelStore:
    """A data dir whose registry has the published Real-CUGAN entries, their URLs on ``server``."""
    published = {e.name: e for e in builtin_entries()}
    return ModelStore(home, entries=(replace(published["realcugan_up2x"], url=f"{server}{weights_path}"),
                                     replace(published["realcugan_param"], url=f"{server}/up2x.param")))


def test_hd_downloads_with_its_network_file(server: str, tmp_path: Path) -> None:
    store = _store(tmp_path, server)
    hd = store.entry("realcugan_up2x")
    assert hd.kind == "upscaler" and hd.license.startswith("MIT") and hd.url and hd.url.endswith(".bin")
    assert [e.name for e in store.with_parts("realcugan_up2x")] == ["realcugan_up2x", "realcugan_param"]
    for entry in store.with_parts("realcugan_up2x"):  # what `animebot weights download realcugan_up2x` does
        download(store, entry)
    assert store.is_installed(hd)
    assert store.path(hd).read_bytes() == CUGAN_BIN.read_bytes()
    assert store.path(store.entry("realcugan_param")).read_bytes() == CUGAN_PARAM.read_bytes()


def test_corrupted_weights_are_refused_in_one_sentence_and_nothing_is_installed(server: str, tmp_path: Path,
                                                                               files: dict[str, bytes]) -> None:
    store = _store(tmp_path / "home", server, "/flipped.bin")
    with pytest.raises(WeightsError) as caught:
        download(store, store.entry("realcugan_up2x"))
    message = caught.value.message
    assert message.startswith("realcugan_up2x: checksum mismatch") and message.endswith("file discarded")
    assert "\n" not in message and message.count(". ") == 0
    assert not store.is_installed(store.entry("realcugan_up2x"))
    assert sorted(p.name for p in store.models_dir.iterdir()) == []
    flipped = tmp_path / "flipped.bin"
    flipped.write_bytes(files["/flipped.bin"])
    with pytest.raises(WeightsError, match=r"^flipped.bin: not a known model"):  # `weights import` refuses it too
        store.import_file(flipped)


def test_hd_without_its_network_file_is_not_installed_and_says_how(server: str, tmp_path: Path) -> None:
    store = _store(tmp_path, server)
    assert store.import_file(CUGAN_BIN).name == "realcugan_up2x"
    assert not store.is_installed(store.entry("realcugan_up2x"))
    with pytest.raises(WeightsError, match="run: animebot weights download realcugan_up2x$"):
        store.require("realcugan_up2x")


def test_provisioning_hd_installs_both_files_offline(tmp_path: Path, files: dict[str, bytes]) -> None:
    store = ModelStore(tmp_path)
    done = provision(store, ("realcugan_up2x",), baked=MODELS)
    assert [line.split(":")[0] for line in done] == ["realcugan_up2x", "realcugan_param"]
    assert store.is_installed(store.entry("realcugan_up2x"))


def test_about_credits_hd_once_and_not_its_network_file(tmp_path: Path, files: dict[str, bytes]) -> None:
    if not HAYAO_FILE.is_file():
        pytest.skip(f"real model file {HAYAO_FILE} is absent (it lives in ../shared/models on CI)")
    store = ModelStore(tmp_path)
    for path in (HAYAO_FILE, CUGAN_PARAM, CUGAN_BIN):
        store.import_file(path)
    credited = [e.name for e in Styles.from_store(store, None, ConvertSettings()).others]
    assert credited == ["realcugan_up2x"]  # /about's list of the other installed models
