// The page's only way to the server: same-origin fetch with the session cookie,
// and EventSource for the watch stream. Writes carry X-Shiitake-CSRF: 1, which the
// server requires of every cookie-authenticated write.

/** A failed call: `code` is the ShiitakeError code (`not_granted` on 401). */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Listeners told when the server stops accepting the cookie. */
const loggedOutListeners = [];
export function onLoggedOut(listener) {
  loggedOutListeners.push(listener);
}

/** A fresh request id: 128 random bits, hex (visible ASCII, under 128 bytes). */
export function requestId() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Calls `method path` with an optional JSON body; resolves to the JSON answer (or null). */
export async function api(method, path, body) {
  const headers = { "X-Shiitake-CSRF": "1" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) {
    loggedOutListeners.forEach((listener) => listener());
    throw new ApiError(401, "not_granted", "not logged in");
  }
  const text = await response.text();
  let value = null;
  if (text) {
    try {
      value = JSON.parse(text);
    } catch {
      value = null;
    }
  }
  if (!response.ok) {
    const code = value && value.code ? value.code : "unavailable";
    const message = value && value.message ? value.message : `HTTP ${response.status}`;
    throw new ApiError(response.status, code, message);
  }
  return value;
}

const enc = encodeURIComponent;

/**
 * The routes of one Agent of the directory: `/v1/…` for the page's own (default) Agent
 * (`name` null), `/v1/agents/<name>/…` for another, the same routes under its segment.
 */
export function routesOf(name) {
  const base = name ? `/v1/agents/${enc(name)}` : "/v1";
  const session = (id) => `${base}/sessions/${enc(id)}`;
  return {
    sessions: {
      list: (after) => api("GET", `${base}/sessions` + (after ? `?after=${enc(after)}` : "")),
      create: () => api("POST", `${base}/sessions`, { requestId: requestId() }),
      command: (id, command) => api("POST", `${session(id)}/commands`, command),
      prompt: (id, text, delivery) =>
        api("POST", `${session(id)}/commands`, {
          type: "prompt",
          requestId: requestId(),
          text,
          delivery,
        }),
      abort: (id) => api("POST", `${session(id)}/commands`, { type: "abort" }),
      callExtension: (id, extension, command, input) =>
        api("POST", `${session(id)}/extensions/${enc(extension)}/${enc(command)}`, input),
    },
    agent: {
      catalogs: () => api("GET", `${base}/catalogs`),
      callExtension: (extension, command, input) =>
        api("POST", `${base}/extensions/${enc(extension)}/commands/${enc(command)}`, input),
    },
    watch: (id, handlers) => watchAt(`${session(id)}/watch`, handlers),
  };
}

/** The page's own Agent's routes (the inbox and the Sessions it opens). */
export const { sessions, agent } = routesOf(null);

/** The Agent the routes without an Agent segment serve: asked once; null when the
 * server serves a single Agent (no `GET /v1/agents`). */
let defaultAgentName;
export async function defaultAgent() {
  if (defaultAgentName === undefined) {
    try {
      const list = await api("GET", "/v1/agents");
      const found = list.agents.find((entry) => entry.default);
      defaultAgentName = found ? found.name : null;
    } catch {
      defaultAgentName = null;
    }
  }
  return defaultAgentName;
}

/**
 * Watches the Session whose watch route is `path`: `handlers.snapshot(snapshot)` first (and again after every
 * reconnect: the watch route starts each stream with one), then `update`,
 * `progress` and `reset` frames as they come. `handlers.closed(reason)` is told
 * when the stream ends for good. Returns a function that stops watching.
 */
function watchAt(path, handlers) {
  const source = new EventSource(path, { withCredentials: true });
  const parse = (event) => {
    try {
      return JSON.parse(event.data);
    } catch {
      return null;
    }
  };
  source.addEventListener("snapshot", (event) => {
    const snapshot = parse(event);
    if (snapshot) handlers.snapshot(snapshot);
  });
  for (const kind of ["update", "progress", "reset"]) {
    source.addEventListener(kind, (event) => {
      const frame = parse(event);
      if (frame) handlers.frame(frame);
    });
  }
  source.addEventListener("open", () => handlers.connected && handlers.connected(true));
  source.addEventListener("error", (event) => {
    // A server-sent `error` event carries data and ends the stream; a bare error
    // is a dropped connection, which EventSource retries by itself.
    if (event.data) {
      source.close();
      const error = parse(event);
      handlers.closed(error && error.message ? error.message : "the stream failed");
    } else if (source.readyState === EventSource.CLOSED) {
      // The server refused the stream (a non-stream answer, e.g. 401): no retry.
      handlers.closed("the server refused the stream");
      api("GET", "/v1/catalogs").catch(() => {});
    } else if (handlers.connected) {
      handlers.connected(false);
    }
  });
  source.addEventListener("end", () => {
    source.close();
    handlers.closed("the Session was closed");
  });
  return () => source.close();
}
