"""proxy/storing.py: which failures stop a run of turns, and under which part."""

from collections.abc import Iterator

from memory import MemoryLayer, Settings, StoreUnavailable, Turn
from proxy.storing import HALTED, store_run


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


def test_a_stop_out_of_time_cuts_a_run_between_two_turns(tmp_path, embedder):
    """A stop past `server.shutdown_timeout` waited for the whole run (a backlog's replay:
    thousands of turns); now for the turn being stored, and the run says it was cut short."""
    layer = MemoryLayer(Settings(db_path=tmp_path / "moim.db"), embedder_factory=lambda _: embedder)
    turns = [turn(f"Parcel {k} went to Porto.") for k in range(5)]
    taken: list[Turn] = []

    def journal() -> Iterator[Turn]:
        for item in turns:
            taken.append(item)
            yield item

    stored = store_run(layer, journal(), halted=lambda: len(taken) == 2)
    assert len(stored.marks) == 2 and stored.error is None
    assert stored.part == HALTED
    said = [m.content for m in layer.turns("ana", "s1") if m.role == "user"]
    assert said == ["Parcel 0 went to Porto.", "Parcel 1 went to Porto."]
    layer.close()
