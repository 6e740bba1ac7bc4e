// The official AG-UI client (@ag-ui/client, pinned in package.json) against onion's POST /ag-ui.
// `node client.mjs SCENARIO` with ONION_URL and ONION_TOKEN set; prints one JSON object: what the client
// ended with (its messages, each run's result or error, its pending interrupts). The Python test
// (test_ag_ui_client.py) scripts the model before each scenario and checks what this prints.
import { HttpAgent, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";

const url = process.env.ONION_URL;
const headers = { authorization: `Bearer ${process.env.ONION_TOKEN}` };

// An HttpAgent that can reconnect: connectAgent() follows the run again at GET /runs/{run_id}/events,
// the run id taken from RUN_STARTED's metadata.
class OnionAgent extends HttpAgent {
  connect() {
    const events = `${url}/runs/${this.onionRunId}/events`;
    return transformHttpEventStream(runHttpRequest(() => fetch(events, { headers })));
  }
}

function agent(question) {
  const made = new OnionAgent({ url: `${url}/ag-ui`, headers, threadId: `thread-${Math.random()}` });
  made.addMessage({ id: "m1", role: "user", content: question });
  made.subscribe({ onRunStartedEvent: ({ event }) => { made.onionRunId = event.metadata?.run_id; } });
  return made;
}

// One run: its result, or the RUN_ERROR it ended with; `during` sees each event (it may abort the run).
async function run(client, params = {}, during = () => {}) {
  let error = null;
  const seen = [];
  const { result } = await client.runAgent(params, {
    onEvent: ({ event }) => { seen.push(event.type); during(event); },
    onRunErrorEvent: ({ event }) => { error = { message: event.message, code: event.code }; },
  });
  return { result: result ?? null, error, seen };
}

const shown = (client) => ({
  messages: client.messages.map(({ id, role, content, toolCalls, toolCallId }) =>
    ({ id, role, content, toolCalls, toolCallId })),
  pending: client.pendingInterrupts,
});

const scenarios = {
  async text() {
    const client = agent("hello");
    return { run: await run(client), ...shown(client) };
  },
  async tools() {
    const client = agent("weather in Oslo?");
    return { run: await run(client), ...shown(client) };
  },
  // A pause, its resume, then a second client holding the same interrupt resumes it again: refused.
  async approval() {
    const client = agent("tidy");
    const paused = await run(client);
    const interrupts = client.pendingInterrupts;
    const other = client.clone();
    const resume = interrupts.map((i) => ({ interruptId: i.id, status: "resolved" }));
    const resumed = await run(client, { resume });
    const again = await run(other, { resume });
    return { paused, interrupts, resumed, again, ...shown(client) };
  },
  async reset() {
    const client = agent("a flaky question");
    return { run: await run(client), ...shown(client) };
  },
  // The client leaves once the tool call is sent; the run goes on; connectAgent() replays it from RUN_STARTED
  // at /runs/{run_id}/events, after the client set its messages back to those it started the run with.
  async reconnect() {
    const client = agent("wait");
    const before = structuredClone(client.messages);
    const left = await run(client, {}, (event) => { if (event.type === "TOOL_CALL_END") client.abortRun(); });
    const partial = shown(client).messages;
    client.setMessages(before);
    let error = null;
    const { result } = await client.connectAgent({}, {
      onRunErrorEvent: ({ event }) => { error = { message: event.message, code: event.code }; },
    });
    return { left, partial, reconnected: { result: result ?? null, error }, ...shown(client) };
  },
};

const chosen = scenarios[process.argv[2]];
if (!chosen) {
  console.error(`unknown scenario ${process.argv[2]}: give one of ${Object.keys(scenarios).join(", ")}`);
  process.exit(2);
}
process.stdout.write(JSON.stringify(await chosen()));
