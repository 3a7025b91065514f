// Runs a whistle.catalog/v1 command the server advertises (GET /v1/catalogs),
// without knowing the extension: a server-owned `flow` step by step (ask, confirm,
// unavailable; docs/wire.md "Flows"), or the command's `steps`. The final call goes
// through call_extension with a fresh requestId. One form at a time, in `container`.

import { requestId, routesOf } from "./api.js";
import { h, replace } from "./dom.js";

/** Most steps one flow may take before the page gives up (as `shiitake chat`). */
export const MAX_FLOW_STEPS = 32;

/** Writes labels as one value: comma-separated, quoted when a label holds `,` `"` `\` or edge spaces. */
export function formatLabels(labels) {
  return labels
    .map((label) =>
      /[,"\\]/.test(label) || label.trim() !== label
        ? `"${label.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`
        : label,
    )
    .join(", ");
}

let cancelCurrent = null;

/** Shows `children` as the open form; resolves with what `wire(resolve)` resolves, or null on Cancel. */
function form(container, title, build) {
  if (cancelCurrent) cancelCurrent();
  return new Promise((resolve) => {
    const finish = (value) => {
      cancelCurrent = null;
      if (value === null) replace(container);
      resolve(value);
    };
    cancelCurrent = () => finish(null);
    const cancel = h("button", { type: "button", class: "link", onclick: () => finish(null) }, "Cancel");
    const body = build(finish);
    replace(container, h("form", { class: "flow-form", id: "flow-form", onsubmit: (e) => e.preventDefault() }, h("h3", {}, title), body, cancel));
    const first = container.querySelector("input, textarea, button");
    if (first) first.focus();
  });
}

/** Asks `prompt` for a value of `kind`; resolves to the text the call takes, or null. */
export function ask(container, prompt, kind) {
  return form(container, prompt, (finish) => {
    const hint = h("div", { class: "error-text" });
    if (kind.type === "choice") {
      const type = kind.multiple ? "checkbox" : "radio";
      const options = kind.choices.map((choice, at) =>
        h(
          "label",
          { class: "choice" },
          h("input", { type, name: "choice", value: String(at), dataset: { label: choice.label } }),
          " ",
          choice.label,
        ),
      );
      const own = kind.freeText ? h("input", { type: "text", class: "free-text", placeholder: "or your own words" }) : null;
      const submit = h(
        "button",
        {
          type: "submit",
          class: "primary",
          id: "flow-continue",
          onclick: () => {
            if (own && own.value.trim()) return finish(own.value.trim());
            const picked = options
              .map((option) => option.querySelector("input"))
              .filter((input) => input.checked)
              .map((input) => kind.choices[Number(input.value)].value);
            if (!picked.length) return replace(hint, "Pick one" + (own ? " or write your own." : "."));
            finish(kind.multiple ? formatLabels(picked) : picked[0]);
          },
        },
        "Continue",
      );
      return [h("div", { class: "choices" }, options), own, hint, submit];
    }
    const input =
      kind.type === "text"
        ? h("textarea", { rows: 2, class: "free-text" })
        : h("input", { type: kind.type === "integer" ? "number" : "text", class: "free-text", placeholder: kind.type === "boolean" ? "yes or no" : "" });
    const submit = h(
      "button",
      {
        type: "submit",
        class: "primary",
        id: "flow-continue",
        onclick: () => {
          const text = input.value;
          if (kind.type === "text" && new TextEncoder().encode(text).length > kind.maxBytes)
            return replace(hint, `At most ${kind.maxBytes} bytes.`);
          finish(text);
        },
      },
      "Continue",
    );
    return [input, hint, submit];
  });
}

/** Shows `summary`; resolves true when the person confirms. */
export function confirm(container, summary) {
  return form(container, "Confirm", (finish) => [
    h("p", { class: "summary" }, summary),
    h("button", { type: "submit", class: "primary", id: "flow-confirm", onclick: () => finish(true) }, "Confirm"),
  ]).then((value) => value === true);
}

function say(container, text, kind = "") {
  replace(container, h("div", { class: `flow-message ${kind}`, id: "flow-message" }, text, " ", h("button", { class: "link", onclick: () => replace(container) }, "Close")));
}

/** The value of an argument of a `steps` command, as its kind takes it. */
export function argumentValue(kind, text) {
  if (kind.type === "integer") {
    if (!/^\s*-?\d+\s*$/.test(text)) throw new Error(`${JSON.stringify(text)} is not a whole number`);
    return Number(text.trim());
  }
  if (kind.type === "boolean") {
    const word = text.trim().toLowerCase();
    if (["y", "yes", "true"].includes(word)) return true;
    if (["n", "no", "false"].includes(word)) return false;
    throw new Error(`${JSON.stringify(text)} is not yes or no`);
  }
  return text;
}

/**
 * Runs catalog command `name` for Session `sessionId` of the Agent whose `routes` these
 * are, asking in `container`; `preset` fills arguments up front (e.g. `{askId}` to
 * answer one question).
 */
export async function runCommand({ sessionId, routes, name, preset = {}, container }) {
  try {
    const catalogs = await routes.agent.catalogs();
    let entry = null;
    let command = null;
    for (const candidate of catalogs.catalogs) {
      const found = candidate.catalog.commands.find((c) => c.name === name);
      if (found) {
        entry = candidate;
        command = found;
        break;
      }
    }
    if (!command) return say(container, `No /${name} command here.`, "error-text");
    if (entry.state && entry.state.status === "stopped")
      return say(container, `/${name} is stopped: ${entry.state.reason}`, "error-text");
    const extension = entry.catalog.extensionId;
    const call = (operation, input) =>
      command.scope === "agent"
        ? routes.agent.callExtension(extension, operation, input)
        : routes.sessions.callExtension(sessionId, extension, operation, input);
    let input;
    if (command.flow) {
      input = await walkFlow(container, call, command.flow, preset);
    } else {
      input = await collect(container, command, preset);
    }
    // Cancelled, or the flow said why it cannot go on (its message stays shown).
    if (input === null) return;
    await call(command.call, { ...input, requestId: requestId() });
    say(container, `/${name}: done.`, "ok");
  } catch (error) {
    say(container, `/${name} failed: ${error.message}`, "error-text");
  }
}

/**
 * Runs a footer row's Flow action: catalog flow `action.flow` of `action.extensionId`
 * from `action.preset`, on `action.target` (a Session of this or another Agent, such as
 * a sub-agent's) or on this Session, then calls `action.call` with what it collected.
 */
export async function runFlow({ action, sessionId, routes, container }) {
  const target = action.target;
  const label = target ? `${action.label} @${target.agent}` : `/${action.call}`;
  try {
    const sessions = target ? routesOf(target.agent).sessions : routes.sessions;
    const session = target ? target.sessionId : sessionId;
    const call = (operation, input) => sessions.callExtension(session, action.extensionId, operation, input);
    const input = await walkFlow(container, call, action.flow, action.preset || {});
    if (input === null) return;
    await call(action.call, { ...input, requestId: requestId() });
    say(container, `${label}: done.`, "ok");
  } catch (error) {
    say(container, `${label} failed: ${error.message}`, "error-text");
  }
}

async function walkFlow(container, call, flow, preset) {
  const collected = { ...preset };
  for (let taken = 0; taken < MAX_FLOW_STEPS; taken += 1) {
    const step = await call(flow, collected);
    if (step.type === "ask") {
      const value = await ask(container, step.prompt, step.kind);
      if (value === null) return null;
      collected[step.argument] = value;
    } else if (step.type === "confirm") {
      return (await confirm(container, step.summary)) ? step.input : null;
    } else {
      say(container, step.message || "Nothing to do.", "unavailable");
      return null;
    }
  }
  throw new Error(`the flow took more than ${MAX_FLOW_STEPS} steps`);
}

async function collect(container, command, preset) {
  const input = {};
  for (const argument of command.arguments) {
    let text;
    if (argument.name in preset) {
      input[argument.name] = preset[argument.name];
      continue;
    }
    const step = (command.steps || []).find((s) => s.argument === argument.name);
    if (!step) continue;
    text = await ask(container, step.prompt, argument.kind);
    if (text === null) return null;
    if (!text.trim() && !argument.required) continue;
    input[argument.name] = argumentValue(argument.kind, text);
  }
  return input;
}
