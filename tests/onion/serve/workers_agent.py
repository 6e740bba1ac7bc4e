"""`served_agent.py`'s agent on a store several server processes share: Redis (ONION_TEST_REDIS, its namespace
ONION_TEST_NAMESPACE) or the SQLite file ONION_TEST_SHARED_DB; the rest of the environment as served_agent reads it.
"""

from __future__ import annotations

import os

from served_agent import costly, delete, lookup, model, slow

from middleware import approve
from onion import Agent
from onion.serve import serve
from onion.stores import RedisStore, SQLiteStore

redis = os.environ.get("ONION_TEST_REDIS")
store = RedisStore(redis, namespace=os.environ["ONION_TEST_NAMESPACE"]) if redis else None
agent = Agent(
    model,
    tools=[lookup, delete, slow],
    name="served",
    store=store or SQLiteStore(os.environ["ONION_TEST_SHARED_DB"]),
).use(approve("delete", reason="deleting needs a person"), costly)
app = serve(agent, token=os.environ.get("ONION_TEST_TOKEN") or None, heartbeat=0.2)
