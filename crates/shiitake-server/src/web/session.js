// The Session view: a header with the Session's title (its id a click away), a
// transcript built from the watch stream (a snapshot, then update, progress and
// reset frames as they arrive), assistant text rendered as Markdown (markdown.js),
// tool calls folded, run terminals and retry notices in line, the footer, and the
// prompt box.

import { routesOf } from "./api.js";
import { commandLine, commandResult } from "./command.js";
import { h, replace } from "./dom.js";
import { renderFooter } from "./footer.js";
import { MarkdownView, copyText, renderMarkdown } from "./markdown.js";

/** What the page knows of one Session, folded from its frames. */
export class SessionState {
  constructor() {
    this.clear();
  }

  clear() {
    this.messages = new Map();
    this.terminals = new Map();
    this.retries = new Map();
    this.activity = null;
    this.progress = null;
    this.extensions = {};
    this.footer = [];
    this.pending = { prompts: [], hasMore: false };
  }

  /** Starts over from a snapshot (the first event of a watch, or a reset's baseline). */
  applySnapshot(snapshot) {
    this.clear();
    this.addCommitted(snapshot);
    this.activity = snapshot.activity;
    this.progress = snapshot.progress || null;
    this.extensions = snapshot.extensions || {};
    this.footer = snapshot.footer || [];
    this.pending = snapshot.pending || this.pending;
    this.noteRetry();
  }

  addCommitted(part) {
    for (const message of part.messages || []) this.messages.set(message.id, message);
    for (const terminal of part.terminals || []) {
      this.terminals.set(`${terminal.commandId}:${terminal.sequence}`, terminal);
    }
  }

  /** Records the retry the activity announces, so its notice stays in the transcript. */
  noteRetry() {
    const retry = this.activity && this.activity.retry;
    if (!retry) return;
    const command = this.activity.queue && this.activity.queue.commandId;
    const after = Math.max(0, ...[...this.messages.values()].map((m) => m.sequence));
    const key = `${command}:${retry.attempt}:${retry.scheduledAt}`;
    if (!this.retries.has(key)) this.retries.set(key, { ...retry, sequence: after + 0.5 });
  }

  /** Folds one frame in. */
  applyFrame(frame) {
    if (frame.kind === "reset") {
      this.applySnapshot(frame.baseline);
    } else if (frame.kind === "update") {
      this.addCommitted(frame);
      this.activity = frame.activity;
      this.extensions = frame.extensions || {};
      this.footer = frame.footer || [];
      this.pending = frame.pending || this.pending;
      // A committed assistant message ends the stream that previewed it.
      const committedAssistant = (frame.messages || []).some((m) => m.value.role === "assistant");
      if (committedAssistant || !this.running()) this.progress = null;
      this.noteRetry();
    } else if (frame.kind === "progress") {
      const current = this.progress;
      const next = frame.progress;
      const stale =
        current && current.messageId === next.messageId && current.revision > next.revision;
      if (!stale && !this.messages.has(next.messageId)) this.progress = next;
      this.activity = frame.activity;
      this.noteRetry();
    }
  }

  /** Whether a run is queued or running. */
  running() {
    const state = this.activity && this.activity.queue && this.activity.queue.state;
    return state === "running" || state === "queued";
  }

  /** Messages, terminals and retry notices in commit order. */
  items() {
    const items = [];
    for (const message of this.messages.values()) items.push({ kind: "message", message });
    for (const [key, terminal] of this.terminals) items.push({ kind: "terminal", key, terminal });
    for (const [key, retry] of this.retries) items.push({ kind: "retry", key, retry });
    const at = (item) =>
      item.kind === "message"
        ? item.message.sequence
        : item.kind === "terminal"
          ? item.terminal.sequence
          : item.retry.sequence;
    return items.sort((a, b) => at(a) - at(b));
  }
}

/** The text of a user message (a string or text blocks). */
function userText(value) {
  if (typeof value.content === "string") return value.content;
  return (value.content || [])
    .map((block) => (block.type === "text" ? block.text : `[${block.type}]`))
    .join("");
}

function preview(args) {
  const text = JSON.stringify(args || {});
  return text.length > 80 ? text.slice(0, 77) + "…" : text;
}

function toolCallElement(call) {
  const line = commandLine(call.name, call.arguments);
  return h(
    "details",
    { class: "tool", dataset: { call: call.id } },
    h(
      "summary",
      {},
      h("span", { class: "tool-name" }, call.name),
      " ",
      line ? h("span", { class: "command-line" }, line) : h("span", { class: "muted" }, preview(call.arguments)),
      h("span", { class: "tool-state muted" }, " …"),
    ),
    h("pre", { class: "args" }, JSON.stringify(call.arguments || {}, null, 2)),
    h("pre", { class: "result" }),
  );
}

function fillResult(element, value) {
  const text = (value.content || [])
    .map((block) => (block.type === "text" ? block.text : `[${block.type}]`))
    .join("\n");
  const command = !value.isError && commandResult(value.toolName, text);
  if (command) {
    const streams = command.streams.map((stream) => h("span", { class: `stream ${stream.name}` }, stream.text));
    replace(element.querySelector(".result"), streams.length ? streams : "(no output)");
    replace(element.querySelector(".tool-state"), ` ${command.summary}`);
    element.classList.toggle("error", command.failed);
    return;
  }
  replace(element.querySelector(".result"), text || "(no output)");
  replace(element.querySelector(".tool-state"), value.isError ? " failed" : " done");
  element.classList.toggle("error", Boolean(value.isError));
}

function assistantElement(value) {
  const blocks = [];
  for (const block of value.content || []) {
    if (block.type === "text") blocks.push(h("div", { class: "text" }, renderMarkdown(block.text)));
    else if (block.type === "thinking" && block.thinking)
      blocks.push(
        h("details", { class: "thinking" }, h("summary", {}, "thinking"), h("div", {}, block.thinking)),
      );
    else if (block.type === "toolCall") blocks.push(toolCallElement(block));
  }
  if (value.errorMessage) blocks.push(h("div", { class: "error-text" }, value.errorMessage));
  return h("div", { class: "msg assistant" }, h("div", { class: "who" }, "assistant"), blocks);
}

const OUTCOMES = {
  completed: "Run completed",
  cancelled: "Run cancelled",
  failed: "Run failed",
  interrupted: "Run interrupted",
};

function terminalElement(terminal) {
  return h(
    "div",
    { class: `terminal outcome-${terminal.outcome}`, dataset: { outcome: terminal.outcome } },
    OUTCOMES[terminal.outcome] || terminal.outcome,
    terminal.diagnostic ? `: ${terminal.diagnostic}` : "",
  );
}

function retryElement(retry) {
  const seconds = (retry.delayMs / 1000).toFixed(1);
  return h(
    "div",
    { class: "notice retry" },
    `The model call failed (${retry.errorMessage}); retry ${retry.attempt}/${retry.maxAttempts} in ${seconds} s`,
  );
}

/** Pages of the Session list read to find one Session's title (100 rows each). */
const TITLE_PAGES = 10;

/**
 * The inbox title of Session `id` ("" before its first prompt), or null when it is not
 * among the first TITLE_PAGES pages of the list.
 */
export async function findTitle(routes, id) {
  let after = null;
  for (let page = 0; page < TITLE_PAGES; page += 1) {
    const answer = await routes.sessions.list(after);
    const row = answer.sessions.find((entry) => entry.sessionId === id);
    if (row) return row.title || "";
    if (!answer.next) break;
    after = answer.next;
  }
  return null;
}

/**
 * The header: `title` (the inbox's) and the id on a button that copies it.
 * Returns the element and a function that sets the title.
 */
function sessionHeader(id, agentName) {
  const title = h("span", { id: "session-title", class: "muted" }, "New session");
  const idCode = h("code", {}, id);
  const copy = h(
    "button",
    { id: "session-id", class: "link session-id", type: "button", title: "Copy the Session id" },
    idCode,
    " ",
    h("span", { class: "copy-label" }, "copy id"),
  );
  copy.addEventListener("click", () => copyText(id, copy.querySelector(".copy-label"), idCode));
  const heading = h("h2", {}, agentName ? `${agentName}: ` : "", title, " ", copy);
  const setTitle = (text) => {
    replace(title, text || "New session");
    title.classList.toggle("muted", !text);
    document.title = `Shiitake — ${agentName ? `${agentName}: ` : ""}${text || "Session"}`;
  };
  return { heading, setTitle };
}

/**
 * Shows Session `id` of Agent `agentName` (null: the page's own Agent) in `root`;
 * returns a function that stops watching it.
 */
export function showSession(root, id, { back, agentName = null }) {
  const routes = routesOf(agentName);
  const state = new SessionState();
  const elements = new Map();
  const transcript = h("div", { class: "transcript", id: "transcript" });
  // The bubble of the message being streamed: kept across frames, so only the Markdown
  // block that grew is rebuilt and an opened "thinking" stays open.
  const streamingThinkingText = h("div");
  const streamingThinking = h(
    "details",
    { class: "thinking", hidden: true },
    h("summary", {}, "thinking…"),
    streamingThinkingText,
  );
  const streamingView = new MarkdownView();
  // "…" when the preview was cut (empty otherwise: textContent counts hidden nodes too).
  const streamingCut = h("span", { class: "muted" });
  const streaming = h(
    "div",
    { class: "msg assistant streaming", id: "streaming", hidden: true },
    h("div", { class: "who" }, "assistant"),
    streamingThinking,
    h("div", { class: "text" }, streamingView.element, streamingCut),
  );
  const header = sessionHeader(id, agentName);
  const retryBanner = h("div", { class: "notice retry live", id: "retry", hidden: true });
  const activity = h("span", { class: "activity", id: "activity" });
  // The running tool's latest output (a command's), while it runs; never stored.
  const toolOutput = h("pre", { class: "tool-output live", id: "tool-output", hidden: true });
  const connection = h("span", { class: "muted", id: "connection" });
  const pending = h("ul", { class: "pending", id: "pending" });
  const footer = h("footer", { class: "footer", id: "footer" });
  const prompt = h("textarea", {
    id: "prompt",
    rows: 3,
    placeholder: "Write to the agent. Ctrl+Enter sends; Steer enters the running work.",
  });
  const problem = h("div", { class: "error-text", id: "problem" });
  const send = async (delivery) => {
    const text = prompt.value;
    if (!text.trim()) return;
    replace(problem);
    try {
      await routes.sessions.prompt(id, text, delivery);
      prompt.value = "";
    } catch (error) {
      replace(problem, `Not sent: ${error.message}`);
    }
  };
  const sendButton = h("button", { id: "send", class: "primary", onclick: () => send("followUp") }, "Send");
  const steerButton = h("button", { id: "steer", onclick: () => send("steer") }, "Steer");
  const abortButton = h(
    "button",
    {
      id: "abort",
      class: "danger",
      onclick: async () => {
        try {
          await routes.sessions.abort(id);
        } catch (error) {
          replace(problem, `Abort failed: ${error.message}`);
        }
      },
    },
    "Abort",
  );
  prompt.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      send("followUp");
    }
  });

  replace(
    root,
    h(
      "div",
      { class: "bar" },
      h("button", { class: "link", id: "back", onclick: back }, "← Inbox"),
      header.heading,
      connection,
    ),
    transcript,
    retryBanner,
    h("div", { class: "status" }, activity),
    toolOutput,
    pending,
    footer,
    h(
      "div",
      { class: "composer" },
      prompt,
      h("div", { class: "actions" }, sendButton, steerButton, abortButton),
      problem,
    ),
  );

  const render = () => {
    const nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
    const order = [];
    for (const item of state.items()) {
      if (item.kind === "message") {
        const { message } = item;
        const value = message.value;
        if (value.role === "toolResult") {
          const call = elements.get(`call:${value.toolCallId}`);
          if (call) {
            fillResult(call, value);
            continue;
          }
        }
        let element = elements.get(message.id);
        if (!element) {
          if (value.role === "user")
            element = h("div", { class: "msg user" }, h("div", { class: "who" }, "you"), h("div", { class: "text" }, userText(value)));
          else if (value.role === "assistant") {
            element = assistantElement(value);
            for (const call of element.querySelectorAll("details.tool")) {
              elements.set(`call:${call.dataset.call}`, call);
            }
          }
          else {
            element = toolCallElement({ id: value.toolCallId, name: value.toolName, arguments: {} });
            fillResult(element, value);
          }
          element.dataset.sequence = message.sequence;
          elements.set(message.id, element);
        }
        order.push(element);
      } else {
        const key = `${item.kind}:${item.key}`;
        let element = elements.get(key);
        if (!element) {
          element = item.kind === "terminal" ? terminalElement(item.terminal) : retryElement(item.retry);
          elements.set(key, element);
        }
        order.push(element);
      }
    }
    if (state.progress) {
      streamingView.update(state.progress.text);
      replace(streamingCut, state.progress.textTruncated ? "…" : "");
      streamingThinking.hidden = !state.progress.thinking;
      if (streamingThinkingText.textContent !== state.progress.thinking) {
        replace(streamingThinkingText, state.progress.thinking);
      }
      streaming.hidden = false;
      order.push(streaming);
    } else {
      streaming.hidden = true;
    }
    // Moving existing nodes keeps their state (an opened tool call stays open).
    order.forEach((element, at) => {
      if (transcript.children[at] !== element) transcript.insertBefore(element, transcript.children[at] || null);
    });
    while (transcript.children.length > order.length) transcript.lastChild.remove();

    const current = state.activity || {};
    const queue = current.queue || { state: "idle" };
    let line = { idle: "Idle", queued: "Queued", running: "Working" }[queue.state] || queue.state;
    if (current.activeTool) line += ` — running ${current.activeTool}`;
    if (current.cancellationRequested) line += " (stopping…)";
    replace(activity, line);
    activity.dataset.state = queue.state;
    const output = current.toolOutput;
    if (output && output.tool === current.activeTool) {
      if (toolOutput.textContent !== output.text) replace(toolOutput, output.text);
      toolOutput.dataset.tool = output.tool;
      toolOutput.hidden = false;
    } else {
      toolOutput.hidden = true;
    }
    if (current.retry) {
      replace(retryBanner, retryElement(current.retry).textContent);
      retryBanner.hidden = false;
    } else {
      retryBanner.hidden = true;
    }
    abortButton.disabled = !state.running();
    replace(
      pending,
      state.pending.prompts.map((p) =>
        h("li", {}, h("span", { class: "badge" }, p.delivery === "steer" ? "steer" : "queued"), " ", p.text),
      ),
    );
    renderFooter(footer, state.footer, state.extensions, { sessionId: id, routes });
    if (nearBottom) window.scrollTo(0, document.body.scrollHeight);
  };

  // The title is the inbox's: read once the Session is shown, and again after updates
  // until its first prompt has given it one.
  let titled = false;
  let reading = false;
  const readTitle = async () => {
    if (titled || reading) return;
    reading = true;
    try {
      const title = await findTitle(routes, id);
      // Found with its title, or not among the pages read: either way, stop asking.
      if (title !== "") titled = true;
      if (title) header.setTitle(title);
    } catch {
      // The header keeps "New session"; the next update asks again.
    } finally {
      reading = false;
    }
  };

  const stop = routes.watch(id, {
    snapshot: (snapshot) => {
      readTitle();
      state.applySnapshot(snapshot);
      // A new baseline may drop entries the page showed: start the transcript over.
      elements.clear();
      transcript.replaceChildren();
      render();
    },
    frame: (frame) => {
      if (frame.kind === "reset") {
        elements.clear();
        transcript.replaceChildren();
      }
      state.applyFrame(frame);
      if (frame.kind === "update") readTitle();
      render();
    },
    connected: (up) => replace(connection, up ? "" : "reconnecting…"),
    closed: (reason) => replace(connection, `stream closed: ${reason}`),
  });
  prompt.focus();
  return stop;
}
