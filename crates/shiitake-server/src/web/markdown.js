// Markdown answers as DOM nodes, safe by construction.
//
// markdown-it (vendored, `cargo xtask web-vendor`) parses CommonMark with GitHub's
// tables and strikethrough into tokens; this module builds elements from those
// tokens itself with the DOM API, from a fixed list of tags, so no HTML string sink
// is ever used and raw HTML in a message (parsed with `html: false`) stays text.
// Links keep only http, https and mailto targets, open with rel="noopener
// noreferrer" and show their real address when the text says something else;
// images are never fetched (their alt text and address are shown instead), so an
// answer cannot make the browser call a URL. Task lists (`- [x]`) are read here.
// `docs/web.md` says why markdown-it, and the bounds.

import { MarkdownIt } from "./markdown-it.js";
import { h } from "./dom.js";

/** Longer text is shown as plain text: parsing stays well under a second. */
export const MAX_MARKDOWN_CHARS = 100000;

/** markdown-it's token nesting bound: 20 nested lists or quotes, deeper content is cut. */
export const MAX_NESTING = 40;

const parser = new MarkdownIt("default", {
  html: false,
  linkify: true,
  breaks: true,
  typographer: false,
  maxNesting: MAX_NESTING,
});

/** Targets a link may have; anything else (javascript:, data:, relative) is shown as text. */
const LINK_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);

/** The absolute address `href` names when its scheme is allowed, else null. */
export function safeHref(href) {
  let url;
  try {
    url = new URL(href);
  } catch {
    return null;
  }
  return LINK_PROTOCOLS.has(url.protocol) ? url.href : null;
}

/** Whether a link's visible text already is its address (an autolink, `www.x.org`). */
function sayAddress(text, href) {
  const bare = (value) =>
    value
      .trim()
      .replace(/^(https?:\/\/|mailto:)/i, "")
      .replace(/\/$/, "")
      .toLowerCase();
  return bare(text) === bare(href) || bare(text) === bare(decodeSafely(href));
}

function decodeSafely(text) {
  try {
    return decodeURI(text);
  } catch {
    return text;
  }
}

const BLOCK_TAGS = {
  blockquote_open: "blockquote",
  bullet_list_open: "ul",
  ordered_list_open: "ol",
  list_item_open: "li",
  thead_open: "thead",
  tbody_open: "tbody",
  tr_open: "tr",
  th_open: "th",
  td_open: "td",
};
const HEADINGS = new Set(["h1", "h2", "h3", "h4", "h5", "h6"]);
const INLINE_TAGS = { strong_open: "strong", em_open: "em", s_open: "s" };
const ALIGN = /text-align:\s*(left|center|right)/;
const TASK = /^\[([ xX])\][ \t]/;

/** `- [ ] x` / `- [x] x`: marks the list item and drops the box from its text. */
function readTasks(tokens) {
  for (let at = 2; at < tokens.length; at += 1) {
    const inline = tokens[at];
    if (inline.type !== "inline" || tokens[at - 1].type !== "paragraph_open") continue;
    const item = tokens[at - 2];
    if (item.type !== "list_item_open") continue;
    const first = inline.children && inline.children[0];
    const match = first && first.type === "text" && first.content.match(TASK);
    if (!match) continue;
    first.content = first.content.slice(match[0].length);
    item.meta = { ...(item.meta || {}), task: match[1] !== " " ? "done" : "open" };
  }
}

/** A fenced or indented code block: monospace, scrolls sideways, with a copy button. */
export function codeBlock(content, info) {
  const language = (info || "").trim().split(/\s+/)[0] || "";
  const code = h("code", language ? { dataset: { lang: language } } : {}, content);
  const copy = h("button", { class: "copy link", type: "button", title: "Copy the code" }, "Copy");
  copy.addEventListener("click", () => copyText(content, copy, code));
  return h(
    "div",
    { class: "md-code" },
    h("div", { class: "md-code-head" }, h("span", { class: "lang muted" }, language || null), copy),
    h("pre", {}, code),
  );
}

/**
 * Copies `text` and says so on `button`; where the clipboard is refused (no focus, no
 * permission), selects `element` so Ctrl+C copies it.
 */
export async function copyText(text, button, element) {
  const label = button.textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    const range = document.createRange();
    range.selectNodeContents(element);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    button.textContent = "Selected: Ctrl+C copies";
  }
  setTimeout(() => (button.textContent = label), 1500);
}

/** The address of a link or image, shown as text (a link itself when its scheme is allowed). */
function addressElement(href) {
  const safe = safeHref(href);
  if (!safe) return h("span", { class: "md-href refused", title: "not opened: only http, https and mailto links" }, href);
  return h("a", { href: safe, rel: "noopener noreferrer", target: "_blank", class: "md-href" }, safe);
}

/** Plain text of inline tokens (an image's alt text). */
function inlineText(tokens) {
  return (tokens || []).map((token) => (token.children ? inlineText(token.children) : token.content)).join("");
}

/** Appends the elements of inline `tokens` to `parent`; nesting is bounded by the parser. */
function appendInline(parent, tokens) {
  const stack = [parent];
  const links = [];
  const top = () => stack[stack.length - 1];
  for (const token of tokens || []) {
    if (token.type === "link_open") {
      const href = token.attrGet("href") || "";
      const safe = safeHref(href);
      const element = safe
        ? h("a", { href: safe, rel: "noopener noreferrer", target: "_blank", title: safe })
        : h("span", { class: "md-link refused" });
      top().appendChild(element);
      stack.push(element);
      links.push({ element, href, safe });
    } else if (token.type === "link_close") {
      const link = links.pop();
      if (stack.length > 1) stack.pop();
      if (link && !(link.safe && sayAddress(link.element.textContent, link.safe))) {
        top().append(" (", addressElement(link.href), ")");
      }
    } else if (token.nesting === 1) {
      // strong, em, s; an opener this module does not know is a plain span.
      const element = h(INLINE_TAGS[token.type] || "span");
      top().appendChild(element);
      stack.push(element);
    } else if (token.nesting === -1) {
      if (stack.length > 1) stack.pop();
    } else if (token.type === "code_inline") {
      top().appendChild(h("code", {}, token.content));
    } else if (token.type === "softbreak" || token.type === "hardbreak") {
      top().appendChild(h("br"));
    } else if (token.type === "image") {
      // Never an <img>: showing it would make the browser fetch what the model named.
      const alt = inlineText(token.children) || "image";
      top().appendChild(
        h("span", { class: "md-image" }, h("span", { class: "md-image-alt" }, `[image: ${alt}]`), " ", addressElement(token.attrGet("src") || "")),
      );
    } else {
      // text, html_inline (literal, since html is off) and anything unknown: as text.
      if (token.content) top().appendChild(document.createTextNode(token.content));
    }
  }
}

/** The element of one opening block token (or null for a tight list's hidden paragraph). */
function blockElement(token) {
  if (token.type === "paragraph_open") return token.hidden ? null : h("p");
  if (token.type === "heading_open") return h(HEADINGS.has(token.tag) ? token.tag : "h6");
  if (token.type === "table_open") return h("table");
  const tag = BLOCK_TAGS[token.type];
  if (!tag) return h("div");
  const element = h(tag);
  if (token.type === "ordered_list_open") {
    const start = Number.parseInt(token.attrGet("start") || "1", 10);
    if (Number.isSafeInteger(start) && start !== 1) element.setAttribute("start", String(start));
  } else if (token.type === "list_item_open" && token.meta && token.meta.task) {
    element.classList.add("task");
    element.appendChild(h("input", { type: "checkbox", disabled: true, checked: token.meta.task === "done" }));
  } else if (tag === "th" || tag === "td") {
    const align = (token.attrGet("style") || "").match(ALIGN);
    if (align) element.classList.add(`align-${align[1]}`);
  }
  return element;
}

/** The element of tokens `from..to` (one top-level block) of `tokens`. */
function buildBlock(tokens, from, to) {
  const root = h("div");
  const stack = [root];
  const top = () => stack[stack.length - 1];
  for (let at = from; at < to; at += 1) {
    const token = tokens[at];
    if (token.nesting === 1) {
      const element = blockElement(token);
      if (element) {
        // A table scrolls sideways inside its own box, not the page.
        top().appendChild(token.type === "table_open" ? h("div", { class: "md-table" }, element) : element);
        if (token.type === "bullet_list_open" || token.type === "ordered_list_open") {
          if (hasTasks(tokens, at)) element.classList.add("tasks");
        }
      }
      stack.push(element || top());
    } else if (token.nesting === -1) {
      if (stack.length > 1) stack.pop();
    } else if (token.type === "inline") {
      appendInline(top(), token.children);
    } else if (token.type === "fence" || token.type === "code_block") {
      top().appendChild(codeBlock(token.content, token.info));
    } else if (token.type === "hr") {
      top().appendChild(h("hr"));
    } else {
      // html_block (literal, since html is off) and anything unknown: as text.
      top().appendChild(h("p", {}, token.content));
    }
  }
  return root.firstChild || h("div");
}

/** Whether the list opened at `at` has a task item directly in it. */
function hasTasks(tokens, at) {
  const level = tokens[at].level + 1;
  for (let next = at + 1; next < tokens.length && tokens[next].level >= level; next += 1) {
    const token = tokens[next];
    if (token.level === level && token.type === "list_item_open" && token.meta && token.meta.task) return true;
  }
  return false;
}

/** Top-level blocks of `tokens`: `{from, to, lines: [start, end)}`. */
function topLevel(tokens) {
  const blocks = [];
  let at = 0;
  while (at < tokens.length) {
    const from = at;
    if (tokens[at].nesting === 1) {
      let depth = 0;
      do {
        depth += tokens[at].nesting;
        at += 1;
      } while (at < tokens.length && depth > 0);
    } else {
      at += 1;
    }
    blocks.push({ from, to: at, lines: tokens[from].map || [0, 0] });
  }
  return blocks;
}

/** Parses `text`: its tokens, the top-level blocks and what every block's rendering also depends on. */
function parse(text) {
  const env = {};
  const tokens = parser.parse(text, env);
  readTasks(tokens);
  return { tokens, blocks: topLevel(tokens), shared: JSON.stringify(env.references || {}) };
}

/** `text` too long to parse: shown as it is, with a note. */
function plainElement(text) {
  return h(
    "div",
    { class: "md-plain" },
    h("p", { class: "muted" }, `Shown as plain text: longer than ${MAX_MARKDOWN_CHARS} characters.`),
    h("div", { class: "plain-text" }, text),
  );
}

/**
 * Renders Markdown into one element and re-renders it as the text grows: a top-level
 * block whose source did not change keeps its node, so a streamed answer only
 * rebuilds its last block (no flicker, an opened thing stays open). An unfinished
 * code fence renders as code to the end of the text, as CommonMark reads it.
 */
export class MarkdownView {
  constructor(element = h("div", { class: "markdown" })) {
    this.element = element;
    this.element.classList.add("markdown");
    /** `{key, node}` of each top-level block shown. */
    this.shown = [];
    this.plain = false;
  }

  /** Shows `text`. */
  update(text) {
    if (text.length > MAX_MARKDOWN_CHARS) {
      this.shown = [];
      this.plain = true;
      this.element.replaceChildren(plainElement(text));
      return;
    }
    if (this.plain) {
      this.element.replaceChildren();
      this.plain = false;
    }
    const { tokens, blocks, shared } = parse(text);
    const lines = text.split("\n");
    const next = blocks.map((block) => ({
      block,
      key: `${shared}\u0000${tokens[block.from].type}\u0000${lines.slice(block.lines[0], block.lines[1]).join("\n")}`,
    }));
    next.forEach(({ block, key }, at) => {
      const old = this.shown[at];
      if (old && old.key === key) return;
      const node = buildBlock(tokens, block.from, block.to);
      if (old) this.element.replaceChild(node, old.node);
      else this.element.appendChild(node);
      this.shown[at] = { key, node };
    });
    for (const gone of this.shown.splice(next.length)) gone.node.remove();
  }
}

/** `text` rendered once: an element `div.markdown`. */
export function renderMarkdown(text) {
  const view = new MarkdownView();
  view.update(text);
  return view.element;
}
