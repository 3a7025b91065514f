"""llama-cpp-python's server with Shiitake's tool-calling chat handler, `shiitake-tools`.

Written into the cache and run as `python shiitake_server.py <server arguments>`
by the shiitake-local-model crate. It registers the handler, then runs
`llama_cpp.server` unchanged.

Why not the built-in `chatml-function-calling` (llama-cpp-python 0.3.36):
with `tool_choice: "auto"` its answer in words is constrained by a grammar
that only admits a function name or the end, so it is always empty; its
template drops `tool` messages, so the model never sees a tool's result; and
it cannot stream a tool call. This handler keeps its good part (a grammar,
at temperature 0, first chooses between `message:` and
`functions.<name>:`; a call's arguments follow the tool's JSON Schema) and
fixes the rest:

- the message is generated freely, up to `max_tokens` (default 512);
- tool results are shown to the model as `<|im_start|>tool` turns naming the
  tool, and earlier calls as `functions.<name>:` lines;
- one tool call per answer, and right after a tool result the answer is a
  message: a model this small otherwise calls tools in a loop instead of
  reading what it got;
- with `stream: true` the whole answer is sent as chunks once complete.

Sampling is greedy (temperature 0) whatever the request asks: models this
small are only coherent that way, and answers repeat for a given build.
"""

import json
import threading
import time
import uuid

import llama_cpp.llama_chat_format as chat_format
import llama_cpp.llama_grammar as llama_grammar
from llama_cpp.server.__main__ import main

DEFAULT_MAX_TOKENS = 512
# Arguments of one call: enough for any files tool, and a bound on grammar work.
MAX_ARGUMENT_TOKENS = 256
END = "<|im_end|>"


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


def render(messages, tools):
    """The ChatML prompt, with the tools in the system turn and results as tool turns."""
    names = {}
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
            calls = message.get("tool_calls") or []
            parts = []
            if text or not calls:
                parts.append(f"message:\n{text}" if tools else text)
            for call in calls:
                function = call["function"]
                names[call.get("id")] = function["name"]
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


def _complete(llama, prompt, max_tokens, grammar=None, stop=None):
    return llama.create_completion(
        prompt=prompt,
        temperature=0.0,
        max_tokens=max_tokens,
        stop=stop or [END],
        grammar=grammar,
        repeat_penalty=1.1,
        stream=False,
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


def _grammar_for(tool):
    try:
        return llama_grammar.LlamaGrammar.from_json_schema(
            json.dumps(_loosen(tool["function"].get("parameters", {}))), verbose=False
        )
    except Exception:  # the schema uses something the converter does not know
        return llama_grammar.LlamaGrammar.from_string(llama_grammar.JSON_GBNF, verbose=False)


def _response(model, text, call, finish, usage):
    message = {"role": "assistant", "content": text}
    if call is not None:
        message["tool_calls"] = [call]
    return {
        "id": f"chatcmpl-{uuid.uuid4()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
    }


def _chunks(response):
    """The whole answer as stream chunks: role, content or call, finish."""
    base = {k: response[k] for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    choice = response["choices"][0]
    message = choice["message"]
    delta = {"role": "assistant", "content": message["content"]}
    if "tool_calls" in message:
        delta["tool_calls"] = [dict(call, index=0) for call in message["tool_calls"]]
    yield dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}])
    yield dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}])


@chat_format.register_chat_completion_handler("shiitake-tools")
def shiitake_tools(llama, messages, tools=None, tool_choice=None, max_tokens=None,
                   stream=False, model=None, **_ignored):
    """Answers a chat completion request, choosing between a message and one tool call."""
    tools = tools or []
    limit = max_tokens or DEFAULT_MAX_TOKENS
    name = model or "local"
    if tool_choice == "none":
        tools = []
    prompt = render(messages, tools)
    forced = None
    if isinstance(tool_choice, dict):
        forced = tool_choice.get("function", {}).get("name")
    answering = bool(messages) and messages[-1]["role"] == "tool"
    if tools and forced is None and not answering:
        choices = " | ".join(f'"functions.{t["function"]["name"]}:"' for t in tools)
        decide = llama_grammar.LlamaGrammar.from_string(
            f'root ::= functions | "message:"\nfunctions ::= {choices}\n', verbose=False
        )
        head = _complete(llama, prompt, 32, grammar=decide, stop=[":"])["choices"][0]["text"]
        if not head.startswith("message"):
            forced = head.strip().removeprefix("functions.").rstrip(":")
    if forced is not None:
        tool = next((t for t in tools if t["function"]["name"] == forced), None)
        if tool is None:
            raise ValueError(f"no tool named {forced!r}")
        done = _complete(llama, prompt + f"functions.{forced}:\n", min(limit, MAX_ARGUMENT_TOKENS),
                         grammar=_grammar_for(tool))
        arguments = done["choices"][0]["text"].strip() or "{}"
        call = {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                "function": {"name": forced, "arguments": arguments}}
        response = _response(name, None, call, "tool_calls", done["usage"])
    else:
        if tools:
            prompt += "message:\n"
        done = _complete(llama, prompt, limit)
        choice = done["choices"][0]
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        text = choice["text"].strip()
        if text.startswith("message:"):
            text = text.removeprefix("message:").strip()
        response = _response(name, text, None, finish, done["usage"])
    return _chunks(response) if stream else response


if __name__ == "__main__":
    # llama.cpp's grammar matching recurses deeply on JSON-Schema grammars; the
    # default 8 MiB thread stack overflowed (a segfault) on one files tool.
    threading.stack_size(256 * 1024 * 1024)
    main()
