// The page's entry: `#/` shows the inbox, `#/s/<sessionId>` a Session, and
// `#/a/<agent>/s/<sessionId>` a Session of another Agent of the directory. When the
// server stops accepting the cookie, the page says how to log in again.

import { onLoggedOut } from "./api.js";
import { h, replace } from "./dom.js";
import { showInbox } from "./inbox.js";
import { showSession } from "./session.js";

const root = document.getElementById("app");
let leave = () => {};
let inboxTimer = null;

/** How often the inbox re-reads the Session list while it is shown (it has no stream). */
const INBOX_REFRESH_MS = 3000;

function route() {
  leave();
  leave = () => {};
  // `#/a/<agent>/s/<id>`: a Session of another Agent of the directory (a sub-agent's).
  const match = location.hash.match(/^#\/(?:a\/([^/]+)\/)?s\/(.+)$/);
  if (match) {
    const agentName = match[1] ? decodeURIComponent(match[1]) : null;
    const id = decodeURIComponent(match[2]);
    leave = showSession(root, id, { back: () => (location.hash = "#/"), agentName });
    document.title = agentName ? `Shiitake — ${agentName}: Session` : "Shiitake — Session";
  } else {
    const refresh = showInbox(root, (id) => (location.hash = `#/s/${encodeURIComponent(id)}`));
    refresh();
    inboxTimer = setInterval(refresh, INBOX_REFRESH_MS);
    leave = () => clearInterval(inboxTimer);
    document.title = "Shiitake — Inbox";
  }
}

onLoggedOut(() => {
  leave();
  leave = () => {};
  replace(
    root,
    h(
      "div",
      { class: "logged-out", id: "logged-out" },
      h("h2", {}, "Not logged in"),
      h("p", {}, "Open the login link that ", h("code", {}, "shiitake serve"), " printed (each link works once)."),
    ),
  );
});

window.addEventListener("hashchange", route);
route();
