"""A worker process for `test_pause_anywhere.py`: a model layer pauses the model call; SQLite journals the run.

`start DB`: run until the model call pauses, print the run id, then wait to be killed (SIGKILL).
`approve DB RUN_ID`: load the run from the store, approve its paused model call, resume; print the result as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from onion import Agent, ModelCall
from onion.stores import SQLiteStore
from onion.testing import FunctionModel


def build(db: str) -> Agent:
    def answer(call: ModelCall) -> Any:
        return f"answered after {len(call.messages)} message(s)"

    async def expensive(call: ModelCall, call_next: Any) -> Any:
        if not call.approved:
            return call.pause("the big model costs money")
        return await call_next(call)

    return Agent(FunctionModel(answer), name="pricey", store=SQLiteStore(db)).use(expensive)


async def main(mode: str, db: str, run_id: str | None) -> None:
    agent = build(db)
    if mode == "start":
        result = await agent.run("summarise the report", state={"user": "ann"})
        assert result.paused and result.pending[0].kind == "model", result
        print(result.run_id, flush=True)
        time.sleep(600)  # paused, in the store: killed here
        return
    assert run_id is not None
    state = await agent.store.load(run_id)
    (call,) = state.pending
    state.approve(call.id)
    result = await agent.resume(state)
    print(json.dumps({"status": result.status, "output": result.output, "state": result.state, "id": call.id}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
