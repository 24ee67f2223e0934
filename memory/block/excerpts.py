"""Step 4b, cut to size: turn ranked hits into at most N excerpts of at most M characters.

An excerpt is a passage of one earlier session. Hits from the same session are gathered into
that session's excerpt (best first, while they fit), then shown in the order they were said,
one line per turn, led by its speaker (a turn's own line breaks become spaces). A hit that no
longer fits its session's excerpt starts another excerpt of the same session while the tier
has excerpts left: the best session often holds more relevant turns than 600 characters, and
they are worth more than a lower session's best turn (LoCoMo, bench/tune_recall.py: hit
+2.8 points, all +3.1 on the tuning conversations). Conversational
turns are short — LoCoMo's average ~140 characters — so one 600-character excerpt can carry
several relevant turns, which is what lets a 5 × 600 block hold more evidence than five
single chunks (bench/locomo.py measures it). Only a passage's first turn is ever cut to fit;
a later hit that does not fit whole is skipped for a shorter one, since a cut turn spends the
room and may lose the part that mattered.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from memory.block.budget import cut_excerpt
from memory.block.order import ONE_CONVERSATION, asked_before_answered, newer_turn
from memory.block.shown import keep_said_once, said_by_another
from memory.facts.corrections import replaced_by
from memory.ingest.speakers import split_speaker
from memory.records import Chunk, Excerpt, Hit, Message, Tier

# The turns around each of these chunks' messages in their sessions, oldest first (the
# message included), by message id: read at once for every passage.
Neighbours = Callable[[Sequence[Chunk]], Mapping[int, Sequence[Message]]]
# Whether the request shows a turn's words already (`memory.block.shown.RequestWords.shows`).
Shown = Callable[[str], bool]

_ELLIPSIS = "…"


@dataclass(slots=True)
class _Passage:
    session_id: str
    # (time, message id, chunk id, text): sorted, the order things were said
    lines: list[tuple[float, int, int, str]] = field(default_factory=list)
    messages: set[int] = field(default_factory=set)
    best: Chunk | None = None
    similarity: float | None = None
    used: int = 0

    def room(self) -> int:
        return self.max_chars - self.used - (1 if self.lines else 0)

    max_chars: int = 0

    def add(self, created_at: float, message_id: int, chunk_id: int, line: str) -> None:
        self.used += len(line) + (1 if self.lines else 0)
        self.lines.append((created_at, message_id, chunk_id, line))
        self.messages.add(message_id)

    def drop(self, message_ids: Collection[int]) -> None:
        """Take out the lines of these messages (`_answered_again`)."""
        self.keep([line for line in self.lines if line[1] not in message_ids])

    def keep(self, lines: list[tuple[float, int, int, str]]) -> None:
        """Keep only `lines` (some of the passage's)."""
        if len(lines) < len(self.lines):
            self.lines = lines
            self.messages = {line[1] for line in lines}
            self.used = sum(len(line[3]) for line in lines) + max(len(lines) - 1, 0)


def build_excerpts(
    hits: Sequence[Hit],
    tier: Tier,
    terms: Sequence[str],
    session_id: str,
    neighbours: Neighbours | None = None,
    shown: Shown | None = None,
    repeated: set[int] | None = None,
    present: bool = False,
) -> list[Excerpt]:
    """Excerpts for the block, best session first, within the tier.

    A session's hits go to its first excerpt they fit in whole; one that fits none starts
    another excerpt of that session (its first turn may be cut) while the tier allows. A
    reply cut to fit, to a turn already shown, starts one only after every other hit
    (`_Packing._waits`); a kept user turn a better-ranked reply answers is packed just before
    that reply (`memory.block.order.asked_before_answered`). For a question about the user's
    present (`present`), a newer conversation's user turn opens an excerpt before a hit that
    would open a second one of its conversation (`memory.block.order.newer_turn`).

    Room left in a passage after its hits is filled with the turns around its best hit
    (nearest first), when `neighbours` is given: an answer usually sits next to its question.

    A turn whose words the request shows already (`shown`), or another line of its passage by
    the same speaker says, is left out (`memory.block.shown`); its chunk id goes in `repeated`.
    """
    if tier.max_excerpts <= 0 or tier.max_chars <= 0:
        return []
    order = asked_before_answered(hits)
    packing = _Packing(tier, terms, neighbours is not None, shown, set(), order if present else [])
    held: list[Hit] = []  # replies that wait for the room the other hits leave
    for at, hit in enumerate(order):
        packing.at = at
        packing.add(hit, held)
    for hit in held:
        packing.add(hit, None)
    passages = packing.passages
    if neighbours is not None and passages:
        around = neighbours([p.best for p in passages if p.best is not None])
        again = _answered_again(around.values())
        packing.repeated.update(keep_said_once(passages))  # its room is widened into
        for passage in passages:
            passage.drop(again)
            packing.taken[passage.session_id].update(again)  # never shown, as if taken
            _widen(passage, around, packing.taken[passage.session_id], packing.shown_already)
    packing.repeated.update(keep_said_once(passages))
    passages = [p for p in passages if p.lines]
    if repeated is not None:
        repeated.update(packing.repeated)
    return [_excerpt(p, session_id, rank) for rank, p in enumerate(passages)]


def _answered_again(runs: Iterable[Sequence[Message]]) -> set[int]:
    """Ids of the replies broken off (stored partial: the client left, or the provider broke
    off) that the next turn of their session answers again: the request was retried (by the
    app, or the user asking again) and answered whole. The whole answer is the one recalled;
    the part before it would be a second, cut-off answer to the same question. `runs`: turns
    of a session in the order said, each next to the one after it (`Neighbours`)."""
    return {
        turn.id
        for run in runs
        for turn, after in zip(run, run[1:], strict=False)
        if turn.partial and turn.role == "assistant" and after.role == "assistant"
    }


@dataclass(slots=True)
class _Packing:
    """The passages being packed, and which turns they hold."""

    tier: Tier
    terms: Sequence[str]
    widening: bool
    shown_already: Shown | None
    repeated: set[int]  # chunk ids of hits left out for repeating (`memory.block.shown`)
    order: Sequence[Hit]  # the hits in packing order, for a question about the present; or []
    at: int = 0  # the place in `order` of the hit being packed
    passages: list[_Passage] = field(default_factory=list)
    by_session: dict[str, list[_Passage]] = field(default_factory=dict)
    taken: dict[str, set[int]] = field(default_factory=dict)  # message ids, by session
    shown: set[tuple[str, int]] = field(default_factory=set)  # (session, turn) of hits placed

    def add(self, hit: Hit, held: list[Hit] | None) -> None:
        """Place `hit` in its session's first passage it fits in whole, else in a new one
        while the tier allows; a reply `_waits` for is put in `held` instead."""
        chunk = hit.chunk
        if chunk.message_id in self.taken.get(chunk.session_id, ()):
            return
        placed = _place(chunk, self.by_session.get(chunk.session_id, []), self.terms)
        if placed is None and len(self.passages) >= self.tier.max_excerpts:
            return
        if self._repeats(chunk):
            self.taken.setdefault(chunk.session_id, set()).add(chunk.message_id)
            self.repeated.add(chunk.id)
            return
        if placed is None:
            passage = _Passage(chunk.session_id, max_chars=self.tier.max_chars, best=chunk)
            room = passage.room()
            if chunk.role == "assistant" and self.widening:
                room = _room_for_reply(chunk.name or chunk.role, chunk.text, room)
            line = _line(chunk.name or chunk.role, chunk.text, room, self.terms, True)
            if line is None:
                return
            if held is not None and self._newer_first(chunk):
                return
            if held is not None and self._waits(chunk, line):
                held.append(hit)
                return
            self.passages.append(passage)
            self.by_session.setdefault(chunk.session_id, []).append(passage)
            placed = passage, line
        passage, line = placed
        passage.add(chunk.created_at, chunk.message_id, chunk.id, line)
        self.taken.setdefault(chunk.session_id, set()).add(chunk.message_id)
        if chunk.turn is not None:
            self.shown.add((chunk.session_id, chunk.turn))
        if hit.similarity is not None:
            passage.similarity = max(passage.similarity or -1.0, hit.similarity)

    def _repeats(self, chunk: Chunk) -> bool:
        """Whether the request shows the chunk's words, or a line of its session's passages by
        the same speaker says them (`memory.block.shown`)."""
        line = f"{_flat(chunk.name or chunk.role)}: {chunk.text}"
        passages = self.by_session.get(chunk.session_id, ())
        shown = self.shown_already is not None and self.shown_already(chunk.text)
        return shown or said_by_another(
            line,
            (
                (said[3], chunk.created_at < said[0])
                for passage in passages
                for said in passage.lines
            ),
        )

    def _newer_first(self, chunk: Chunk) -> bool:
        """Pack a newer conversation's user turn before a hit that would open one more
        excerpt of a conversation holding `ONE_CONVERSATION` (`memory.block.order`); True
        when it took the tier's last excerpt."""
        held = self.by_session.get(chunk.session_id, ())
        if not self.order or len(held) < ONE_CONVERSATION:
            return False
        said = max(line[0] for passage in held for line in passage.lines)
        newer = newer_turn(self.order[self.at + 1 :], self.by_session, said)
        if newer is None:
            return False
        self.add(newer, [])
        return len(self.passages) >= self.tier.max_excerpts

    def _waits(self, chunk: Chunk, line: str) -> bool:
        """Whether a reply that would open another excerpt of its session waits until every
        other hit had its chance: it is cut to fit, and the user's turn it answers is
        already shown, so all it adds is a piece of advice, and it would take an excerpt
        from a turn of another time: the newer turn that changed what the shown one said
        (fresh5: "…we've swapped it for ten days in Japan" behind two cut replies to turns
        already in the block). bench/memsuite_tune.py, update: fresh5 0.78 → 0.85, fresh4
        0.78 → 0.80; LoCoMo unchanged (its turns are short, and fit whole).
        """
        return (
            chunk.role == "assistant"
            and chunk.session_id in self.by_session
            and chunk.turn is not None
            and (chunk.session_id, chunk.turn - 1) in self.shown
            and line != f"{chunk.name or chunk.role}: {_flat(chunk.text)}"
        )


def newest_first(excerpts: Sequence[Excerpt]) -> list[Excerpt]:
    """The excerpts in the order the block shows them: the most recently said first.

    When a later conversation changed something an earlier one said (a move, a new job, a
    new dose, a new date), both may be recalled; a reader takes the first as the current
    state, so the newer comes first. Ties keep relevance order; a token cap drops the least
    relevant first (memory/layer.py). bench/memsuite.py, knowledge updates (the current value
    in the block, before the superseded one): tuning 0.39 → 1.00, held out 0.44 → 0.92.
    """
    return sorted(excerpts, key=lambda e: (-(e.latest_at or e.created_at), e.rank))


def _room_for_reply(speaker: str, text: str, room: int) -> int:
    """The room a passage led by a reply gives it: a third when the reply would fill three
    quarters or more, so the user's turn it answers (added by `_widen`) fits beside it.

    An assistant's long reply often matches a question best, since it restates the user's
    detail in other words, but the detail itself is in the user's turn before it ("A plumber
    called Gary quoted 3,200" before three sentences of advice on boilers); the reply whole
    leaves no room for it. Turns under three quarters of an excerpt are never cut: two people
    talking (LoCoMo's second speaker is replayed as the assistant) say short things, and a
    cut turn may lose what mattered. bench/memsuite.py, the fresh splits (chatty turns, long
    replies): update 0.78 → 0.88 and 0.72 → 0.83, paraphrase 0.61 → 0.66 and 0.62 → 0.65;
    LoCoMo's blocks keep their evidence (docs/recall-quality.md, "The turn a reply answers").
    """
    if (len(speaker) + 2 + len(_flat(text))) * 4 <= room * 3:
        return room
    return room // 3


def _place(
    chunk: Chunk, passages: Sequence[_Passage], terms: Sequence[str]
) -> tuple[_Passage, str] | None:
    """The first of the session's passages the chunk fits in whole, with its line."""
    for passage in passages:
        line = _line(chunk.name or chunk.role, chunk.text, passage.room(), terms, False)
        if line is not None:
            return passage, line
    return None


def _line(speaker: str, text: str, room: int, terms: Sequence[str], cut: bool) -> str | None:
    """`speaker: text` on one line; when it does not fit, cut to `room` if `cut`, else None.
    The speaker is a role when a turn has no name: an imported one may be any string."""
    label = f"{_flat(speaker)}: "
    flat = _flat(text)
    if len(label) + len(flat) <= room:
        return label + flat
    if not cut:
        return None
    piece = cut_excerpt(flat, max(room - len(label), 1), terms)
    if piece in ("", _ELLIPSIS):
        return None
    return label + piece


# Texts up to a chunk's length are made flat once (`_flat`): at most 2,048 of them, ~1 MB
# for turns of ~300 characters, 8 MB at most.
_FLAT_HELD = 1000


def _flat(text: str) -> str:
    """The text on one line, its whitespace runs one space each. A turn is tried against
    each room it might fill (its session's passages, the turns around a passage) and most do
    not fit, so its flat form is made once: the same chunks come back request after request
    (from the row cache: the same strings, whose hash Python keeps)."""
    return _flat_held(text) if len(text) <= _FLAT_HELD else " ".join(text.split())


@lru_cache(maxsize=2048)
def _flat_held(text: str) -> str:
    return " ".join(text.split())


def forget_flat_lines() -> None:
    """Let go of every turn held in its flat form (a user forgotten: their turns go too)."""
    _flat_held.cache_clear()


def _widen(
    passage: _Passage,
    neighbours: Mapping[int, Sequence[Message]],
    taken: set[int],
    shown: Shown | None = None,
) -> None:
    """Add whole turns around the passage's best hit, nearest first, while they fit.

    `neighbours` holds the turns around each passage's best hit; `taken` the message ids
    already shown in any excerpt of the session; it grows. A turn the request shows (`shown`)
    or a line of the passage by the same speaker says is left out.
    """
    assert passage.best is not None
    around = list(neighbours.get(passage.best.message_id, ()))
    centre = next((i for i, m in enumerate(around) if m.id == passage.best.message_id), None)
    if centre is None:
        return
    # Nearest first; at equal distance the turn after, except for a reply, which answers the
    # turn before it.
    if passage.best.role == "assistant":
        order = sorted(range(len(around)), key=lambda i: (abs(i - centre), i > centre))
    else:
        order = sorted(range(len(around)), key=lambda i: (abs(i - centre), i < centre))
    for i in order:
        message = around[i]
        if message.id in taken or not message.content.strip():
            continue
        name, content = split_speaker(message.name, message.content)
        line = _line(name or message.role, content, passage.room(), (), False)
        at = message.created_at
        if line is None or said_by_another(line, ((s[3], at < s[0]) for s in passage.lines)):
            continue
        if shown is not None and shown(content):
            continue
        passage.add(message.created_at, message.id, 0, line)
        taken.add(message.id)


def _excerpt(passage: _Passage, session_id: str, rank: int) -> Excerpt:
    said = sorted(passage.lines)
    lines = corrections_first(said)
    return Excerpt(
        text="\n".join(line[3] for line in lines),
        session_id=passage.session_id,
        created_at=said[0][0],
        similarity=passage.similarity,
        this_session=passage.session_id == session_id,
        speaker=None,
        latest_at=said[-1][0],
        rank=rank,
        chunk_ids=tuple(line[2] for line in lines if line[2]),
        line_chunks=tuple(line[2] for line in lines),
    )


_Line = tuple[float, int, int, str]


def corrections_first(lines: Sequence[_Line]) -> list[_Line]:
    """`lines` in the order said, but a turn that corrects a value an earlier line of the
    passage holds ("Sorry, I meant Thursday, not Tuesday" after "… on Tuesday afternoons")
    moved before the first such line: the block names the corrected value before the one it
    replaced, as it does a newer excerpt (`newest_first`) and a fact."""
    out = list(lines)
    for line in lines[1:]:
        if not (held := replaced_by(line[3].split(": ", 1)[-1])):
            continue
        at = out.index(line)
        first = next((i for i in range(at) if any(h.search(out[i][3]) for h in held)), None)
        if first is not None:
            out.insert(first, out.pop(at))
    return out
