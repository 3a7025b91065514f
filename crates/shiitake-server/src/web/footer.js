// The footer: the rows the Session's extensions describe (`footer` of snapshots and
// update frames; shiitake_protocol::footer), drawn without knowing which extension
// wrote them, one row per stopped extension, and the catalog's commands. A row's
// Answer-like actions go through the catalog flow it names (flow.js), never around it.

import { defaultAgent, requestId } from "./api.js";
import { h, replace } from "./dom.js";
import { runCommand, runFlow } from "./flow.js";

/** `HH:MM` of Unix milliseconds in the person's zone. */
function clockTime(millis) {
  const at = new Date(millis);
  const two = (n) => String(n).padStart(2, "0");
  return `${two(at.getHours())}:${two(at.getMinutes())}`;
}

/** The hash route of a Session: `#/s/<id>` in the page's own Agent, else `#/a/<agent>/s/<id>`. */
function sessionHref(pageAgent, target) {
  const session = `s/${encodeURIComponent(target.sessionId)}`;
  return pageAgent === target.agent ? `#/${session}` : `#/a/${encodeURIComponent(target.agent)}/${session}`;
}

/** One action of `row`: a button that calls a command or walks a flow, or a link that opens a Session. */
function actionElement(row, action, context) {
  const look = `${action.name} ${action.primary ? "primary" : "link"}`;
  switch (action.kind) {
    case "command":
      return h(
        "button",
        {
          class: look,
          onclick: async () => {
            try {
              const input = { ...(action.input || {}), requestId: requestId() };
              await context.routes.sessions.callExtension(context.sessionId, row.extensionId, action.command, input);
            } catch (error) {
              context.problem(`${action.label}: ${error.message}`);
            }
          },
        },
        action.label,
      );
    case "flow":
      return h("button", { class: look, onclick: () => context.flow(action) }, action.label);
    case "open": {
      // A server of one Agent (no directory) has no Session routes by name: no link.
      const link = h("a", { class: `${action.name} link open`, hidden: true }, action.label);
      defaultAgent().then((name) => {
        if (name === null) return;
        link.href = sessionHref(name, action.target);
        link.hidden = false;
      });
      return link;
    }
    default:
      return null;
  }
}

/** The Agent a row is about, when one of its actions opens another Agent's Session. */
function rowAgent(row) {
  const open = (row.actions || []).find((action) => action.target && action.target.agent);
  return open ? open.target.agent : undefined;
}

/** One row: its text, moment, note, progress and actions; its detail lines listed under it. */
function rowElements(row, context, ids) {
  const id = `footer-${row.key}`;
  const unique = !ids.has(id);
  ids.add(id);
  const agent = rowAgent(row);
  const line = h(
    "div",
    {
      class: `row ${row.kind} tone-${row.tone || "calm"}`,
      id: unique ? id : undefined,
      dataset: { extension: row.extensionId, key: row.key, ...(agent ? { agent } : {}) },
    },
    row.tone === "attention" ? h("span", { class: "mark", title: "Needs you" }, "!") : null,
    row.text ? h("span", { class: "text" }, row.text) : null,
    row.since ? h("span", { class: "since muted" }, ` since ${clockTime(row.since)}`) : null,
    row.note ? h("span", { class: "note muted" }, ` — ${row.note}`) : null,
    row.progress ? h("progress", { max: row.progress.total || 1, value: row.progress.done }) : null,
    (row.actions || []).map((action) => actionElement(row, action, context)),
  );
  if (!row.detail || !row.detail.length) return [line];
  return [line, h("ol", { class: "steps" }, row.detail.map((text) => h("li", {}, text)))];
}

function stoppedRows(extensions) {
  return Object.entries(extensions)
    .filter(([, slot]) => slot.status === "stopped")
    .map(([id, slot]) => h("div", { class: "row stopped" }, h("span", { class: "label" }, id), `stopped: ${slot.reason}`));
}

/** Lists the catalog commands; picking one runs it in the flow area. */
async function commandMenu(area, context) {
  try {
    const catalogs = await context.routes.agent.catalogs();
    const buttons = [];
    for (const entry of catalogs.catalogs) {
      for (const command of entry.catalog.commands) {
        buttons.push(h("button", { class: "command", title: command.summary, onclick: () => context.run(command.name, {}) }, `/${command.name}`));
      }
    }
    replace(area, h("div", { class: "command-list" }, buttons.length ? buttons : "No commands.", h("button", { class: "link", onclick: () => replace(area) }, "Close")));
  } catch (error) {
    replace(area, h("div", { class: "error-text" }, `Commands: ${error.message}`));
  }
}

/** (Re)draws `footer` for these rows and extension slots; an open form survives the redraw. */
export function renderFooter(footer, rows, extensions, { sessionId, routes }) {
  let list = footer.querySelector(".rows");
  let flow = footer.querySelector(".flow");
  if (!list) {
    list = h("div", { class: "rows" });
    flow = h("div", { class: "flow", id: "flow" });
    const problem = h("div", { class: "error-text" });
    footer.append(list, h("div", { class: "footer-actions" }, h("button", { class: "link", id: "commands", onclick: () => commandMenu(flow, footer.context) }, "Commands"), problem), flow);
    footer.problemArea = problem;
  }
  footer.context = {
    sessionId,
    routes,
    run: (name, preset) => runCommand({ sessionId, routes, name, preset, container: flow }),
    flow: (action) => runFlow({ action, sessionId, routes, container: flow }),
    problem: (text) => replace(footer.problemArea, text),
  };
  const key = JSON.stringify([rows, extensions]);
  if (footer.lastKey === key) return;
  footer.lastKey = key;
  const ids = new Set();
  replace(
    list,
    (rows || []).map((row) => rowElements(row, footer.context, ids)),
    stoppedRows(extensions),
  );
}
