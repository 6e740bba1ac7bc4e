"""A payload codec standing in for an encrypting one (tests/temporal/test_codec.py), and the replay of the suite's
histories decodes what it scrambled with it."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

KEY = 0x5A
ENCODING = b"binary/scrambled"


class Scrambling(PayloadCodec):
    """Each payload becomes opaque bytes marked `binary/scrambled`; decoding passes other payloads as they are."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(metadata={"encoding": ENCODING}, data=bytes(b ^ KEY for b in p.SerializeToString()))
            for p in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [Payload.FromString(_flipped(p.data)) if p.metadata.get("encoding") == ENCODING else p for p in payloads]


def _flipped(data: bytes) -> bytes:
    return bytes(b ^ KEY for b in data)
