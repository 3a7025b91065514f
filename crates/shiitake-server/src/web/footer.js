// The footer: what the extensions publish about the Session (goal, plan, subagent
// rows, open questions, stopped extensions) and the commands they offer. Answers
// go through the catalog flow (flow.js), never around it.

import { defaultAgent, requestId } from "./api.js";
import { h, replace } from "./dom.js";
import { runAction, runCommand } from "./flow.js";

/** The extension ids the footer knows how to show; others appear only when stopped. */
export const GOAL = "botanical-session-goal";
export const PLAN = "botanical-session-plan";
export const QUESTION = "botanical-session-question";
export const SUBAGENTS = "botanical-session-subagents";

function running(extensions, id) {
  const slot = extensions[id];
  return slot && slot.status === "running" ? slot.value : null;
}

function goalRow(goal) {
  if (!goal || !goal.objective) return null;
  const state = goal.state || goal.status;
  return h("div", { class: "row goal", id: "footer-goal" }, h("span", { class: "label" }, "Goal"), goal.objective, state ? h("span", { class: "badge" }, state) : null);
}

function planRows(plan, context) {
  const footer = plan && plan.footer;
  if (!footer) return [];
  const act = async (command, input) => {
    try {
      await context.routes.sessions.callExtension(context.sessionId, PLAN, command, { ...input, requestId: requestId() });
    } catch (error) {
      context.problem(`Plan: ${error.message}`);
    }
  };
  const rows = [
    h(
      "div",
      { class: "row plan", id: "footer-plan" },
      h("span", { class: "label" }, "Plan"),
      h("span", { class: "progress-text" }, `${footer.completed}/${footer.total}`),
      h("progress", { max: footer.total || 1, value: footer.completed }),
      footer.current ? h("span", { class: "current" }, footer.current) : null,
      footer.expanded ? null : h("button", { class: "link", onclick: () => act("plan", { action: "open" }) }, "Checklist"),
      (footer.actions || []).map((action) =>
        h("button", { class: "link", onclick: () => act(action.command, action.input || {}) }, action.label),
      ),
    ),
  ];
  if (footer.expanded && footer.steps) {
    const marks = { completed: "[x]", in_progress: "[>]", pending: "[ ]" };
    rows.push(
      h("ol", { class: "steps" }, footer.steps.map((step) => h("li", { class: `step-${step.status}` }, `${marks[step.status] || "[ ]"} ${step.step}`))),
    );
  }
  return rows;
}

/** A child's status in words: `working`, `waiting on main`, `needs you`, ... */
function statusWords(status) {
  switch (status.kind) {
    case "waiting_on":
      return `waiting on ${status.agent}`;
    case "needs_you":
      return "needs you";
    default:
      return String(status.kind || "unavailable");
  }
}

/**
 * Subagent rows (the subagents extension's footer view): one per Agent this Session
 * sent work to, or one summary row when `/agents` collapsed them (amber when a child
 * needs a person). A child whose question needs a person gets its Answer action, which
 * runs the question's own flow on the child's Session.
 */
function subagentRows(view, context) {
  if (!view) return [];
  const toggle = async () => {
    try {
      await context.routes.sessions.callExtension(context.sessionId, SUBAGENTS, "toggle", { requestId: requestId() });
    } catch (error) {
      context.problem(`Agents: ${error.message}`);
    }
  };
  if (view.collapsed) {
    const s = view.summary || {};
    const parts = [
      [s.needsYou, "need you"],
      [s.working, "working"],
      [s.waiting, "waiting on an Agent"],
      [s.failed, "failed"],
      [s.unavailable, "unavailable"],
      [s.idle, "idle"],
    ]
      .filter(([count]) => count > 0)
      .map(([count, words]) => `${count} ${words}`);
    return [
      h(
        "div",
        { class: `row subagents-summary tone-${s.tone || "calm"}`, id: "footer-agents" },
        h("span", { class: "label" }, "Agents"),
        `${s.total || 0} (${parts.join(", ")})`,
        h("button", { class: "link", onclick: toggle }, "Expand"),
      ),
    ];
  }
  const rows = (view.rows || []).map((row) => {
    const status = row.status || { kind: "unavailable" };
    const question = status.kind === "needs_you" ? status.question : null;
    // A child of the page's own (default) Agent opens at `#/s/<id>`, one of another
    // Agent at `#/a/<agent>/s/<id>`; a server of one Agent (no directory) has no Open.
    const open = h("a", { class: "link open", hidden: true }, "Open");
    defaultAgent().then((name) => {
      if (name === null) return;
      const session = `s/${encodeURIComponent(row.sessionId)}`;
      open.href = name === row.agent ? `#/${session}` : `#/a/${encodeURIComponent(row.agent)}/${session}`;
      open.hidden = false;
    });
    return h(
      "div",
      {
        class: `row subagent state-${status.kind}`,
        dataset: { agent: row.agent },
        title: status.kind === "unavailable" ? status.reason || "" : "",
      },
      h("span", { class: "label" }, row.agent),
      row.title ? h("span", { class: "muted" }, ` ${row.title} `) : null,
      h("span", { class: `badge state-${status.kind}` }, statusWords(status)),
      question ? ` ${question.text}` : "",
      question
        ? h("button", { class: "answer primary", onclick: () => context.answer(question.answer) }, question.answer.label)
        : null,
      open,
    );
  });
  if (rows.length) {
    rows.push(
      h(
        "div",
        { class: "row subagents-more" },
        view.more > 0 ? `+${view.more} more ` : "",
        h("button", { class: "link", onclick: toggle }, "Collapse"),
      ),
    );
  }
  return rows;
}

function questionRows(question, context) {
  if (!question || !Array.isArray(question.asks)) return [];
  return question.asks.map((ask) => {
    const first = ask.questions[0] || { header: "", question: "" };
    const more = ask.questions.length > 1 ? ` (+${ask.questions.length - 1} more)` : "";
    const needsPerson = !ask.waitingOn || ask.waitingOn.escalated;
    return h(
      "div",
      { class: "row question", dataset: { ask: ask.askId } },
      h("span", { class: "label" }, "?"),
      h("span", { class: "header" }, first.header),
      ` ${first.question}${more}`,
      needsPerson
        ? h("button", { class: "answer primary", onclick: () => context.run("answer", { askId: ask.askId }) }, "Answer")
        : h("span", { class: "muted" }, ` waiting on ${ask.waitingOn.agent}`),
    );
  });
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

/** (Re)draws `footer` for these extension slots; an open form survives the redraw. */
export function renderFooter(footer, extensions, { sessionId, routes }) {
  let rows = footer.querySelector(".rows");
  let flow = footer.querySelector(".flow");
  if (!rows) {
    rows = h("div", { class: "rows" });
    flow = h("div", { class: "flow", id: "flow" });
    const problem = h("div", { class: "error-text" });
    footer.append(rows, h("div", { class: "footer-actions" }, h("button", { class: "link", id: "commands", onclick: () => commandMenu(flow, footer.context) }, "Commands"), problem), flow);
    footer.problemArea = problem;
  }
  footer.context = {
    sessionId,
    routes,
    run: (name, preset) => runCommand({ sessionId, routes, name, preset, container: flow }),
    answer: (action) => runAction({ action, container: flow }),
    problem: (text) => replace(footer.problemArea, text),
  };
  const key = JSON.stringify(extensions);
  if (footer.lastKey === key) return;
  footer.lastKey = key;
  replace(
    rows,
    goalRow(running(extensions, GOAL)),
    planRows(running(extensions, PLAN), footer.context),
    subagentRows(running(extensions, SUBAGENTS), footer.context),
    questionRows(running(extensions, QUESTION), footer.context),
    stoppedRows(extensions),
  );
}
