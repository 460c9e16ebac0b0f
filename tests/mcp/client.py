"""A real MCP client (the official Python SDK) for tests/it/mcp.rs.

Usage: python client.py RALPH PROJECT_DIR

Opens a session with `RALPH -C PROJECT_DIR mcp` over stdio, prints one JSON
line with the server's name and its tools, then for each JSON line read on
stdin ({"tool": NAME, "args": {...}}) calls that tool and prints one JSON line
with the result ({"isError": bool, "text": str}, or {"error": str} when the
call is refused). Ends the session when stdin closes.
"""

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def say(obj):
    print(json.dumps(obj), flush=True)


async def main():
    ralph, root = sys.argv[1], sys.argv[2]
    params = StdioServerParameters(command=ralph, args=["-C", root, "mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            listed = await session.list_tools()
            say({
                "server": init.server_info.name,
                "protocol": init.protocol_version,
                "tools": [t.name for t in listed.tools],
                "schemas": {t.name: t.input_schema for t in listed.tools},
            })
            while True:
                line = await anyio.to_thread.run_sync(sys.stdin.readline)
                if not line:
                    break
                req = json.loads(line)
                try:
                    res = await session.call_tool(req["tool"], req.get("args") or {})
                except Exception as e:  # a JSON-RPC error: invalid params
                    say({"error": str(e)})
                    continue
                text = "".join(c.text for c in res.content if c.type == "text")
                say({"isError": bool(res.is_error), "text": text})


anyio.run(main)
