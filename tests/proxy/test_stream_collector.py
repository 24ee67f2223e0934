"""The SSE reader that collects a streamed reply on the side (proxy/streaming.py): however the
provider's bytes are cut into chunks, the same reply is read, and a long line cut into many
small pieces is joined once (its cost is its length, not its length times its pieces); the
same for the memory tool loop's event splitter."""

import asyncio
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.round_filter import sse_events
from proxy.streaming import ReplyCollector


def sse(words: list[str]) -> bytes:
    events = [
        {"choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
        for word in words
    ]
    lines = [b"data: " + json.dumps(event).encode() + b"\n\n" for event in events]
    return b"".join(lines) + b"data: [DONE]\n\n"


def collected(chunks: list[bytes]) -> tuple[bool, list]:
    collector = ReplyCollector()
    for chunk in chunks:
        collector.feed(chunk)
    return collector.end(), collector.replies()


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
)
def test_any_chunking_reads_the_same_reply(words, cuts):
    stream = sse(words)
    at = sorted({cut % (len(stream) + 1) for cut in cuts} | {0, len(stream)})
    chunks = [stream[a:b] for a, b in zip(at, at[1:], strict=False)]

    assert collected(chunks) == collected([stream])
    assert collected([stream])[1][0]["content"] == "".join(words)


def test_a_long_line_in_one_byte_pieces_is_read_whole():
    word = "x" * 50_000
    stream = sse([word])
    whole, replies = collected([stream[i : i + 1] for i in range(len(stream))])

    assert whole
    assert replies[0]["content"] == word


def test_a_last_line_without_its_newline_is_read_at_the_end():
    stream = sse(["hi"]).removesuffix(b"data: [DONE]\n\n") + b"data: [DONE]"
    assert collected([stream[:7], stream[7:]])[0] is True


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
    crlf=st.booleans(),
)
def test_the_tool_loop_reads_the_same_events_however_the_stream_is_cut(words, cuts, crlf):
    """proxy/round_filter.py's `sse_events`, which the memory tool loop reads rounds with."""
    stream = sse(words).replace(b"\n", b"\r\n") if crlf else sse(words)
    at = sorted({cut % (len(stream) + 1) for cut in cuts} | {0, len(stream)})
    chunks = [stream[a:b] for a, b in zip(at, at[1:], strict=False)]

    async def events(pieces: list[bytes]) -> list[bytes]:
        async def source():
            for piece in pieces:
                yield piece

        return [event async for event in sse_events(source())]

    expected = [line + b"\n\n" for line in sse(words).split(b"\n\n") if line]
    assert asyncio.run(events(chunks)) == expected
