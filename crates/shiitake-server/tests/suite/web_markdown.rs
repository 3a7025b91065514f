//! Markdown in the web page, in headless Chromium: a corpus rendered by
//! `/web/markdown.js` compared node by node with the DOM it must build; hostile
//! Markdown (raw HTML, `javascript:` and relative links, images pointing at a local
//! server that records every request, 10,000 nested list levels, a 1 MB line) that
//! must run no script, trip no CSP rule, fetch nothing and leave the page
//! responsive; and a live Session whose streamed answer (a tool call, a table, code)
//! renders as it grows, with the Session's title in the header and its id copied.
//! Screenshots land in `<target>/tmp/web-page/` (`markdown-answer.png`,
//! `hostile-answer.png`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::support::Server;
use crate::support::page::{agent, run, served_page, shown, type_and_click};
use axum::Router;
use axum::http::Uri;
use serde_json::json;
use shiitake_chromium::{Chromium, Page, eval, screenshot, screenshot_full_page};
use shiitake_model::{Script, ScriptedModel, Step, Turn};

fn artifacts() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web-page")
}

/// A server on 127.0.0.1 that answers everything and records the path of every request.
struct Recorder {
    hits: Arc<Mutex<Vec<String>>>,
    server: Server,
}

impl Recorder {
    async fn start() -> Self {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let seen = hits.clone();
        let app = Router::new().fallback(move |uri: Uri| {
            seen.lock().unwrap().push(uri.to_string());
            async { "recorded" }
        });
        let server = Server::start(app, "127.0.0.1:0".parse().unwrap()).await;
        Self { hits, server }
    }

    fn url(&self) -> String {
        self.server.url()
    }

    fn hits(&self) -> Vec<String> {
        self.hits.lock().unwrap().clone()
    }
}

/// Helpers installed in the page: `shape(node)` writes a DOM tree as
/// `tag[attr=value](children)` with text as JSON strings; `audit(root)` lists every
/// element, attribute or link the renderer must never make; CSP violations are kept.
const HELPERS: &str = r#"
window.violations = [];
document.addEventListener('securitypolicyviolation', (e) => window.violations.push(`${e.violatedDirective} ${e.blockedURI}`));
window.shape = (node) => {
  if (node.nodeType === Node.TEXT_NODE) return JSON.stringify(node.data);
  let out = node.tagName.toLowerCase();
  for (const name of ['class', 'href', 'rel', 'target', 'start', 'type', 'checked', 'disabled', 'data-lang']) {
    if (node.hasAttribute(name)) out += `[${name}=${node.getAttribute(name)}]`;
  }
  return out + '(' + [...node.childNodes].map(window.shape).join(',') + ')';
};
window.audit = (root) => {
  const allowed = new Set(['div', 'p', 'strong', 'em', 's', 'code', 'pre', 'a', 'span', 'br', 'ul', 'ol', 'li',
    'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'hr', 'table', 'thead', 'tbody', 'tr', 'th', 'td',
    'input', 'button']);
  const problems = [];
  for (const element of root.querySelectorAll('*')) {
    const tag = element.tagName.toLowerCase();
    if (!allowed.has(tag)) problems.push(`tag ${tag}`);
    for (const attribute of element.attributes) {
      if (attribute.name.startsWith('on') || attribute.name === 'style' || attribute.name === 'src') problems.push(`attribute ${attribute.name} on ${tag}`);
    }
    if (tag === 'a') {
      if (!/^(https?:|mailto:)/.test(element.getAttribute('href') || '')) problems.push(`href ${element.getAttribute('href')}`);
      if (element.getAttribute('rel') !== 'noopener noreferrer') problems.push(`rel ${element.getAttribute('rel')}`);
    }
    if (tag === 'input' && !(element.type === 'checkbox' && element.disabled)) problems.push('a live input');
  }
  return problems;
};
window.nestedLists = (root) => {
  let depth = 0;
  for (let list = root.querySelector('ul'); list; list = list.querySelector(':scope > li > ul')) depth += 1;
  return depth;
};
"#;

/// `text` rendered by `/web/markdown.js`, as `shape` writes it.
async fn shape_of(page: &Page, text: &str) -> String {
    let text = serde_json::to_string(text).unwrap();
    eval(
        page,
        &format!("import('/web/markdown.js').then((m) => window.shape(m.renderMarkdown({text})))"),
    )
    .await
    .unwrap()
}

/// Markdown and the DOM it must become. `div[class=markdown](…)` is the rendered root.
fn corpus() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "The file says **hello world**.",
            r#"div[class=markdown](p("The file says ",strong("hello world"),"."))"#,
        ),
        (
            "# Title\n\n*it* _it_ ~~gone~~ `code` and a\nsecond line",
            r#"div[class=markdown](h1("Title"),p(em("it")," ",em("it")," ",s("gone")," ",code("code")," and a",br(),"second line"))"#,
        ),
        (
            "- one\n- two\n  - nested\n\n3. three\n4. four",
            r#"div[class=markdown](ul(li("one"),li("two",ul(li("nested")))),ol[start=3](li("three"),li("four")))"#,
        ),
        (
            "```rust\nfn main() {\n    println!(\"hi\");\n}\n```",
            r#"div[class=markdown](div[class=md-code](div[class=md-code-head](span[class=lang muted]("rust"),button[class=copy link][type=button]("Copy")),pre(code[data-lang=rust]("fn main() {\n    println!(\"hi\");\n}\n"))))"#,
        ),
        (
            "Unfinished:\n\n```py\nprint(1)",
            r#"div[class=markdown](p("Unfinished:"),div[class=md-code](div[class=md-code-head](span[class=lang muted]("py"),button[class=copy link][type=button]("Copy")),pre(code[data-lang=py]("print(1)"))))"#,
        ),
        (
            "    indented code",
            r#"div[class=markdown](div[class=md-code](div[class=md-code-head](span[class=lang muted](),button[class=copy link][type=button]("Copy")),pre(code("indented code\n"))))"#,
        ),
        (
            "| name | size |\n|:-----|-----:|\n| a.txt | 12 |\n| b.txt | 3 |",
            r#"div[class=markdown](div[class=md-table](table(thead(tr(th[class=align-left]("name"),th[class=align-right]("size"))),tbody(tr(td[class=align-left]("a.txt"),td[class=align-right]("12")),tr(td[class=align-left]("b.txt"),td[class=align-right]("3"))))))"#,
        ),
        (
            "- [x] done\n- [ ] open",
            r#"div[class=markdown](ul[class=tasks](li[class=task](input[type=checkbox][checked=][disabled=](),"done"),li[class=task](input[type=checkbox][disabled=](),"open")))"#,
        ),
        (
            "[docs](https://example.com/docs) <https://example.com> www.example.org <me@example.com>",
            r#"div[class=markdown](p(a[href=https://example.com/docs][rel=noopener noreferrer][target=_blank]("docs")," (",a[class=md-href][href=https://example.com/docs][rel=noopener noreferrer][target=_blank]("https://example.com/docs"),")"," ",a[href=https://example.com/][rel=noopener noreferrer][target=_blank]("https://example.com")," www.example.org ",a[href=mailto:me@example.com][rel=noopener noreferrer][target=_blank]("me@example.com")))"#,
        ),
        (
            "> quoted **text**\n\n---\n\nafter",
            r#"div[class=markdown](blockquote(p("quoted ",strong("text"))),hr(),p("after"))"#,
        ),
    ]
}

/// Hostile Markdown (`{rec}` is the recording server) and the DOM it must become.
fn hostile(rec: &str) -> Vec<(String, String)> {
    let cases = [
        (
            "<script>window.pwned = 1</script>",
            r#"div[class=markdown](p("<script>window.pwned = 1</script>"))"#,
        ),
        (
            "<img src=\"{rec}/html-img\" onerror=\"window.pwned = 2\">",
            // The address is linked (a link is never followed by itself); the tag stays text.
            r#"div[class=markdown](p("<img src=\"",a[href={rec}/html-img][rel=noopener noreferrer][target=_blank]("{rec}/html-img"),"\" onerror=\"window.pwned = 2\">"))"#,
        ),
        (
            "Inline <b onmouseover=\"window.pwned = 3\">html</b> and <iframe src=\"{rec}/frame\"></iframe>",
            r#"div[class=markdown](p("Inline <b onmouseover=\"window.pwned = 3\">html</b> and <iframe src=\"",a[href={rec}/frame][rel=noopener noreferrer][target=_blank]("{rec}/frame"),"\"></iframe>"))"#,
        ),
        (
            "[click me](javascript:window.pwned=4) [upper](JaVaScRiPt:window.pwned=5) [data](data:text/html;base64,PHNjcmlwdD4=)",
            r#"div[class=markdown](p("[click me](javascript:window.pwned=4) [upper](JaVaScRiPt:window.pwned=5) [data](data:text/html;base64,PHNjcmlwdD4=)"))"#,
        ),
        (
            "<javascript:window.pwned=6> <a href=\"javascript:window.pwned=7\">x</a>",
            r#"div[class=markdown](p("<javascript:window.pwned=6> <a href=\"javascript:window.pwned=7\">x</a>"))"#,
        ),
        (
            "[relative](/logout) [protocol-relative](//127.0.0.1:9/x)",
            r#"div[class=markdown](p(span[class=md-link refused]("relative")," (",span[class=md-href refused]("/logout"),")"," ",span[class=md-link refused]("protocol-relative")," (",span[class=md-href refused]("//127.0.0.1:9/x"),")"))"#,
        ),
        (
            "[https://bank.example](https://evil.example/login)",
            r#"div[class=markdown](p(a[href=https://evil.example/login][rel=noopener noreferrer][target=_blank]("https://bank.example")," (",a[class=md-href][href=https://evil.example/login][rel=noopener noreferrer][target=_blank]("https://evil.example/login"),")"))"#,
        ),
        (
            "![tracker]({rec}/md-image.png)",
            r#"div[class=markdown](p(span[class=md-image](span[class=md-image-alt]("[image: tracker]")," ",a[class=md-href][href={rec}/md-image.png][rel=noopener noreferrer][target=_blank]("{rec}/md-image.png"))))"#,
        ),
        (
            "![by reference][pic]\n\n[pic]: {rec}/ref-image.png",
            r#"div[class=markdown](p(span[class=md-image](span[class=md-image-alt]("[image: by reference]")," ",a[class=md-href][href={rec}/ref-image.png][rel=noopener noreferrer][target=_blank]("{rec}/ref-image.png"))))"#,
        ),
        (
            "![data](data:image/png;base64,iVBORw0KGgo=)",
            r#"div[class=markdown](p(span[class=md-image](span[class=md-image-alt]("[image: data]")," ",span[class=md-href refused]("data:image/png;base64,iVBORw0KGgo="))))"#,
        ),
        (
            "<style>body { display: none }</style>\n\n<svg onload=\"window.pwned = 8\"></svg>",
            r#"div[class=markdown](p("<style>body { display: none }</style>"),p("<svg onload=\"window.pwned = 8\"></svg>"))"#,
        ),
    ];
    cases
        .iter()
        .map(|(text, shape)| (text.replace("{rec}", rec), shape.replace("{rec}", rec)))
        .collect()
}

/// The hostile cases as one answer, with nesting and a long line near the bound.
fn hostile_answer(rec: &str) -> String {
    let mut parts: Vec<String> = hostile(rec).into_iter().map(|(text, _)| text).collect();
    parts.push(format!("{}deep", "- ".repeat(10_000)));
    parts.push("[".repeat(50_000));
    parts.join("\n\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markdown_renders_to_the_expected_dom_and_hostile_markdown_stays_inert() {
    let Some(chromium) = Chromium::launch_or_skip("web_markdown corpus")
        .await
        .unwrap()
    else {
        return;
    };
    let recorder = Recorder::start().await;
    let rec = recorder.url();
    let model = Arc::new(ScriptedModel::new(Script::new(Vec::new())));
    let (agent, _dir) = agent(model).await;
    let (server, _login) = served_page(agent).await;
    // The modules are public: they load without logging in.
    let page = chromium.open(&server.url(), &[]).await.unwrap();
    run(&page, HELPERS).await;

    let cases = corpus()
        .into_iter()
        .map(|(text, shape)| (text.to_owned(), shape.to_owned()))
        .chain(hostile(&rec));
    let mut wrong = Vec::new();
    for (text, expected) in cases {
        let shape = shape_of(&page, &text).await;
        if shape != expected {
            wrong.push(format!(
                "{text:?}\n  built:    {shape}\n  expected: {expected}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // Everything at once, in the document (where an <img> would load and a handler could fire).
    let answer = serde_json::to_string(&hostile_answer(&rec)).unwrap();
    let report: serde_json::Value = eval(
        &page,
        &format!(
            "import('/web/markdown.js').then(async (m) => {{ \
               const element = m.renderMarkdown({answer}); document.body.appendChild(element); \
               for (const node of element.querySelectorAll('*')) node.dispatchEvent(new MouseEvent('mouseover')); \
               await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 300))); \
               return {{problems: window.audit(element), pwned: window.pwned ?? null, \
                        violations: window.violations, nested: window.nestedLists(element), \
                        plain: element.querySelectorAll('.md-plain').length, \
                        resources: performance.getEntriesByType('resource').map((e) => e.name).filter((n) => n.startsWith({rec:?}))}}; }})"
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        report,
        json!({"problems": [], "pwned": null, "violations": [], "nested": 20, "plain": 0, "resources": []}),
        "nesting is cut at 20 lists (markdown-it's maxNesting 40)"
    );

    // The plain-text bound: 100,000 characters are Markdown, one more is plain text.
    let plain: Vec<bool> = eval(
        &page,
        "import('/web/markdown.js').then((m) => [m.MAX_MARKDOWN_CHARS, m.MAX_MARKDOWN_CHARS + 1, 1000000].map((n) => \
           m.renderMarkdown('*'.repeat(n)).querySelector('.md-plain') !== null))",
    )
    .await
    .unwrap();
    assert_eq!(plain, [false, true, true]);
    let long: serde_json::Value = eval(
        &page,
        "import('/web/markdown.js').then((m) => { const line = 'word '.repeat(200000) + '**'; \
           const element = m.renderMarkdown(line); document.body.appendChild(element); \
           return {length: element.querySelector('.plain-text').textContent.length, \
                   note: element.querySelector('.md-plain p').textContent}; })",
    )
    .await
    .unwrap();
    assert_eq!(
        long,
        json!({"length": 1_000_002, "note": "Shown as plain text: longer than 100000 characters."})
    );

    // Streaming re-renders only what changed: a finished block keeps its node.
    let kept: serde_json::Value = eval(
        &page,
        "import('/web/markdown.js').then((m) => { const view = new m.MarkdownView(); \
           view.update('First paragraph.\\n\\n```js\\nlet a'); \
           const first = view.element.firstChild; const code = view.element.children[1]; \
           view.update('First paragraph.\\n\\n```js\\nlet a = 1;\\n```\\n\\nDone.'); \
           return {firstKept: view.element.firstChild === first, codeRebuilt: view.element.children[1] !== code, \
                   blocks: view.element.children.length, code: view.element.querySelector('code').textContent}; })",
    )
    .await
    .unwrap();
    assert_eq!(
        kept,
        json!({"firstKept": true, "codeRebuilt": true, "blocks": 3, "code": "let a = 1;\n"})
    );

    // A long code line scrolls inside its block; the page itself does not scroll sideways.
    let scrolls: serde_json::Value = eval(
        &page,
        "import('/web/markdown.js').then((m) => { const element = m.renderMarkdown('```\\n' + 'x'.repeat(5000) + '\\n```');            document.body.appendChild(element); const pre = element.querySelector('pre');            return {inside: pre.scrollWidth > pre.clientWidth, page: document.documentElement.scrollWidth <= window.innerWidth,                    mono: getComputedStyle(pre.querySelector('code')).fontFamily.includes('monospace')}; })",
    )
    .await
    .unwrap();
    assert_eq!(scrolls, json!({"inside": true, "page": true, "mono": true}));

    // The page still answers, and nothing reached the recording server.
    let alive: i64 = eval(&page, "1 + 1").await.unwrap();
    assert_eq!(alive, 2);
    assert_eq!(
        recorder.hits(),
        Vec::<String>::new(),
        "the page fetched what an answer named"
    );
    // The control: the recorder does see a request the browser makes.
    let control = chromium.open(&format!("{rec}/control"), &[]).await.unwrap();
    shown(
        &control,
        "document.body && document.body.textContent === 'recorded'",
    )
    .await;
    // A top-level navigation may also ask the recorder for its icon, on its own.
    let hits: Vec<String> = recorder
        .hits()
        .into_iter()
        .filter(|hit| hit != "/favicon.ico")
        .collect();
    assert_eq!(hits, ["/control"]);

    chromium.close().await;
    server.stop().await;
}

const FIRST: &str = "Here is what notes.txt holds.";
/// The streamed answer: a paragraph, a table, a list and a Rust block.
const ANSWER: &str = "Here is what notes.txt holds.\n\n\
| file | lines | state |\n|:-----|------:|:-----:|\n| notes.txt | 12 | **read** |\n| todo.md | 4 | open |\n\n\
Two things stand out:\n\n1. The *schema* is not written yet.\n2. The tests use `SQLite`.\n\n\
```rust\nfn main() {\n    let notes = std::fs::read_to_string(\"notes.txt\").unwrap();\n    println!(\"{notes}\");\n}\n```\n\n\
See [the SQLite docs](https://sqlite.org/docs.html).";
const CODE: &str = "fn main() {\n    let notes = std::fs::read_to_string(\"notes.txt\").unwrap();\n    println!(\"{notes}\");\n}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_renders_as_markdown_under_the_sessions_title() {
    let Some(chromium) = Chromium::launch_or_skip("web_markdown session")
        .await
        .unwrap()
    else {
        return;
    };
    let plan = json!({"steps": [{"step": "Read notes.txt", "status": "completed"},
                                {"step": "Summarise it", "status": "in_progress"}]});
    let mut script = Script::new(vec![
        Turn::new(vec![
            Step::Text("Reading the notes first.".into()),
            Step::tool_call("plan__update_plan", plan),
        ]),
        Turn::text(ANSWER),
    ]);
    script.chunk_chars = 6;
    script.chunk_delay_ms = 25;
    let model = Arc::new(ScriptedModel::new(script));
    let (agent, _dir) = agent(model).await;
    let (server, login) = served_page(agent).await;
    let page = chromium
        .open(&login.login_url(&server.url()).unwrap(), &[])
        .await
        .unwrap();
    shown(&page, "document.getElementById('new-session')").await;
    run(&page, HELPERS).await;
    run(&page, "document.getElementById('new-session').click()").await;
    shown(&page, "document.getElementById('prompt')").await;
    shown(
        &page,
        "document.getElementById('session-title').textContent === 'New session'",
    )
    .await;

    // What the streaming bubble shows, frame by frame: the code so far, and every node
    // that showed the finished first paragraph.
    run(
        &page,
        &format!(
            "window.codes = []; window.firstNodes = new Set(); \
             new MutationObserver(() => {{ \
               const view = document.querySelector('#streaming:not([hidden]) .markdown'); if (!view) return; \
               const code = view.querySelector('.md-code code'); \
               if (code && !window.codes.includes(code.textContent)) window.codes.push(code.textContent); \
               const first = view.firstElementChild; if (first && first.textContent === {FIRST:?}) window.firstNodes.add(first); \
             }}).observe(document.getElementById('transcript'), {{subtree: true, childList: true, characterData: true}})"
        ),
    )
    .await;
    type_and_click(&page, "Read notes.txt and tabulate it", "send").await;
    shown(
        &page,
        "document.querySelector('.msg.assistant:not(.streaming) table')",
    )
    .await;
    shown(
        &page,
        "document.querySelector('.terminal.outcome-completed')",
    )
    .await;

    // The header: the inbox title, and the id copied by its button.
    shown(
        &page,
        "document.getElementById('session-title').textContent === 'Read notes.txt and tabulate it'",
    )
    .await;
    run(
        &page,
        "document.querySelectorAll('details.tool').forEach((d) => d.open = true)",
    )
    .await;
    screenshot_full_page(&page, &artifacts().join("markdown-answer.png"))
        .await
        .unwrap();
    let title: String = eval(&page, "document.title").await.unwrap();
    assert_eq!(title, "Shiitake — Read notes.txt and tabulate it");
    let copied: Vec<String> = eval(
        &page,
        "new Promise((resolve) => { navigator.clipboard.writeText = (text) => { resolve([text, location.hash]); return Promise.resolve(); }; \
           document.getElementById('session-id').click(); })",
    )
    .await
    .unwrap();
    assert_eq!(
        format!("#/s/{}", copied[0]),
        copied[1],
        "the id button copies the Session id"
    );

    // The committed answer, as a document.
    let answer: serde_json::Value = eval(
        &page,
        "(() => { const message = [...document.querySelectorAll('.msg.assistant:not(.streaming)')].pop(); \
           const view = message.querySelector('.markdown'); \
           return {blocks: [...view.children].map((e) => e.tagName.toLowerCase() + (e.className ? '.' + e.className : '')), \
                   cells: [...view.querySelectorAll('td')].map((e) => e.textContent), \
                   bold: [...view.querySelectorAll('td strong')].map((e) => e.textContent), \
                   code: view.querySelector('pre code').textContent, lang: view.querySelector('pre code').dataset.lang, \
                   link: [view.querySelector('a').href, view.querySelector('a').rel], \
                   problems: window.audit(view)}; })()",
    )
    .await
    .unwrap();
    assert_eq!(
        answer,
        json!({
            "blocks": ["p", "div.md-table", "p", "ol", "div.md-code", "p"],
            "cells": ["notes.txt", "12", "read", "todo.md", "4", "open"],
            "bold": ["read"],
            "code": CODE,
            "lang": "rust",
            "link": ["https://sqlite.org/docs.html", "noopener noreferrer"],
            "problems": [],
        })
    );
    // While it streamed: the fence rendered as code before it was closed, and the first
    // paragraph, once finished, kept its node.
    let codes: Vec<String> = eval(&page, "window.codes").await.unwrap();
    assert!(
        codes.iter().any(|code| !code.is_empty()
            && code.len() < CODE.len()
            && CODE.starts_with(code.as_str())),
        "an unfinished fence showed as code: {codes:?}"
    );
    let first_nodes: usize = eval(&page, "window.firstNodes.size").await.unwrap();
    assert_eq!(
        first_nodes, 1,
        "the finished first paragraph was rebuilt while streaming"
    );

    // The copy button of the code block copies its code.
    let copied: String = eval(
        &page,
        "new Promise((resolve) => { navigator.clipboard.writeText = (text) => { resolve(text); return Promise.resolve(); }; \
           [...document.querySelectorAll('.msg.assistant:not(.streaming) .md-code button.copy')].pop().click(); })",
    )
    .await
    .unwrap();
    assert_eq!(copied, CODE);

    chromium.close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_answers_in_a_session_fetch_nothing_and_the_page_stays_responsive() {
    let Some(chromium) = Chromium::launch_or_skip("web_markdown hostile")
        .await
        .unwrap()
    else {
        return;
    };
    let recorder = Recorder::start().await;
    let rec = recorder.url();
    let mut script = Script::new(vec![
        Turn::text(hostile_answer(&rec)),
        Turn::text(format!("{} the end", "word ".repeat(200_000))),
        Turn::text("Still here."),
    ]);
    // Large deltas: the 1 MB answer streams in a few frames.
    script.chunk_chars = 1 << 16;
    let model = Arc::new(ScriptedModel::new(script));
    let (agent, _dir) = agent(model).await;
    let (server, login) = served_page(agent).await;
    let page = chromium
        .open(&login.login_url(&server.url()).unwrap(), &[])
        .await
        .unwrap();
    shown(&page, "document.getElementById('new-session')").await;
    run(&page, HELPERS).await;
    run(&page, "document.getElementById('new-session').click()").await;
    shown(&page, "document.getElementById('prompt')").await;

    type_and_click(&page, "Show me something hostile", "send").await;
    shown(
        &page,
        "document.querySelectorAll('.terminal.outcome-completed').length === 1",
    )
    .await;
    type_and_click(&page, "Now one long line", "send").await;
    shown(
        &page,
        "document.querySelectorAll('.terminal.outcome-completed').length === 2",
    )
    .await;
    // Responsive: the prompt box still sends and the next answer shows.
    type_and_click(&page, "Are you there?", "send").await;
    shown(&page, "[...document.querySelectorAll('.msg.assistant .text')].some((e) => e.textContent === 'Still here.')").await;

    let report: serde_json::Value = eval(
        &page,
        &format!(
            "(() => {{ const transcript = document.getElementById('transcript'); \
               const views = [...transcript.querySelectorAll('.msg.assistant:not(.streaming) .markdown')]; \
               return {{problems: window.audit(transcript), pwned: window.pwned ?? null, violations: window.violations, \
                        nested: window.nestedLists(views[0]), plain: views.map((v) => v.querySelector('.md-plain') !== null), \
                        literal: views[0].textContent.includes('<script>window.pwned = 1</script>'), \
                        resources: performance.getEntriesByType('resource').map((e) => e.name).filter((n) => n.startsWith({rec:?}))}}; }})()"
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        report,
        json!({"problems": [], "pwned": null, "violations": [], "nested": 20,
               "plain": [false, true, false], "literal": true, "resources": []})
    );
    run(&page, "window.scrollTo(0, 0)").await;
    screenshot(&page, &artifacts().join("hostile-answer.png"))
        .await
        .unwrap();
    assert_eq!(
        recorder.hits(),
        Vec::<String>::new(),
        "the page fetched what an answer named"
    );

    chromium.close().await;
    server.stop().await;
}
