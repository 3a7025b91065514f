// The one module `cargo xtask web-vendor` bundles: markdown-it's parser, for
// crates/shiitake-server/src/web/markdown.js, which builds DOM nodes from its tokens
// (markdown-it's own HTML renderer is never called).
export { default as MarkdownIt } from "markdown-it";
