"""The plugin keeps the client's data converter: its payload codec (encryption), failure converter and payload
converter; only Temporal's default payload converter becomes pydantic's."""

from __future__ import annotations

import dataclasses
import uuid

import onion_flows
from scrambling import Scrambling
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    DefaultPayloadConverter,
)
from temporalio.worker import Replayer, Worker

from onion.temporal import OnionPlugin


class HousePayloads(DefaultPayloadConverter):
    """A team's own payload converter."""


async def test_a_workflow_run_with_an_encrypting_codec_keeps_every_payload_out_of_clear_text(
    temporal_address: str,
) -> None:
    """The prompt, the tool's result and the answer are in no event of the history in clear; the run completes
    and its history replays with the same converter."""
    converter = DataConverter(
        payload_codec=Scrambling(), failure_converter_class=DefaultFailureConverterWithEncodedAttributes
    )
    client = await Client.connect(
        temporal_address, data_converter=converter, plugins=[OnionPlugin(*onion_flows.AGENTS)]
    )
    kept = client.config(active_config=True)["data_converter"]
    assert kept.payload_codec is converter.payload_codec
    assert kept.failure_converter_class is DefaultFailureConverterWithEncodedAttributes
    assert kept.payload_converter_class is PydanticPayloadConverter
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[onion_flows.AskWeather]):
        handle = await client.start_workflow(
            onion_flows.AskWeather.run, "weather in Reykjavik", id=f"w-{uuid.uuid4().hex}", task_queue=queue
        )
        done = await handle.result()
    assert done["output"] == "Answer: 18°C and sunny in Reykjavik"
    history = await handle.fetch_history()
    raw = b"".join(event.SerializeToString() for event in history.events)
    assert b"Reykjavik" not in raw and b"sunny" not in raw
    assert raw.count(b"binary/scrambled") >= 5  # input, two model calls and a tool call each way, the result
    replayer = Replayer(
        workflows=[onion_flows.AskWeather], data_converter=converter, plugins=[OnionPlugin(*onion_flows.AGENTS)]
    )
    assert (await replayer.replay_workflow(history, raise_on_replay_failure=False)).replay_failure is None


async def test_a_payload_converter_of_the_users_own_is_kept(temporal_address: str) -> None:
    """onion's activities carry plain JSON, which any payload converter carries: the plugin replaces only
    Temporal's default one."""
    converter = dataclasses.replace(DataConverter.default, payload_converter_class=HousePayloads)
    client = await Client.connect(temporal_address, data_converter=converter, plugins=[OnionPlugin()])
    assert client.config(active_config=True)["data_converter"].payload_converter_class is HousePayloads
    plain = await Client.connect(temporal_address, plugins=[OnionPlugin()])
    assert plain.config(active_config=True)["data_converter"].payload_converter_class is PydanticPayloadConverter
