"""A stock MCP client, the official `mcp` package from PyPI, against the
hub's JSON-RPC endpoint (streamable HTTP).

Run by the hub's API test `mcp_client`, which starts the hub and asserts on
what this prints. argv[1] is the endpoint URL; stdin is a JSON plan:
    {"sessions": [{"token": "...", "calls": [{"name": "...", "arguments": {...}}]}]}
Each session connects with its own bearer credential, initialises, lists
the tools and makes its calls in order. stdout is one JSON report:
    {"sessions": [{"server": {...}, "tools": [...], "results": [...]}]}
where a result is {"isError": bool, "text": str (of a first text item, or
null), "structured": the structured content (or null), "content": [the
content items as the client parsed them, in the protocol's JSON]} or, for a
JSON-RPC error, {"error": {"code": int, "message": str}}.
"""

import asyncio
import json
import sys

import httpx2
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client


async def run_session(url, token, calls):
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                listed = await session.list_tools()
                results = []
                for call in calls:
                    try:
                        r = await session.call_tool(call["name"], call.get("arguments"))
                        first = r.content[0] if r.content else None
                        results.append(
                            {
                                "isError": r.is_error,
                                "text": first.text if getattr(first, "type", None) == "text" else None,
                                "structured": r.structured_content,
                                "content": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in r.content],
                            }
                        )
                    except MCPError as e:
                        results.append({"error": {"code": e.error.code, "message": e.error.message}})
                return {
                    "server": {"name": init.server_info.name, "tools": init.capabilities.tools is not None},
                    "tools": [
                        {
                            "name": t.name,
                            "readOnly": t.annotations.read_only_hint if t.annotations else None,
                            "inputSchema": t.input_schema,
                        }
                        for t in listed.tools
                    ],
                    "results": results,
                }


async def main():
    url = sys.argv[1]
    plan = json.load(sys.stdin)
    report = {"sessions": [await run_session(url, s["token"], s["calls"]) for s in plan["sessions"]]}
    json.dump(report, sys.stdout)


asyncio.run(main())
