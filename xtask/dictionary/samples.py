"""The samples messages-v2.dict's entropy tables were counted from (see finalize.c;
`cargo xtask dictionary` runs both): lineage messages of every shape the schema has,
as the store serialises them, with made-up values drawn from a fixed seed. None is
taken from a benchmark or a test, so the tables describe messages in general, not one
workload.

    python3 samples.py > samples.jsonl    # one message a line
"""

import json
import random

SEED = 2
COUNT = 3000

WORDS = """
the a an of to and in is it that for on with as this be are was by at or from not
have has can will would should could may might must do does did done make made
file files line lines function module crate type struct field value values error
errors test tests build run runs running read write change changes add remove fix
check look find search list show open close start stop call calls return returns
config settings path paths name names code source text output input result results
user users session sessions request response server client data table row rows key
keys time date first last next new old more less some all each every other same
here there now then when where why how what which who because but so if else also
please thanks sure okay yes no let me see think need want try use using used into
about after before between over under again still only just very much many few
branch commit merge diff patch version release package import export update delete
""".split()

CODE = [
    "fn main() {{\n    println!(\"{w}\");\n}}\n",
    "pub struct {W} {{\n    pub {w}: String,\n    pub count: u64,\n}}\n",
    "use std::collections::HashMap;\n\npub fn {w}(input: &str) -> Option<usize> {{\n    input.find('{c}')\n}}\n",
    "def {w}(items):\n    return [item for item in items if item]\n",
    "import {{ {w} }} from './{w}';\n\nexport function {W}() {{\n  return {w}();\n}}\n",
    "# {W}\n\nSee `{w}` for the details.\n",
    "[package]\nname = \"{w}\"\nversion = \"0.{n}.0\"\nedition = \"2021\"\n",
    "{{\n  \"name\": \"{w}\",\n  \"version\": \"1.{n}.0\"\n}}\n",
    "SELECT id, {w} FROM {w}s WHERE id = $1;\n",
    "#!/bin/sh\nset -e\ncargo build --release\n./target/release/{w}\n",
]

TOOLS = {
    "files__read": lambda r: {"path": path(r)},
    "files__write": lambda r: {"path": path(r), "text": code(r)},
    "files__edit": lambda r: {"path": path(r), "old": words(r, 3), "new": words(r, 3)},
    "files__list": lambda r: {"path": directory(r)},
    "files__search": lambda r: {"pattern": r.choice(WORDS), "path": directory(r)},
    "shell__run": lambda r: {"command": r.choice(["cargo test", "ls -la", "git status", "make", "npm test"])},
    "web__fetch": lambda r: {"url": "https://example.com/" + r.choice(WORDS)},
    "notes__write": lambda r: {"text": sentence(r)},
    "plan__update": lambda r: {"steps": [sentence(r) for _ in range(r.randint(1, 4))]},
}

APIS = [
    ("openai-completions", "openai", ["gpt-4.1", "gpt-4.1-mini", "gpt-4o", "o4-mini"]),
    ("openai-responses", "openai", ["gpt-5", "gpt-5-mini"]),
    ("anthropic-messages", "anthropic", ["claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"]),
    ("google-generative-ai", "google", ["gemini-2.5-pro", "gemini-2.5-flash"]),
    ("openai-completions", "local", ["qwen3-4b", "llama-3.2-3b"]),
]


def words(r, n):
    return " ".join(r.choice(WORDS) for _ in range(n))


def sentence(r):
    text = words(r, r.randint(3, 18))
    return text[0].upper() + text[1:] + r.choice([".", ".", "?", "!", ":"])


def paragraph(r):
    return " ".join(sentence(r) for _ in range(r.randint(1, 5)))


def directory(r):
    return r.choice(["src", "tests", "docs", "crates/" + r.choice(WORDS) + "/src", "."])


def path(r):
    ext = r.choice(["rs", "md", "toml", "py", "ts", "json", "txt", "sql", "sh"])
    return directory(r) + "/" + r.choice(WORDS) + "." + ext


def code(r):
    w = r.choice(WORDS)
    return r.choice(CODE).format(w=w, W=w.capitalize(), c=r.choice("abc ,."), n=r.randint(0, 20))


def timestamp(r):
    return r.randint(1_700_000_000_000, 1_900_000_000_000)


def call_id(r, provider):
    digits = "".join(r.choice("0123456789abcdef") for _ in range(r.choice([8, 16, 24])))
    if provider == "anthropic":
        return "toolu_01" + digits
    return "call_" + digits


def dollars(r, tokens, per_million):
    value = round(tokens * per_million / 1_000_000, 6)
    return int(value) if value == int(value) else value


def usage(r):
    cached = r.random() < 0.4
    inp, out = r.randint(10, 40_000), r.randint(1, 4_000)
    read = r.randint(0, 60_000) if cached else 0
    write = r.randint(0, 8_000) if cached and r.random() < 0.3 else 0
    priced = r.random() < 0.7
    cost = {
        "input": dollars(r, inp, 3) if priced else 0,
        "output": dollars(r, out, 15) if priced else 0,
        "cacheRead": dollars(r, read, 0.3) if priced else 0,
        "cacheWrite": dollars(r, write, 3.75) if priced else 0,
    }
    total = round(sum(cost.values()), 6)
    cost["total"] = int(total) if total == int(total) else total
    return {"input": inp, "output": out, "cacheRead": read, "cacheWrite": write,
            "totalTokens": inp + out + read + write, "cost": cost}


def user(r):
    if r.random() < 0.85:
        content = sentence(r) if r.random() < 0.6 else paragraph(r)
    else:
        content = [{"type": "text", "text": paragraph(r)}]
        if r.random() < 0.2:
            content.append({"type": "image", "data": "iVBORw0KGgo" + words(r, 4).replace(" ", ""),
                            "mimeType": "image/png"})
    return {"role": "user", "content": content, "timestamp": timestamp(r)}


def assistant(r):
    api, provider, models = r.choice(APIS)
    content = []
    if r.random() < 0.2:
        thinking = {"type": "thinking", "thinking": paragraph(r)}
        if provider == "anthropic":
            thinking["thinkingSignature"] = "".join(r.choice("ABCDEFabcdef0123456789+/") for _ in range(40))
        content.append(thinking)
    kind = r.random()
    if kind < 0.55:
        if r.random() < 0.3:
            content.append({"type": "text", "text": sentence(r)})
        for _ in range(r.choice([1, 1, 1, 2, 3])):
            name = r.choice(list(TOOLS))
            content.append({"type": "toolCall", "id": call_id(r, provider), "name": name,
                            "arguments": TOOLS[name](r)})
        stop = "toolUse"
    elif kind < 0.95:
        content.append({"type": "text", "text": paragraph(r)})
        stop = r.choice(["stop"] * 9 + ["length"])
    else:
        content.append({"type": "text", "text": ""})
        stop = r.choice(["error", "aborted"])
    message = {"role": "assistant", "content": content, "api": api, "provider": provider,
               "model": r.choice(models), "usage": usage(r), "stopReason": stop}
    if stop in ("error", "aborted"):
        message["errorMessage"] = sentence(r)
    message["timestamp"] = timestamp(r)
    return message


def tool_result(r):
    name = r.choice(list(TOOLS))
    _, provider, _ = r.choice(APIS)
    error = r.random() < 0.1
    if error:
        text = sentence(r)
    elif name == "files__read":
        text = json.dumps({"path": path(r), "text": code(r)}, separators=(",", ":"), ensure_ascii=False)
    elif name == "files__list":
        text = json.dumps({"entries": [path(r) for _ in range(r.randint(1, 8))]}, separators=(",", ":"))
    elif name == "shell__run":
        text = json.dumps({"exitCode": 0, "stdout": paragraph(r), "stderr": ""}, separators=(",", ":"))
    else:
        text = json.dumps({"ok": True, "path": path(r)}, separators=(",", ":"))
    message = {"role": "toolResult", "toolCallId": call_id(r, provider), "toolName": name,
               "content": [{"type": "text", "text": text}]}
    if r.random() < 0.1:
        message["details"] = {"bytes": r.randint(0, 50_000)}
    message["isError"] = error
    message["timestamp"] = timestamp(r)
    return message


def main():
    r = random.Random(SEED)
    for _ in range(COUNT):
        kind = r.random()
        message = user(r) if kind < 0.15 else assistant(r) if kind < 0.6 else tool_result(r)
        print(json.dumps(message, separators=(",", ":"), ensure_ascii=False))


main()
