"""The provider key masked in a body relayed in pieces: a key split across pieces is masked
whole, and the pieces hold back nothing that cannot begin the key."""

import asyncio
from collections.abc import AsyncIterator

from proxy.upstream_errors import chunks_without_key

KEY = "sk-operator-0123456789abcdef"


async def _pieces(*pieces: bytes) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


def _relayed(*pieces: bytes) -> list[bytes]:
    async def collect() -> list[bytes]:
        return [p async for p in chunks_without_key(_pieces(*pieces), f"Bearer {KEY}")]

    return asyncio.run(collect())


def test_a_key_split_across_pieces_is_masked():
    quoted = f'data: {{"error": {{"message": "Incorrect API key provided: {KEY}"}}}}\n\n'.encode()
    for cut in range(1, len(quoted)):
        relayed = b"".join(_relayed(quoted[:cut], quoted[cut:]))
        assert KEY.encode() not in relayed and len(relayed) == len(quoted)
        assert relayed.endswith(b'"}}\n\n')


def test_an_event_that_cannot_begin_the_key_goes_out_whole_at_once():
    first = b'data: {"choices": [{"delta": {"content": "is"}}]}\n\n'
    assert _relayed(first, b"data: [DONE]\n\n") == [first, b"data: [DONE]\n\n"]
    assert _relayed(b"ends in s", b"k-no") == [b"ends in ", b"sk-no"]
