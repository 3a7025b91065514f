// The inbox: every Session, those that need you first, each state in its colour.

import { sessions } from "./api.js";
import { ago, h, replace } from "./dom.js";

/** Display order of inbox states: what needs a person comes first. */
export const STATE_ORDER = ["needs_you", "errored", "running", "done", "unavailable"];

const LABELS = {
  needs_you: "needs you",
  errored: "errored",
  running: "running",
  done: "done",
  unavailable: "unavailable",
};

/** Rows sorted by state (STATE_ORDER), then most recent activity first. */
export function sortRows(rows) {
  const rank = (row) => {
    const at = STATE_ORDER.indexOf(row.state);
    return at === -1 ? STATE_ORDER.length : at;
  };
  return [...rows].sort(
    (a, b) => rank(a) - rank(b) || (b.lastActivityAt || 0) - (a.lastActivityAt || 0),
  );
}

/** Reads every page of the inbox (at most `maxPages` of 100 rows). */
async function allRows(maxPages = 10) {
  const rows = [];
  let after = null;
  for (let page = 0; page < maxPages; page += 1) {
    const answer = await sessions.list(after);
    rows.push(...answer.sessions);
    if (!answer.next) break;
    after = answer.next;
  }
  return rows;
}

/** Renders the inbox into `root`; `open(id)` opens a Session. Returns a refresh function. */
export function showInbox(root, open) {
  const list = h("ul", { class: "inbox", id: "inbox" });
  const status = h("p", { class: "muted" }, "Loading…");
  const create = h(
    "button",
    {
      id: "new-session",
      class: "primary",
      onclick: async () => {
        create.disabled = true;
        try {
          const created = await sessions.create();
          open(created.sessionId);
        } catch (error) {
          replace(status, `Could not create a Session: ${error.message}`);
          create.disabled = false;
        }
      },
    },
    "New session",
  );
  replace(root, h("div", { class: "bar" }, h("h2", {}, "Inbox"), create), status, list);

  const refresh = async () => {
    let rows;
    try {
      rows = sortRows(await allRows());
    } catch (error) {
      replace(status, `Could not load the inbox: ${error.message}`);
      return;
    }
    replace(status, rows.length ? "" : "No Sessions yet. Start one with New session.");
    replace(
      list,
      rows.map((row) =>
        h(
          "li",
          { class: `row state-${row.state}`, dataset: { session: row.sessionId, state: row.state } },
          h(
            "button",
            {
              class: "open",
              disabled: row.state === "unavailable",
              onclick: () => open(row.sessionId),
            },
            h("span", { class: `badge state-${row.state}` }, LABELS[row.state] || row.state),
            h("span", { class: "title" }, row.title || row.sessionId),
            h("span", { class: "when muted" }, ago(row.lastActivityAt)),
          ),
        ),
      ),
    );
  };
  return refresh;
}
