"""What an env server may answer (``--env-server``): bounded by its bytes and by the values it decodes to.

verifiers' ``EnvClient`` takes whatever a server sends and decodes it whole (msgpack, then pydantic): a 300 MB
answer held 1.1 GB and was accepted, and msgpack is denser than JSON (an empty map is one byte, some 70 decoded).
So the client's socket takes no message past ``MAX_ANSWER_BYTES`` (ZMQ's own ``MAXMSGSIZE``: it is never
received; ZMQ closes the connection instead, which ``env_server_watch`` tells from a dropped one), and an answer's
values are counted from its msgpack headers before verifiers decodes it (``msgpack_values``, nothing built): one
past ``MAX_ANSWER_VALUES`` reaches the client as the server's failure of that request, in one sentence
(``refusal``), so that rollout fails (and is retried) and the run goes on.
"""

from __future__ import annotations

import asyncio
from typing import Any

# A rollout's answer is its trace: messages, calls and timings, linear in turns (some KB a turn, with token ids
# a few bytes a token). Past either bound it is no rollout's; decoded, it takes at most some 100 bytes a value
# beside its texts, so one answer holds some 200 MB at most, however it is made.
MAX_ANSWER_BYTES = 32 * 1024**2
MAX_ANSWER_VALUES = 2 * 10**6
COUNTED_APART = (
    1024**2
)  # an answer this long is counted in a thread: the run's loop goes on meanwhile

# msgpack's formats by their first byte: those of a fixed size; those whose size follows (bytes of the size, and
# of an ext's type); arrays and maps whose count follows (bytes of the count, values an entry)
_FIXED = {0xC0: 1, 0xC2: 1, 0xC3: 1, 0xCA: 5, 0xCB: 9, 0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9}
_FIXED |= {0xD0: 2, 0xD1: 3, 0xD2: 5, 0xD3: 9, 0xD4: 3, 0xD5: 4, 0xD6: 6, 0xD7: 10, 0xD8: 18}
_SIZED = {0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0), 0xC7: (1, 1), 0xC8: (2, 1), 0xC9: (4, 1)}
_SIZED |= {0xD9: (1, 0), 0xDA: (2, 0), 0xDB: (4, 0)}
_COUNTED = {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}


def msgpack_values(data: bytes, limit: int) -> int | None:
    """How many values (map keys included) the msgpack object ``data`` holds, read from its headers alone, nothing
    decoded; None past ``limit``, where counting stops (so it costs ``limit`` steps at most). A truncated or
    malformed one is counted as far as it reads: msgpack refuses it after."""
    pos, pending, count, end = 0, 1, 0, len(data)
    while pending and pos < end:
        pending, count = pending - 1, count + 1
        if count > limit:
            return None
        first = data[pos]
        if first <= 0x7F or first >= 0xE0:  # a fixint
            pos += 1
        elif first <= 0x8F:  # a fixmap: a key and a value an entry
            pending += 2 * (first & 0x0F)
            pos += 1
        elif first <= 0x9F:  # a fixarray
            pending += first & 0x0F
            pos += 1
        elif first <= 0xBF:  # a fixstr
            pos += 1 + (first & 0x1F)
        elif (size := _FIXED.get(first)) is not None:
            pos += size
        elif (sized := _SIZED.get(first)) is not None:
            width, kind = sized
            pos += 1 + width + kind + int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
        elif (counted := _COUNTED.get(first)) is not None:
            width, per_entry = counted
            pending += per_entry * int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
            pos += 1 + width
        else:  # 0xC1, which msgpack never uses
            break
    return count


def refusal(address: str) -> str:
    """The sentence an answer past ``MAX_ANSWER_VALUES`` fails its request with."""
    return (
        f"the env server at {address} answered with more than {MAX_ANSWER_VALUES:,} values, far more than "
        "a rollout's trace holds: vftui did not read it"
    )


class BoundedSocket:
    """The client's socket, each answer's values counted before verifiers' client decodes it: one past
    ``MAX_ANSWER_VALUES`` is handed over as the server's failure of its request (``refusal``). All else is the
    socket's own."""

    def __init__(self, socket: Any, address: str) -> None:
        self._socket, self.refusal = socket, refusal(address)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._socket, name)

    def send_multipart(self, parts: Any, flags: int = 0, **kwargs: Any) -> Any:
        """Sent at once or not at all (``zmq.Again``). ZMQ queues a message while it has a connection, one it
        retries too; it has none once it closed one for good (on an answer past ``MAX_ANSWER_BYTES``), where a
        send waited for ever (and with it verifiers' client closing: it sends its cancels first)."""
        import zmq

        return self._socket.send_multipart(parts, flags | zmq.DONTWAIT, **kwargs)

    async def recv_multipart(self, *args: Any, **kwargs: Any) -> list[bytes]:
        frames = await self._socket.recv_multipart(*args, **kwargs)
        if len(frames) != 2:  # not an answer (request id, payload): verifiers' client says so
            return frames
        payload = frames[1]
        if len(payload) < COUNTED_APART:
            counted = msgpack_values(payload, MAX_ANSWER_VALUES)
        else:
            counted = await asyncio.to_thread(msgpack_values, payload, MAX_ANSWER_VALUES)
        if counted is not None:
            return frames
        return [frames[0], _failure(self.refusal)]


def _failure(error: str) -> bytes:
    """``{"success": false, "error": error}`` in msgpack: verifiers' answer for a request that failed."""
    text = error.encode()
    return b"\x82\xa7success\xc2\xa5error\xda" + len(text).to_bytes(2, "big") + text
