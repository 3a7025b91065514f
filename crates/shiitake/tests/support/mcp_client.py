"""An MCP client that drives a Shiitake Agent's MCP endpoint through the official MCP
Python SDK (`mcp` from PyPI), over Streamable HTTP with the bearer token.

Run by the `mcp_server` tests with the Python of `cargo xtask clients`:

    python mcp_client.py URL TOKEN tools
        lists the tools
    python mcp_client.py URL TOKEN prompt TEXT KEY
        calls `prompt` with idempotency key KEY, twice (a retry), with a progress callback
    python mcp_client.py URL TOKEN elicit TEXT REPLY
        calls `prompt` answering the elicitation it brings with REPLY (field q1, or
        `decision` for an approval)
    python mcp_client.py URL TOKEN legacy TEXT REPLY
        the same on the pre-2026 protocol (no elicitation in results): `prompt` answers
        `input_required`, then `answer` with REPLY
    python mcp_client.py URL TOKEN bad
        an unknown tool, wrong arguments, an id past its bound, an unknown Session
    python mcp_client.py URL TOKEN wait SESSION COMMAND
        calls `wait` on a run started before
    python mcp_client.py URL TOKEN stop TEXT
        `prompt` TEXT without waiting, `wait` one second (still running), a second
        prompt queued behind it and `cancel`led, `abort` the first, `wait` it to its end
    python mcp_client.py URL TOKEN reach
        lists the tools, printing {"reached": true} or {"refused": why}

Prints one JSON object a line: {"tools": [...]}, {"progress": ...}, {"result": ...},
{"elicitation": ...}, {"error": ...}; the test reads them.
"""

import asyncio
import json
import sys

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def emit(**line):
    print(json.dumps(line), flush=True)


def dump(result):
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


def client(url, token, mode="auto", elicitation_callback=None):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    transport = streamable_http_client(url, http_client=http)
    return Client(transport, mode=mode, elicitation_callback=elicitation_callback, cache=None)


async def progress(progress, total, message):
    emit(progress={"progress": progress, "message": message})


async def main(url, token, mode, *args):
    if mode == "tools":
        async with client(url, token) as c:
            listed = await c.list_tools()
            emit(tools=[dump(tool) for tool in listed.tools])
    elif mode == "prompt":
        text, key = args
        async with client(url, token) as c:
            for _ in range(2):
                result = await c.call_tool(
                    "prompt", {"text": text, "idempotencyKey": key}, progress_callback=progress
                )
                emit(result=dump(result))
    elif mode == "elicit":
        text, reply = args

        async def answer(context, params):
            asked = params.model_dump(by_alias=True, exclude_none=True, mode="json")
            emit(elicitation=asked)
            field = next(iter(asked["requestedSchema"]["properties"]))
            return types.ElicitResult(action="accept", content={field: reply})

        async with client(url, token, elicitation_callback=answer) as c:
            result = await c.call_tool("prompt", {"text": text}, progress_callback=progress)
            emit(result=dump(result))
            session = result.structured_content["sessionId"]
            read = await c.call_tool("read", {"sessionId": session})
            emit(result=dump(read))
    elif mode == "wait":
        session, command = args
        async with client(url, token) as c:
            result = await c.call_tool("wait", {"sessionId": session, "commandId": command})
            emit(result=dump(result))
    elif mode == "stop":
        (text,) = args
        async with client(url, token) as c:
            first = await c.call_tool("prompt", {"text": text, "wait": False})
            emit(result=dump(first))
            run = first.structured_content
            session = run["sessionId"]
            calls = [
                ("wait", {"sessionId": session, "commandId": run["commandId"], "timeoutSeconds": 1}),
                ("prompt", {"text": "And then?", "sessionId": session, "wait": False}),
            ]
            for name, arguments in calls:
                emit(result=dump(await c.call_tool(name, arguments)))
            emit(result=dump(await c.call_tool("list_sessions", {})))
            second = (await c.call_tool("prompt", {"text": "And then?", "sessionId": session, "wait": False})).structured_content
            emit(result=dump(await c.call_tool("cancel", {"sessionId": session, "commandId": second["commandId"]})))
            emit(result=dump(await c.call_tool("abort", {"sessionId": session})))
            emit(result=dump(await c.call_tool("wait", {"sessionId": session, "commandId": run["commandId"]})))
    elif mode == "reach":
        try:
            async with client(url, token) as c:
                await c.list_tools()
            emit(reached=True)
        except Exception as error:
            emit(refused=repr(error))
    elif mode == "legacy":
        text, reply = args
        async with client(url, token, mode="legacy") as c:
            first = await c.call_tool("prompt", {"text": text})
            emit(result=dump(first))
            run = first.structured_content
            second = await c.call_tool(
                "answer",
                {"sessionId": run["sessionId"], "commandId": run["commandId"], "reply": reply},
            )
            emit(result=dump(second))
            read = await c.call_tool("read", {"sessionId": run["sessionId"]})
            emit(result=dump(read))
    elif mode == "bad":
        async with client(url, token) as c:
            calls = [
                ("nope", {}),
                ("prompt", {"text": 42}),
                ("prompt", {"text": "hi", "colour": "red"}),
                ("prompt", {"text": "hi", "idempotencyKey": "k" * 129}),
                ("wait", {"sessionId": "ses_nobody", "commandId": "cmd_nothing"}),
                ("wait", {"sessionId": "s", "commandId": "c", "timeoutSeconds": 0}),
            ]
            for name, arguments in calls:
                try:
                    result = await c.call_tool(name, arguments)
                    emit(result=dump(result), tool=name)
                except Exception as error:  # the SDK raises protocol errors
                    emit(error=str(error), tool=name)
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
