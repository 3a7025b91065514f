"""llama-cpp-python's server with Shiitake's tool-calling chat handler, `shiitake-tools`.

Written into the cache and run as `python shiitake_server.py <server arguments>`
by the shiitake-local-model crate. It registers the handler, then runs
`llama_cpp.server` unchanged.

Why not the built-in `chatml-function-calling` (llama-cpp-python 0.3.36):
with `tool_choice: "auto"` its answer in words is constrained by a grammar
that only admits a function name or the end, so it is always empty; its
template drops `tool` messages, so the model never sees a tool's result; and
it cannot stream a tool call. This handler keeps its good part (a grammar,
at temperature 0, chooses between `message:` and `functions.<name>:`; a
call's arguments follow the tool's JSON Schema) and, for a model this small
(SmolLM2-135M; each choice measured in docs/models.md):

- offers a tool only when the last user message names what it does (a word
  of its own name counts twice, a word of its description's first sentence
  once; the best scores are the candidates): asked to choose among tools for
  a greeting, the model calls the first tool listed. With no candidate the
  answer is a message and the choosing step is skipped; with one candidate
  named by its own name it is called without the choosing step (offered one,
  the model chose the tool every time);
- holds a `path` argument to the paths the request names (or leaves an
  optional one out when it names none): left free, the model invents one.
  When that leaves one arguments object the grammar admits, it is the call's
  arguments without a pass of the model (whose usage is then zero, truly);
- writes a message without the tool schemas in view (it answers with pieces
  of them otherwise), from the conversation without its tool calls and
  results (it copies them), and right after a tool result from the request
  and that result alone (it repeats an earlier answer, or calls again);
- makes one tool call per answer, and answers in words after a tool result;
- streams a message token by token, and a tool call as one chunk;
- reports usage on every answer (a last stream chunk with `choices: []` and
  `usage`, as OpenAI sends it for `stream_options.include_usage`), with the
  prompt tokens whose KV state was reused as `prompt_tokens_details.cached_tokens`.

Each prompt puts what is stable first (the system turn, with the tools when
they are offered, then the conversation in order): llama.cpp reuses the KV
state of the longest prefix shared with the last request, and the server's RAM
cache (`--cache true`, with `SlimRAMCache` below) keeps the states of earlier
prompts, so a Session's next call evaluates only what is new.

Sampling is greedy (temperature 0) whatever the request asks: models this
small are only coherent that way, and answers repeat for a given build.
"""

import json
import re
import sys
import threading
import time
import uuid

import llama_cpp
import llama_cpp.llama_chat_format as chat_format
import llama_cpp.llama_grammar as llama_grammar
from llama_cpp.server.__main__ import main

DEFAULT_MAX_TOKENS = 512
# Arguments of one call: enough for any files tool, and a bound on grammar work.
MAX_ARGUMENT_TOKENS = 256
END = "<|im_end|>"
MESSAGE = "message:"
# The score of a word of a tool's own name: a request that scores this for one tool
# alone is taken to ask for it.
NAMED = 2

# Words that say nothing about which tool is meant.
STOP_WORDS = frozenset(
    """
    about after again all also and any are ask can could did does doing done each
    for from get give had has have hello help her here him his how into its just
    know like make me more most much must need not now off once one only other our
    out over please say says she should show some such tell than thank thanks that
    the their them then there these they this those three through too two under
    use using very want was way well were what when where which while who why will
    with would yes you your four
    """.split()
)


def _note(began, what):
    """One line per answer in the server's log: what it did and how long it took."""
    print(f"shiitake-tools: {what} in {time.monotonic() - began:.2f} s", file=sys.stderr,
          flush=True)


def _text(content):
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def _tools_text(tools):
    lines = ["", "", "You have access to the following functions:"]
    for tool in tools:
        function = tool["function"]
        lines.append("")
        lines.append(f"functions.{function['name']}: {function.get('description', '')}")
        lines.append(json.dumps(function.get("parameters", {})))
    lines.append("")
    lines.append(
        "Answer with either a message or one function call. A message begins with "
        "'message:' on its own line, then the text. A function call begins with "
        "'functions.<function_name>:' on its own line, then the arguments as one JSON object."
    )
    return "\n".join(lines)


def _call_names(messages):
    """The tool each call id of the transcript named."""
    return {
        call.get("id"): call["function"]["name"]
        for message in messages
        if message["role"] == "assistant"
        for call in message.get("tool_calls") or []
    }


def render(messages, tools, names=None):
    """The ChatML prompt, with the tools in the system turn and results as tool turns."""
    names = _call_names(messages) if names is None else names
    out = []
    has_system = any(message["role"] == "system" for message in messages)
    if tools and not has_system:
        out.append(f"<|im_start|>system\nYou are a helpful assistant.{_tools_text(tools)}{END}\n")
    for message in messages:
        role = message["role"]
        text = _text(message.get("content"))
        if role == "system":
            if tools:
                text += _tools_text(tools)
        elif role == "assistant":
            # Earlier answers are shown as plain text, not as `message:` lines: shown
            # that way, the model copies `message:` when it should call a tool.
            calls = message.get("tool_calls") or []
            parts = [text] if text or not calls else []
            for call in calls:
                function = call["function"]
                arguments = function.get("arguments") or "{}"
                if not isinstance(arguments, str):
                    arguments = json.dumps(arguments)
                parts.append(f"functions.{function['name']}:\n{arguments}")
            text = "\n".join(parts)
        elif role == "tool":
            name = names.get(message.get("tool_call_id"), "the function")
            text = f"Result of functions.{name}:\n{text}"
        out.append(f"<|im_start|>{role}\n{text}{END}\n")
    out.append("<|im_start|>assistant\n")
    return "".join(out)


def render_message(messages):
    """The prompt of an answer in words: the conversation without its tool calls and
    results, which a model this small copies into its answer."""
    view = []
    for message in messages:
        role = message["role"]
        if role == "tool" or (role == "assistant" and not _text(message.get("content"))):
            continue
        if role == "assistant":
            message = {"role": "assistant", "content": _text(message.get("content"))}
        view.append(message)
    return render(view, [])


def render_answer(messages):
    """The prompt of the answer to a tool's result: the system turn, the request and
    the results that answer it, nothing earlier and not the call itself. With earlier
    answers in view the model repeats one of them; with its call in view it calls
    again (measured: docs/models.md)."""
    asked = max((at for at, message in enumerate(messages) if message["role"] == "user"),
                default=0)
    view = [message for message in messages[:asked] if message["role"] == "system"]
    view += [message for message in messages[asked:]
             if message["role"] in ("user", "tool")]
    return render(view, [], names=_call_names(messages))


# A file name or path as a person types it: `notes.txt`, `src/main.rs`, `docs/`.
PATH = re.compile(r"[\w.-]*[\w-](?:/[\w.-]+)+/?|[\w-]+\.[A-Za-z0-9]{1,8}\b|[\w-]+/")


def _stem(word):
    """`reads`, `files`, `searching`, `entries` name what `read`, `file`, `search`,
    `entry` name: a few English endings, nothing cleverer."""
    for ending, replacement in (("ies", "y"), ("ing", ""), ("es", ""), ("ed", ""), ("s", "")):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            stem = word[: len(word) - len(ending)] + replacement
            # `files` -> `fil` by the `es` rule would miss `file`: prefer the `s` rule.
            if ending == "es" and not word[:-2].endswith(("ch", "sh", "ss", "x", "z")):
                continue
            return stem
    return word


def _words(text, typed=False):
    """The stems of the words of `text` that can name a tool (three letters or more,
    not a stop word); in what a person `typed`, a file name or path also names `file`
    and `path`."""
    words = {
        _stem(word)
        for word in re.findall(r"[a-z0-9]+", text.lower())
        if len(word) >= 3 and word not in STOP_WORDS
    }
    if typed and PATH.search(text):
        words |= {"file", "path"}
    return words


def _first_sentence(text):
    match = re.search(r"[.!?](\s|$)", text)
    return text[: match.start() + 1] if match else text


def _asked(messages):
    """The text of the last user message."""
    for message in reversed(messages):
        if message["role"] == "user":
            return _text(message.get("content"))
    return ""


def candidates(messages, tools):
    """The best score and the tools the last user message names best, in offered order
    (none when it names none).

    A word of the tool's own name (`read` of `files__read`; the module's name is
    every tool's of that module, so it tells them apart from nothing) counts twice,
    a word of its description's first sentence once, each word of the message at
    most once.
    """
    words = _words(_asked(messages), typed=True)
    scored = []
    for tool in tools:
        function = tool["function"]
        own = function["name"].rsplit("__", 1)[-1]
        named = _words(own.replace("_", " "))
        described = _words(_first_sentence(function.get("description", "")))
        score = sum(NAMED if word in named else 1 if word in described else 0 for word in words)
        scored.append((score, tool))
    best = max((score for score, _ in scored), default=0)
    if best == 0:
        return 0, []
    return best, [tool for score, tool in scored if score == best]


def paths(messages):
    """The file names and paths the last user message names, in order, without repeats."""
    found = []
    for match in PATH.findall(_asked(messages)):
        named = match.rstrip(".")
        if named and named not in found:
            found.append(named)
    return found


def _tokens(llama, prompt):
    return llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)


def _cached(llama, tokens):
    """Prompt tokens whose KV state is reused: the longest prefix shared with what the
    model last evaluated, or with a state in the server's cache."""
    reused = llama.longest_token_prefix(llama._input_ids.tolist(), tokens)
    cache = llama.cache
    if cache is not None:
        try:
            state = cache[tokens]
            reused = max(reused, llama.longest_token_prefix(state.input_ids[: state.n_tokens].tolist(), tokens))
        except KeyError:
            pass
    # llama.cpp evaluates at least the last prompt token again.
    return min(reused, max(len(tokens) - 1, 0))


def _usage(prompt_tokens, completion_tokens, cached):
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def _complete(llama, prompt, max_tokens, grammar=None, stop=None, stream=False):
    return llama.create_completion(
        prompt=prompt,
        temperature=0.0,
        max_tokens=max_tokens,
        stop=stop or [END],
        grammar=grammar,
        repeat_penalty=1.1,
        stream=stream,
    )


LENGTH_BOUNDS = ("maxLength", "minLength", "maxItems", "minItems")


def _loosen(schema):
    """The schema without length bounds: llama.cpp spells `maxLength: N` as N nested
    optional rules, and a 1 MiB bound (apply_patch's) crashed the server. The tool
    still checks its input."""
    if isinstance(schema, dict):
        return {k: _loosen(v) for k, v in schema.items() if k not in LENGTH_BOUNDS}
    if isinstance(schema, list):
        return [_loosen(item) for item in schema]
    return schema


def _grounded(schema, named):
    """The schema with its string `path` property held to the paths the request
    `named`: one of them when it named any, else left out when it is optional (the
    tool's default then applies). Given the choice, the model invents a path or copies
    one from the conversation instead."""
    if not isinstance(schema, dict):
        return schema
    properties = schema.get("properties")
    path = properties.get("path") if isinstance(properties, dict) else None
    if not isinstance(path, dict) or path.get("type") != "string":
        return schema
    if named:
        return dict(schema, properties=dict(properties, path=dict(path, enum=named)))
    if "path" in (schema.get("required") or []):
        return schema
    return dict(schema, properties={k: v for k, v in properties.items() if k != "path"})


def _determined(schema):
    """The one arguments object `schema` admits, when it admits one: every property it
    has is required and held to a single value (a grounded `path`), or it has none."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    if schema.get("additionalProperties") is not False or set(properties) - required:
        return None
    arguments = {}
    for name, property in properties.items():
        values = property.get("enum") if isinstance(property, dict) else None
        if not isinstance(values, list) or len(values) != 1:
            return None
        arguments[name] = values[0]
    return arguments


def _grammar_for(tool, named):
    schema = _grounded(_loosen(tool["function"].get("parameters", {})), named)
    try:
        return llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    except Exception:  # the schema uses something the converter does not know
        return llama_grammar.LlamaGrammar.from_string(llama_grammar.JSON_GBNF, verbose=False)


class _Head:
    """Identity of one answer, shared by its chunks."""

    def __init__(self, model):
        self.id = f"chatcmpl-{uuid.uuid4()}"
        self.created = int(time.time())
        self.model = model

    def chunk(self, choices, usage=None):
        chunk = {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                 "model": self.model, "choices": choices}
        if usage is not None:
            chunk["usage"] = usage
        return chunk

    def response(self, text, call, finish, usage):
        message = {"role": "assistant", "content": text}
        if call is not None:
            message["tool_calls"] = [call]
        return {"id": self.id, "object": "chat.completion", "created": self.created,
                "model": self.model,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": finish}],
                "usage": usage}


class _Trim:
    """Streams a message without its surrounding blanks or a repeated `message:` head."""

    def __init__(self):
        self.started = False
        self.head = ""
        self.blanks = ""

    def feed(self, piece):
        if not self.started:
            self.head += piece
            stripped = self.head.lstrip()
            if MESSAGE.startswith(stripped) and len(stripped) < len(MESSAGE):
                return ""  # maybe the model repeats `message:`; wait and see
            if stripped.startswith(MESSAGE):
                stripped = stripped[len(MESSAGE):].lstrip()
                if not stripped:
                    return ""
            self.started = True
            piece = stripped
        text = self.blanks + piece
        kept = text.rstrip()
        self.blanks = text[len(kept):]
        return kept


def _stream_message(llama, head, prompt, limit, cached, began):
    """The message as chunks while it is generated: role, text deltas, finish, usage."""
    yield head.chunk([{"index": 0, "delta": {"role": "assistant", "content": ""},
                       "finish_reason": None}])
    trim = _Trim()
    text = []
    finish = "stop"
    for piece in _complete(llama, prompt, limit, stream=True):
        choice = piece["choices"][0]
        delta = trim.feed(choice.get("text") or "")
        if delta:
            text.append(delta)
            yield head.chunk([{"index": 0, "delta": {"content": delta}, "finish_reason": None}])
        if choice.get("finish_reason") == "length":
            finish = "length"
    yield head.chunk([{"index": 0, "delta": {}, "finish_reason": finish}])
    prompt_tokens = len(_tokens(llama, prompt))
    generated = len(llama.tokenize("".join(text).encode("utf-8"), add_bos=False))
    _note(began, f"message of {generated} tokens, prompt {prompt_tokens} ({cached} cached),")
    yield head.chunk([], usage=_usage(prompt_tokens, generated, cached))


def _whole_chunks(head, response):
    """A whole answer as stream chunks: role with the content or call, finish, usage."""
    choice = response["choices"][0]
    message = choice["message"]
    delta = {"role": "assistant", "content": message["content"]}
    if "tool_calls" in message:
        delta["tool_calls"] = [dict(call, index=0) for call in message["tool_calls"]]
    yield head.chunk([{"index": 0, "delta": delta, "finish_reason": None}])
    yield head.chunk([{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}])
    yield head.chunk([], usage=response["usage"])


def _decide(llama, prompt, tools, allow_message):
    """The grammar's choice: `None` for a message, else the name of the tool to call."""
    choices = [f'"functions.{t["function"]["name"]}:"' for t in tools]
    if allow_message:
        choices.append(f'"{MESSAGE}"')
    decide = llama_grammar.LlamaGrammar.from_string(
        "root ::= " + " | ".join(choices) + "\n", verbose=False
    )
    head = _complete(llama, prompt, 32, grammar=decide, stop=[":"])["choices"][0]["text"]
    if head.startswith("message"):
        return None
    return head.strip().removeprefix("functions.").rstrip(":")


def _call(llama, head, prompt, tool, named, limit, cached):
    name = tool["function"]["name"]
    schema = _grounded(_loosen(tool["function"].get("parameters", {})), named)
    determined = _determined(schema)
    if determined is not None:
        # The grammar would admit these arguments and nothing else: the model would only
        # spend time spelling them out. It read and wrote nothing, and usage says so.
        arguments = json.dumps(determined)
        usage = _usage(0, 0, 0)
    else:
        done = _complete(llama, prompt + f"functions.{name}:\n",
                         min(limit, MAX_ARGUMENT_TOKENS), grammar=_grammar_for(tool, named))
        arguments = done["choices"][0]["text"].strip() or "{}"
        usage = _usage(done["usage"]["prompt_tokens"], done["usage"]["completion_tokens"],
                       cached)
    call = {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
            "function": {"name": name, "arguments": arguments}}
    return head.response(None, call, "tool_calls", usage)


def _message(llama, head, prompt, limit, cached):
    done = _complete(llama, prompt, limit)
    choice = done["choices"][0]
    finish = "length" if choice.get("finish_reason") == "length" else "stop"
    trim = _Trim()
    text = trim.feed(choice["text"])
    usage = _usage(done["usage"]["prompt_tokens"], done["usage"]["completion_tokens"], cached)
    return head.response(text, None, finish, usage)


@chat_format.register_chat_completion_handler("shiitake-tools")
def shiitake_tools(llama, messages, tools=None, tool_choice=None, max_tokens=None,
                   stream=False, model=None, **_ignored):
    """Answers a chat completion request with a message or one tool call."""
    tools = tools or []
    limit = max_tokens or DEFAULT_MAX_TOKENS
    head = _Head(model or "local")
    if tool_choice == "none":
        tools = []
    forced = None
    if isinstance(tool_choice, dict):
        forced = tool_choice.get("function", {}).get("name")
    began = time.monotonic()
    answering = bool(messages) and messages[-1]["role"] == "tool"
    best, offered = 0, []
    if tools and forced is None and not answering:
        if tool_choice == "required":
            offered = tools
        else:
            best, offered = candidates(messages, tools)
    if forced is None and len(offered) == 1 and best >= NAMED:
        # The request names this one tool by its own name: asked anyway, the model chose
        # the tool every time it was offered one (docs/models.md).
        forced = offered[0]["function"]["name"]
    if forced is not None or offered:
        prompt = render(messages, tools)
        cached = _cached(llama, _tokens(llama, prompt))
        if forced is None:
            forced = _decide(llama, prompt, offered, allow_message=tool_choice != "required")
            _note(began, f"chose {forced or 'a message'} among {len(offered)} candidates")
        if forced is not None:
            tool = next((t for t in tools if t["function"]["name"] == forced), None)
            if tool is None:
                raise ValueError(f"no tool named {forced!r}")
            response = _call(llama, head, prompt, tool, paths(messages), limit, cached)
            usage = response["usage"]
            _note(began, f"call of {forced}, prompt {usage['prompt_tokens']} ({cached} cached),")
            return _whole_chunks(head, response) if stream else response
    # A message is written without the tool schemas in view: a model this small
    # otherwise answers with pieces of them. That prompt is short, and the server's
    # cache keeps its prefix beside the one with the tools.
    prompt = render_answer(messages) if answering else render_message(messages)
    cached = _cached(llama, _tokens(llama, prompt))
    if stream:
        return _stream_message(llama, head, prompt, limit, cached, began)
    response = _message(llama, head, prompt, limit, cached)
    _note(began, f"message, prompt {response['usage']['prompt_tokens']} ({cached} cached),")
    return response


class SlimRAMCache(llama_cpp.LlamaRAMCache):
    """The server's RAM cache of prompt states, keeping of each state's logits only the
    last row. llama-cpp-python 0.3.36 saves `n_batch` rows of logits (100 MB for
    SmolLM2's vocabulary) with every state and counts none of it against the cache's
    size; a restored state evaluates its last token again before sampling, so no row
    of it is read."""

    def __setitem__(self, key, value):
        value.scores = value.scores[-1:].copy()
        super().__setitem__(key, value)


if __name__ == "__main__":
    # `--cache true --cache_type ram` builds the cache by this name.
    llama_cpp.LlamaRAMCache = SlimRAMCache
    # llama.cpp's grammar matching recurses deeply on JSON-Schema grammars; the
    # default 8 MiB thread stack overflowed (a segfault) on one files tool.
    threading.stack_size(256 * 1024 * 1024)
    main()
