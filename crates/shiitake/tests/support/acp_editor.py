"""An editor that drives `shiitake acp` through the official ACP Python SDK (`acp`).

Run by the `acp_editor` tests with the Python of `cargo xtask clients` (URL may be
`data-dir:DIR`: then no server is named and `shiitake acp` starts one on DIR; or
`server:URL`: then `shiitake acp --server URL --token TOKEN`):

    python acp_editor.py SHIITAKE URL TOKEN CWD prompt
        initialize, new session, prompt "Read the notes." (a tool call and an answer),
        then prompt "Think long." and cancel it once its first chunk arrives, then
        prompt "/jobs" (a slash command of the Agent)
    python acp_editor.py SHIITAKE URL TOKEN CWD question REPLY
        initialize, new session, prompt "Pick a store." (the agent asks a question and
        the turn ends), then prompt REPLY (the answer; the run goes on)
    python acp_editor.py SHIITAKE URL TOKEN CWD load SESSION [ANSWER...]
        initialize, load the Session (its transcript comes back as updates); with
        ANSWERs, answer the permission requests of the approvals still waiting
    python acp_editor.py SHIITAKE URL TOKEN CWD permissions ANSWER...
        initialize, new session, prompt "Edit twice.", answering each permission
        request with the next ANSWER (an option id, or `leave` to answer nothing and
        close the connection)

Prints one JSON object a line: {"initialize": …}, {"session": id}, {"update": …},
{"permission": …}, {"stop": reason}, {"error": …}; the test reads them.
"""

import asyncio
import json
import os
import sys

from acp import spawn_agent_process, text_block
from acp.interfaces import Client
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse


def emit(**line):
    print(json.dumps(line), flush=True)


class Editor(Client):
    """Records every update; refuses what it does not offer."""

    def __init__(self, answers=()):
        self.first_chunk = asyncio.Event()
        self.answers = list(answers)
        self.left = asyncio.Event()
        self.answered = asyncio.Event()
        self.last_update = 0.0

    async def session_update(self, session_id, update, **kwargs):
        dumped = update.model_dump(by_alias=True, exclude_none=True, mode="json")
        emit(update=dumped)
        self.last_update = asyncio.get_running_loop().time()
        if dumped.get("sessionUpdate") == "agent_message_chunk":
            self.first_chunk.set()

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        emit(
            permission={
                "toolCall": tool_call.model_dump(by_alias=True, exclude_none=True, mode="json"),
                "options": [o.model_dump(by_alias=True, exclude_none=True, mode="json") for o in options],
            }
        )
        answer = self.answers.pop(0) if self.answers else "leave"
        if answer == "leave":
            self.left.set()
            await asyncio.sleep(3600)
        if not self.answers:
            self.answered.set()
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )


async def main():
    shiitake, url, token, cwd, mode = sys.argv[1:6]
    answers = {"permissions": sys.argv[6:], "load": sys.argv[7:]}.get(sys.argv[5], ())
    editor = Editor(answers)
    if url.startswith("data-dir:"):
        # No server named: `shiitake acp` starts one on the data directory, in `cwd`.
        args = ["--data-dir", url[len("data-dir:"):], "acp"]
    elif url.startswith("server:"):
        # As an editor's settings write it: the options after the command.
        args = ["acp", "--server", url[len("server:"):], "--token", token]
    else:
        args = ["--url", url, "--token", token, "acp"]
    # The whole environment: the SDK passes only a few variables by default.
    env = dict(os.environ)
    async with spawn_agent_process(editor, shiitake, *args, cwd=cwd, env=env) as (conn, _process):
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
            listed = await conn.prompt(session_id=session.session_id, prompt=[text_block("/jobs")])
            emit(stop=listed.stop_reason)
        elif mode == "permissions":
            session = await conn.new_session(cwd=cwd, mcp_servers=[])
            emit(session=session.session_id)
            prompting = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[text_block("Edit twice.")])
            )
            left = asyncio.ensure_future(editor.left.wait())
            done, _ = await asyncio.wait({prompting, left}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
            if prompting in done:
                emit(stop=prompting.result().stop_reason)
            else:
                emit(left=True)
                return
        elif mode == "question":
            session = await conn.new_session(cwd=cwd, mcp_servers=[])
            emit(session=session.session_id)
            asked = await conn.prompt(
                session_id=session.session_id, prompt=[text_block("Pick a store.")]
            )
            emit(stop=asked.stop_reason)
            replied = await conn.prompt(
                session_id=session.session_id, prompt=[text_block(sys.argv[6])]
            )
            emit(stop=replied.stop_reason)
        elif mode == "load":
            try:
                await conn.load_session(cwd=cwd, session_id=sys.argv[6], mcp_servers=[])
            except Exception as error:  # the agent's JSON-RPC error
                emit(load_error=str(error))
                return
            emit(loaded=sys.argv[6])
            editor.first_chunk.clear()
            listed = await conn.list_sessions(cwd=cwd)
            emit(listed=[row.model_dump(by_alias=True, exclude_none=True, mode="json") for row in listed.sessions])
            if answers:
                await asyncio.wait_for(editor.answered.wait(), 30)
                # The run the answer let go on is followed: its answer comes.
                await asyncio.wait_for(editor.first_chunk.wait(), 30)
                # The rest of that answer streams in after its first piece: wait for a
                # quiet second.
                loop = asyncio.get_running_loop()
                while loop.time() - editor.last_update < 1.0:
                    await asyncio.sleep(0.1)
        try:
            await conn.prompt(session_id="not a session id", prompt=[text_block("x")])
        except Exception as error:  # the SDK raises the agent's JSON-RPC error
            emit(error=str(error))


asyncio.run(main())
