"""Models a deployment needs are installed at start: from models baked into the image, verified."""
from __future__ import annotations

from pathlib import Path

import pytest

from testkit.models import DET_FILE
from weights.provision import provision
from weights.store import ModelStore, WeightsError


def test_missing_models_are_copied_from_the_baked_folder_once(tmp_path: Path) -> None:
    if not DET_FILE.is_file():
        pytest.skip(f"{DET_FILE} is absent: the real detector model is needed")
    store = ModelStore(tmp_path / "home")
    done = provision(store, ("det_500m",), baked=DET_FILE.parent)
    assert done == [f"det_500m: installed from {DET_FILE}"]
    assert store.is_installed(store.entry("det_500m"))
    assert provision(store, ("det_500m",), baked=DET_FILE.parent) == []  # already there: nothing to do


def test_an_unknown_model_name_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match="unknown model 'nope'; known models: "):
        provision(ModelStore(tmp_path / "home"), ("nope",))


def test_a_baked_file_with_the_wrong_bytes_is_not_taken_for_the_model(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Its name says det_500m, its hash does not: the model is downloaded instead (the network is
    replaced by a recorder here)."""
    baked = tmp_path / "baked"
    baked.mkdir()
    (baked / "det_500m.onnx").write_bytes(b"not the detector")
    fetched: list[str] = []
    monkeypatch.setattr("weights.provision.download", lambda store, entry: fetched.append(entry.name))
    store = ModelStore(tmp_path / "home")
    assert provision(store, ("det_500m",), baked=baked) == ["det_500m: downloaded and verified"]
    assert fetched == ["det_500m"]
    assert not store.is_installed(store.entry("det_500m"))


def test_a_model_that_cannot_be_downloaded_is_a_warning_and_the_rest_are_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Offline, the image's default list (ANIMEBOT_WEIGHTS) must not stop a start: the sample photo, say,
    is left out with a warning that says how to install it, and the models at hand are installed."""
    if not DET_FILE.is_file():
        pytest.skip(f"{DET_FILE} is absent: the real detector model is needed")

    def offline(store: ModelStore, entry: object) -> None:
        raise WeightsError("sample: download failed (ConnectError: [Errno -3] Temporary failure in name resolution)",
                           code="network")

    monkeypatch.setattr("weights.provision.download", offline)
    store = ModelStore(tmp_path / "home")
    with caplog.at_level("WARNING", logger="animebot.weights"):
        done = provision(store, ("sample", "det_500m"), baked=DET_FILE.parent)
    assert done[1] == f"det_500m: installed from {DET_FILE}"
    assert done[0].startswith("sample: download failed (ConnectError")
    assert "; starting without it (" in done[0] and "animebot weights import" in done[0]
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [done[0]]
    assert store.is_installed(store.entry("det_500m"))
