"""Scenario of Faust's examples/bound_agent.py: agents over channels only, bound to extra
arguments with functools.partial, a sink channel between two stages and a dead-letter channel.
Faust's example fails on the wall clock; this one fails device ids 3k (stage 1) and 3k+1 (stage 2)
so the output is checkable: stage 2 sees ids 3k+2, the dead letters the rest."""

import logging
from collections.abc import AsyncIterator
from functools import partial

import agentstream as faust
from agentstream import ChannelT, StreamT

app = faust.App("fx-bound-agent", broker="kafka://localhost:9092")
logger = logging.getLogger(__name__)


class DeviceAction(faust.Record):
    device_id: int


class DeadLetter(faust.Record):
    stage: str
    record: DeviceAction


async def stage1_agent(dead_letters: ChannelT, stream: StreamT[DeviceAction]) -> AsyncIterator[DeviceAction]:
    async for action in stream:
        try:
            if action.device_id % 3 == 0:
                raise ValueError("stage 1 refuses it")
            yield action
        except ValueError:
            await dead_letters.send(value=DeadLetter(stage="stage1", record=action))


async def stage2_agent(dead_letters: ChannelT, stream: StreamT[DeviceAction]) -> AsyncIterator[DeviceAction]:
    async for action in stream:
        try:
            if action.device_id % 3 == 1:
                raise ValueError("stage 2 refuses it")
            print(f"STAGE2 {action.device_id}")
            yield action
        except ValueError:
            await dead_letters.send(value=DeadLetter(stage="stage2", record=action))


async def deadletter_agent(stream: StreamT[DeadLetter]) -> AsyncIterator[DeadLetter]:
    async for dl in stream:
        print(f"DEAD {dl.stage} {dl.record.device_id}")
        yield dl


sent = False


async def action_generator(device_actions: ChannelT) -> None:
    global sent
    if not sent:
        sent = True
        for i in range(9):
            await device_actions.send(value=DeviceAction(device_id=i))


channel_device_action = app.channel(value_type=DeviceAction)
channel_stage1_stage2 = app.channel(value_type=DeviceAction)
channel_deadletter = app.channel(value_type=DeadLetter)
app.timer(interval=0.5, on_leader=True)(partial(action_generator, channel_device_action))
app.agent(channel_deadletter, name="dead-letter-agent")(deadletter_agent)
app.agent(channel_device_action, name="stage1-agent", sink=[channel_stage1_stage2])(
    partial(stage1_agent, channel_deadletter)
)
app.agent(channel_stage1_stage2, name="stage2-agent")(partial(stage2_agent, channel_deadletter))
