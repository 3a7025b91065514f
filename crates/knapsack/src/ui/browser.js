// knapsack-ui.js: connects an App open in a browser to one Agent Session's
// browser bridge (Knapsack.ui). No dependencies; any modern browser.
//
//   import { connectBrowser } from "/browser/knapsack-ui.js";
//   const bridge = connectBrowser({
//     baseUrl: "/browser/sessions/<sessionId>/browser",
//     commands: {
//       add_note: {
//         description: "Adds a note to the list on screen.",
//         inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
//         run: async ({ text }) => ({ count: notes.push(text) }),
//       },
//     },
//   });
//
// `commands` is an object (or a function returning one) read at every request, so
// the commands are live: add or remove entries and the next `ui.discover` sees it.
// Each entry has `run(input)` (sync or async; a throw becomes the run's
// `browser_command_failed`), an optional `description` and an optional `inputSchema`.
//
// The module reads the events stream with `fetch` (so `headers`, such as an
// Authorization header, reach every request), claims each request before running
// it, and posts the result with the claim's ids. It reconnects after a dropped
// stream (250 ms, doubling to 5 s) and stops for good on `end` or a 401, 403, 404
// or 410 answer. `close()` ends the stream; the host then treats a request this tab
// had claimed and not answered as `browser_execution_indeterminate`.

const TERMINAL_STATUSES = new Set([401, 403, 404, 410]);

export function connectBrowser(options) {
  const {
    baseUrl,
    commands,
    headers = {},
    fetch: fetchImpl = globalThis.fetch.bind(globalThis),
    onStatus,
    retry = {},
  } = options ?? {};
  if (typeof baseUrl !== "string" || baseUrl === "") {
    throw new TypeError("connectBrowser: baseUrl must be the bridge's URL, e.g. /browser/sessions/<id>/browser");
  }
  if (!commands || (typeof commands !== "object" && typeof commands !== "function")) {
    throw new TypeError("connectBrowser: commands must be an object (or a function returning one)");
  }
  const base = baseUrl.replace(/\/+$/, "");
  const initialDelay = retry.initialMs ?? 250;
  const maxDelay = retry.maxMs ?? 5000;
  const stats = { connects: 0, requests: 0, claimed: 0, refused: 0, answered: 0 };
  let status = "connecting";
  let connectionId = null;
  let stopped = false;
  let controller = null;
  let resolveReady;
  const ready = new Promise((resolve) => {
    resolveReady = resolve;
  });

  function setStatus(next) {
    status = next;
    if (typeof onStatus === "function") {
      try {
        onStatus(next);
      } catch (_) {
        // A failing observer must not break the bridge.
      }
    }
  }

  function current() {
    return (typeof commands === "function" ? commands() : commands) ?? {};
  }

  function listCommands() {
    return Object.entries(current())
      .filter(([, command]) => command && typeof command.run === "function")
      .map(([name, command]) => {
        const item = { name, description: typeof command.description === "string" ? command.description : "" };
        if (command.inputSchema && typeof command.inputSchema === "object") item.inputSchema = command.inputSchema;
        return item;
      });
  }

  async function perform(request) {
    if (request.kind === "discover") return { commands: listCommands() };
    const command = current()[request.command];
    if (!command || typeof command.run !== "function") throw new Error(`the App has no command named ${request.command}`);
    return await command.run(request.input ?? {});
  }

  function post(path, body) {
    return fetchImpl(`${base}/${path}`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body,
    });
  }

  function errorOutcome(error) {
    const message = error && typeof error.message === "string" ? error.message : String(error);
    return { error: { message } };
  }

  async function handle(request, claimant) {
    stats.requests += 1;
    let claim;
    try {
      claim = await post("claims", JSON.stringify({ requestId: request.requestId, connectionId: claimant }));
    } catch (_) {
      return; // The host sees this tab as gone if the stream is gone too.
    }
    if (!claim.ok) {
      stats.refused += 1; // Another tab won, or the request was given up.
      return;
    }
    stats.claimed += 1;
    let body;
    try {
      const value = await perform(request);
      body = JSON.stringify({ requestId: request.requestId, connectionId: claimant, outcome: { ok: value === undefined ? null : value } });
    } catch (error) {
      body = JSON.stringify({ requestId: request.requestId, connectionId: claimant, outcome: errorOutcome(error) });
    }
    try {
      const answer = await post("results", body);
      if (answer.ok) stats.answered += 1;
    } catch (_) {
      // Nothing to do: the run learns the outcome is unknown when this tab leaves.
    }
  }

  // Dispatches one SSE event; answers true when the stream must end for good.
  function dispatch(name, data) {
    let payload = {};
    try {
      payload = data === "" ? {} : JSON.parse(data);
    } catch (_) {
      return false;
    }
    if (name === "hello") {
      connectionId = payload.connectionId;
      stats.connects += 1;
      setStatus("connected");
      resolveReady(connectionId);
    } else if (name === "request") {
      handle(payload, connectionId);
    } else if (name === "end") {
      return true;
    }
    return false;
  }

  // Splits `buffer` into complete SSE events; answers the unfinished rest and whether `end` came.
  function consume(buffer) {
    let rest = buffer;
    let cut;
    while ((cut = rest.indexOf("\n\n")) >= 0) {
      const block = rest.slice(0, cut);
      rest = rest.slice(cut + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") name = value;
        else if (field === "data") data.push(value);
      }
      if (dispatch(name, data.join("\n"))) return { rest, ended: true };
    }
    return { rest, ended: false };
  }

  async function readOnce() {
    controller = new AbortController();
    const response = await fetchImpl(`${base}/events`, {
      headers: { ...headers, accept: "text/event-stream" },
      cache: "no-store",
      signal: controller.signal,
    });
    if (TERMINAL_STATUSES.has(response.status)) return true;
    if (!response.ok || !response.body) throw new Error(`events answered HTTP ${response.status}`);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      buffer = (buffer + decoder.decode(value, { stream: true })).replace(/\r\n?/g, "\n");
      const { rest, ended } = consume(buffer);
      buffer = rest;
      if (ended) {
        controller.abort();
        return true;
      }
    }
  }

  async function run() {
    let delay = initialDelay;
    while (!stopped) {
      let finished = false;
      try {
        finished = await readOnce();
      } catch (_) {
        // A dropped stream: reconnect below.
      }
      // A stream that got as far as hello was healthy: start the backoff again.
      if (connectionId !== null) delay = initialDelay;
      connectionId = null;
      if (finished || stopped) break;
      setStatus("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, maxDelay);
    }
    stopped = true;
    setStatus("closed");
  }

  run();

  return {
    /** Resolves with the first connection id, once the host said hello. */
    ready,
    /** `connecting`, `connected`, `reconnecting` or `closed`. */
    get status() {
      return status;
    },
    /** The current connection id, or null between connections. */
    get connectionId() {
      return connectionId;
    },
    /** Counters: connects, requests seen, claims won and refused, results accepted. */
    stats() {
      return { ...stats };
    },
    /** Ends the stream for good. */
    close() {
      stopped = true;
      if (controller) controller.abort();
    },
  };
}
