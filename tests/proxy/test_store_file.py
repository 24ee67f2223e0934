"""The database file the writer watches (proxy/store_file.py): the file the store opened,
named by its absolute path, so changing directory later does not make it look removed."""

import os

from memory import MemoryLayer, Settings
from proxy.store_file import StoreFile


def test_a_relative_path_is_watched_after_the_process_changes_directory(
    tmp_path, embedder, monkeypatch
):
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path / "data")
    layer = MemoryLayer(Settings(db_path="moim.db"), embedder_factory=lambda _: embedder)
    watched = StoreFile(layer)
    assert watched.problem() is None

    monkeypatch.chdir(tmp_path)  # no moim.db here: a relative watch would report it removed
    assert watched.problem() is None

    os.unlink(tmp_path / "data" / "moim.db")
    assert isinstance(watched.problem(), FileNotFoundError)
