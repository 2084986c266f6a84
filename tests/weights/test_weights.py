"""The model registry, import by hash, and verified downloads over real HTTP."""
from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from weights.download import download
from weights.hashing import file_digests
from weights.registry import ModelEntry, builtin_entries
from weights.store import ModelStore, WeightsError
from testkit.file_server import serving
from testkit.models import HAYAO_FILE


def test_registry_lists_every_required_model_with_provenance() -> None:
    entries = {e.name: e for e in builtin_entries()}
    for name in ("hayao", "face_paint_512_v2", "face_paint_512_v1", "celeba_distill", "paprika", "cute"):
        e = entries[name]
        assert e.kind == "style" and e.url and e.url.startswith("https://")
        assert e.git_sha1 and len(e.git_sha1) == 40
        assert "non-commercial" in e.license
        assert e.train_size in (256, 512)
    assert entries["hayao"].format == "tflite" and entries["hayao"].sha256
    assert entries["cute"].arch == "animeganv3" and entries["cute"].format == "onnx"
    assert {entries[n].format for n in ("face_paint_512_v2", "paprika")} == {"pytorch"}


def test_git_blob_sha1_matches_git_hash_object(tmp_path: Path) -> None:
    f = tmp_path / "x.bin"
    f.write_bytes(b"hello\n")
    # `git hash-object` of "hello\n" is a well-known constant.
    assert file_digests(f) == (hashlib.sha256(b"hello\n").hexdigest(), "ce013625030ba8dba906f756967f9e9ca394464a")


def test_import_recognises_a_shared_model_by_its_hash(tmp_path: Path) -> None:
    if not HAYAO_FILE.is_file():
        pytest.skip("real model file is absent (../shared/models)")
    store = ModelStore(tmp_path)
    renamed = tmp_path / "whatever-name.bin"
    renamed.write_bytes(HAYAO_FILE.read_bytes())
    assert store.import_file(renamed).name == "hayao"
    assert [e.name for e in store.installed()] == ["hayao"]
    assert store.path(store.entry("hayao")).read_bytes() == HAYAO_FILE.read_bytes()


def test_import_refuses_an_unknown_file_and_installs_nothing(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "home")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(os.urandom(1000))
    with pytest.raises(WeightsError, match="not a known model"):
        store.import_file(junk)
    assert store.installed() == []


def test_missing_model_error_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match="animebot weights download hayao"):
        ModelStore(tmp_path).require("hayao")


def test_import_a_folder_installs_the_models_in_it_and_names_the_rest(tmp_path: Path, hayao_file: Path) -> None:
    folder = tmp_path / "downloads"
    (folder / "deeper").mkdir(parents=True)
    (folder / "renamed.bin").write_bytes(hayao_file.read_bytes())
    (folder / "notes.txt").write_text("not a model")
    (folder / "deeper" / "hayao.tflite").write_bytes(hayao_file.read_bytes())  # subfolders are not searched
    store = ModelStore(tmp_path / "home")
    installed, unknown = store.import_folder(folder)
    assert [(p.name, e.name) for p, e in installed] == [("renamed.bin", "hayao")]
    assert unknown == [folder / "notes.txt"]
    assert store.path(store.entry("hayao")).read_bytes() == hayao_file.read_bytes()


def test_a_style_that_is_not_installed_is_named_with_the_installed_ones(tmp_path: Path, hayao_file: Path) -> None:
    store = ModelStore(tmp_path)
    store.import_file(hayao_file)
    assert store.require_style("hayao")[0].name == "hayao"
    for name in ("nope", "det_500m"):  # a typo, and a model that is no style
        with pytest.raises(WeightsError) as caught:
            store.require_style(name)
        assert "installed styles: hayao " in caught.value.message and "paprika" not in caught.value.message
    with pytest.raises(WeightsError, match="animebot weights download paprika"):
        store.require_style("paprika")  # a published style, not downloaded


# --- downloads, against a real HTTP server on 127.0.0.1 ---------------------------

PAYLOAD = os.urandom(300_000)


def _flip(data: bytes) -> bytes:
    mid = len(data) // 2
    return data[:mid] + bytes([data[mid] ^ 0x01]) + data[mid + 1 :]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serving({"/good.bin": PAYLOAD, "/flipped.bin": _flip(PAYLOAD), "/cut.bin": PAYLOAD},
                 cut=frozenset({"/cut.bin"})) as url:  # /cut.bin promises everything, sends half, hangs up
        yield url


@pytest.fixture
def entry() -> ModelEntry:
    base = next(e for e in builtin_entries() if e.name == "hayao")
    sha = hashlib.sha256(PAYLOAD).hexdigest()
    blob = hashlib.sha1(f"blob {len(PAYLOAD)}\0".encode() + PAYLOAD).hexdigest()
    return replace(base, name="testmodel", filename="testmodel.bin", sha256=sha, git_sha1=blob, size=len(PAYLOAD))


def _leftovers(store: ModelStore) -> list[str]:
    return sorted(p.name for p in store.models_dir.iterdir()) if store.models_dir.exists() else []


def test_a_good_download_installs(server: str, entry: ModelEntry, tmp_path: Path) -> None:
    e = replace(entry, url=f"{server}/good.bin")
    store = ModelStore(tmp_path, entries=(e,))
    path = download(store, e)
    assert path.read_bytes() == PAYLOAD
    assert store.is_installed(e) and _leftovers(store) == ["testmodel.bin"]


@pytest.mark.parametrize(
    ("path", "reason"),
    [("/flipped.bin", "checksum mismatch"), ("/cut.bin", "download failed"), ("/missing.bin", "HTTP 404")],
)
def test_a_bad_download_fails_and_leaves_nothing(
    server: str, entry: ModelEntry, tmp_path: Path, path: str, reason: str
) -> None:
    e = replace(entry, url=f"{server}{path}")
    store = ModelStore(tmp_path, entries=(e,))
    with pytest.raises(WeightsError, match=reason):
        download(store, e)
    assert not store.is_installed(e)
    assert _leftovers(store) == []


def test_a_failed_download_keeps_the_installed_copy(server: str, entry: ModelEntry, tmp_path: Path) -> None:
    good = replace(entry, url=f"{server}/good.bin")
    store = ModelStore(tmp_path, entries=(good,))
    download(store, good)
    with pytest.raises(WeightsError):
        download(store, replace(good, url=f"{server}/flipped.bin"))
    assert store.path(good).read_bytes() == PAYLOAD
