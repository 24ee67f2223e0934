"""proxy/storing.py: which failures stop a run of turns, and under which part."""

from collections.abc import Iterator

from memory import MemoryLayer, Settings, StoreUnavailable, Turn
from proxy.storing import store_run


def turn(text: str) -> Turn:
    return Turn(
        user_id="ana",
        session_id="s1",
        model="gpt-4o-mini",
        messages=({"role": "user", "content": text},),
        reply={"role": "assistant", "content": "noted"},
        created_at=1_700_000_000.0,
    )


def test_the_store_failing_under_a_journal_being_read_stops_the_run_as_the_store(
    tmp_path, embedder
):
    """A replica's journal reads its rows from PostgreSQL after its file: with the database
    down that raised out of the writer's loop, which crashed ("task" failing) instead of
    waiting for the store."""
    layer = MemoryLayer(Settings(db_path=tmp_path / "moim.db"), embedder_factory=lambda _: embedder)

    def journal() -> Iterator[Turn]:
        yield turn("The kayak is at berth 14.")
        raise StoreUnavailable("postgresql://…: unreachable")

    stored = store_run(layer, journal())
    assert len(stored.marks) == 1  # the turn before the failure is stored
    assert stored.part == "store" and isinstance(stored.error, StoreUnavailable)
    assert [m.content for m in layer.turns("ana", "s1")] == [
        "The kayak is at berth 14.",
        "noted",
    ]
    layer.close()


def test_an_os_error_reading_the_journal_is_the_journal_s():
    def journal() -> Iterator[Turn]:
        raise OSError(5, "Input/output error")
        yield  # a generator

    stored = store_run(None, journal())  # type: ignore[arg-type]
    assert stored.marks == [] and stored.part == "journal"
