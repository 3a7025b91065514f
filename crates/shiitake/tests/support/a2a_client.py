"""An agent that delegates to a Shiitake Agent over A2A, through the official A2A
Python SDK (`a2a-sdk`): its card resolver and its JSON-RPC client (streaming,
blocking and polling), with a bearer token on a shared httpx client.

Run by the `a2a_agent` tests with the Python of `cargo xtask clients`:

    python a2a_client.py URL TOKEN stream TEXT [NEXT]
        the card, then TEXT as a streaming message; with NEXT, NEXT as a blocking
        message in the same context, then GetTask of the first task
    python a2a_client.py URL TOKEN question TEXT REPLY
        TEXT as a streaming message (it ends input-required), then REPLY with its
        taskId and contextId (the answer; the same task goes on)
    python a2a_client.py URL TOKEN cancel TEXT
        TEXT with returnImmediately, GetTask until it works, CancelTask, CancelTask again
    python a2a_client.py URL TOKEN start TEXT UNTIL
        TEXT as a streaming message, leaving once the agent said UNTIL (in an update,
        or in the task's history when the run said it before the stream began)
    python a2a_client.py URL TOKEN subscribe TASK
        SubscribeToTask of TASK
    python a2a_client.py URL TOKEN send_on AGENT TEXT
        the card of the Agent named AGENT (URL/v1/agents/AGENT/a2a), then TEXT as a
        blocking message to it
    python a2a_client.py URL TOKEN probe AGENT TASK
        what this token gets of another's Agent AGENT and its TASK: that Agent's card,
        GetTask of TASK, and a message into TASK's context, through this token's own
        Agent
    python a2a_client.py URL TOKEN raw
        the default Agent's card at URL/.well-known/agent-card.json, mistakes over
        plain HTTP, one message sent twice, and GetTask of an unknown task through
        the SDK

URL is the server's; the Agent's A2A endpoint is URL/v1/a2a. Prints one JSON object a
line: {"card": …}, {"event": …} (a StreamResponse as ProtoJSON), {"end": kind}, …;
the test reads them.
"""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from google.protobuf.json_format import MessageToDict


def emit(**line):
    print(json.dumps(line), flush=True)


def message(text, task_id=None, context_id=None):
    return SendMessageRequest(
        message=Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            task_id=task_id,
            context_id=context_id,
        )
    )


def words(message):
    return "".join(part.text for part in message.parts)


def said(event):
    """What the agent said in an event: a status update's message, or the agent's
    messages in a task's history."""
    kind = event.WhichOneof("payload")
    if kind == "status_update":
        return [words(event.status_update.status.message)]
    if kind == "task":
        return [words(m) for m in event.task.history if m.role == Role.ROLE_AGENT]
    return []


async def stream(client, request):
    """Every event of a streaming send, printed; the last one."""
    last = None
    async for event in client.send_message(request):
        emit(event=MessageToDict(event))
        last = event
    emit(end="stream")
    return last


async def main():
    url, token, mode, *args = sys.argv[1:]
    base = f"{url}/v1/a2a"
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    card = await A2ACardResolver(http, base).get_agent_card()
    emit(card=MessageToDict(card))
    streaming = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
    blocking = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
    polling = ClientFactory(
        ClientConfig(httpx_client=http, streaming=False, polling=True)
    ).create(card)

    if mode == "stream":
        last = await stream(streaming, message(args[0]))
        task = last.status_update
        if len(args) > 1:
            async for event in blocking.send_message(message(args[1], context_id=task.context_id)):
                emit(blocked=MessageToDict(event))
            got = await streaming.get_task(GetTaskRequest(id=task.task_id, history_length=10))
            emit(got=MessageToDict(got))
    elif mode == "question":
        last = await stream(streaming, message(args[0]))
        task = last.status_update
        await stream(
            streaming, message(args[1], task_id=task.task_id, context_id=task.context_id)
        )
    elif mode == "cancel":
        async for event in polling.send_message(message(args[0])):
            task = event.task
            emit(submitted=MessageToDict(event))
        for _ in range(200):
            got = await streaming.get_task(GetTaskRequest(id=task.id))
            if got.status.state == TaskState.TASK_STATE_WORKING:
                break
            await asyncio.sleep(0.1)
        emit(got=MessageToDict(got))
        cancelled = await streaming.cancel_task(CancelTaskRequest(id=task.id))
        emit(cancelled=MessageToDict(cancelled))
        try:
            await streaming.cancel_task(CancelTaskRequest(id=task.id))
            emit(cancelled_again="no error")
        except Exception as error:
            emit(cancelled_again=type(error).__name__)
    elif mode == "start":
        async for event in streaming.send_message(message(args[0])):
            emit(event=MessageToDict(event))
            if args[1] in said(event):
                kind = event.WhichOneof("payload")
                task = event.task.id if kind == "task" else event.status_update.task_id
                emit(started={"task": task})
                break
    elif mode == "subscribe":
        async for event in streaming.subscribe(SubscribeToTaskRequest(id=args[0])):
            emit(event=MessageToDict(event))
        emit(end="subscribe")
    elif mode == "send_on":
        agent_base = f"{url}/v1/agents/{args[0]}/a2a"
        agent_card = await A2ACardResolver(http, agent_base).get_agent_card()
        emit(agent_card=MessageToDict(agent_card))
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(agent_card)
        async for event in client.send_message(message(args[1])):
            emit(blocked=MessageToDict(event))
    elif mode == "probe":
        agent, task = args
        card = await http.get(f"{url}/v1/agents/{agent}/a2a/.well-known/agent-card.json")
        emit(probe={"case": "card", "status": card.status_code})
        headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
        context = task.split(".")[0]
        bodies = {
            "get_task": {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task}},
            "cancel_task": {"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task}},
            "into_context": {"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {
                "message": {"messageId": f"probe-{uuid.uuid4()}", "contextId": context,
                            "role": "ROLE_USER", "parts": [{"text": "Tell me."}]}}},
        }
        for name, body in bodies.items():
            response = await http.post(base, content=json.dumps(body), headers=headers)
            emit(probe={"case": name, "status": response.status_code, "body": response.json()})
        other = await http.post(
            f"{url}/v1/agents/{agent}/a2a", content=json.dumps(bodies["get_task"]), headers=headers
        )
        emit(probe={"case": "their_endpoint", "status": other.status_code})
    elif mode == "raw":
        root = (await http.get(f"{url}/.well-known/agent-card.json")).json()
        emit(root_card=root)
        headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
        bodies = {
            "malformed": "{not json",
            "batch": "[]",
            "unknown_method": json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}
            ),
            "bad_params": json.dumps(
                {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": 3}}
            ),
            "unknown_task": json.dumps(
                {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "ses_none.cmd_none"}}
            ),
            "not_a_task_id": json.dumps(
                {"jsonrpc": "2.0", "id": 4, "method": "CancelTask", "params": {"id": "nothing"}}
            ),
            "unknown_context": json.dumps(
                {"jsonrpc": "2.0", "id": 5, "method": "SendMessage", "params": {"message": {
                    "messageId": "m-5", "contextId": "ses_none", "role": "ROLE_USER",
                    "parts": [{"text": "hello"}]}}}
            ),
            "huge": json.dumps({"jsonrpc": "2.0", "id": 6, "method": "GetTask",
                                "params": {"id": "x" * (300 * 1024)}}),
        }
        for name, body in bodies.items():
            response = await http.post(base, content=body, headers=headers)
            try:
                answer = response.json()
            except ValueError:
                answer = response.text
            emit(raw={"case": name, "status": response.status_code, "body": answer})
        # The same message sent twice (a retry): one task.
        retry = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {
            "message": {"messageId": f"retry-{uuid.uuid4()}", "role": "ROLE_USER",
                        "parts": [{"text": "Once."}]},
            "configuration": {"returnImmediately": True}}})
        for _ in range(2):
            response = await http.post(base, content=retry, headers=headers)
            emit(retried=response.json())
        try:
            await streaming.get_task(GetTaskRequest(id="ses_none.cmd_none"))
            emit(sdk_error="no error")
        except Exception as error:
            emit(sdk_error=type(error).__name__)
    for client in (streaming, blocking, polling):
        await client.close()
    await http.aclose()


asyncio.run(main())
