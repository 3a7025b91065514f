"""An editor that drives `shiitake acp` through the official ACP Python SDK (`acp`).

Run by the `acp_editor` tests with the Python of `cargo xtask clients`:

    python acp_editor.py SHIITAKE URL TOKEN CWD prompt
        initialize, new session, prompt "Read the notes." (a tool call and an answer),
        then prompt "Think long." and cancel it once its first chunk arrives
    python acp_editor.py SHIITAKE URL TOKEN CWD load SESSION
        initialize, load the Session (its transcript comes back as updates)

Prints one JSON object a line: {"initialize": …}, {"session": id}, {"update": …},
{"stop": reason}, {"error": …}; the test reads them.
"""

import asyncio
import json
import sys

from acp import spawn_agent_process, text_block
from acp.interfaces import Client


def emit(**line):
    print(json.dumps(line), flush=True)


class Editor(Client):
    """Records every update; refuses what it does not offer."""

    def __init__(self):
        self.first_chunk = asyncio.Event()

    async def session_update(self, session_id, update, **kwargs):
        dumped = update.model_dump(by_alias=True, exclude_none=True, mode="json")
        emit(update=dumped)
        if dumped.get("sessionUpdate") == "agent_message_chunk":
            self.first_chunk.set()

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        return {"outcome": {"outcome": "cancelled"}}


async def main():
    shiitake, url, token, cwd, mode = sys.argv[1:6]
    editor = Editor()
    args = ["--url", url, "--token", token, "acp"]
    async with spawn_agent_process(editor, shiitake, *args) as (conn, _process):
        started = await conn.initialize(protocol_version=1)
        emit(initialize=started.model_dump(by_alias=True, exclude_none=True, mode="json"))
        if mode == "prompt":
            session = await conn.new_session(cwd=cwd, mcp_servers=[])
            emit(session=session.session_id)
            answered = await conn.prompt(
                session_id=session.session_id, prompt=[text_block("Read the notes.")]
            )
            emit(stop=answered.stop_reason)
            editor.first_chunk.clear()
            running = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[text_block("Think long.")])
            )
            await asyncio.wait_for(editor.first_chunk.wait(), 30)
            await conn.cancel(session_id=session.session_id)
            cancelled = await asyncio.wait_for(running, 30)
            emit(stop=cancelled.stop_reason)
        elif mode == "load":
            await conn.load_session(cwd=cwd, session_id=sys.argv[6], mcp_servers=[])
            emit(loaded=sys.argv[6])
        try:
            await conn.prompt(session_id="not a session id", prompt=[text_block("x")])
        except Exception as error:  # the SDK raises the agent's JSON-RPC error
            emit(error=str(error))


asyncio.run(main())
