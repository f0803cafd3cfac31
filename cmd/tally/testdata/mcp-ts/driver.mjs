// A driver for the official TypeScript MCP SDK client, used by
// cmd/tally/mcp_ts_test.go: the Go test decides what each agent does, this
// script does it through the SDK exactly as an agent on that SDK would
// (listTools first, which makes callTool() check results against the tools'
// output schemas), and reports what callTool() returned or threw.
//
// One JSON request per stdin line, one JSON reply per stdout line:
//   {"op":"start","agent":A,"command":PATH,"args":[...]}
//       -> {"server":{name,version},"tools":[...]}       spawns and connects
//   {"op":"call","agent":A,"tool":T,"arguments":{...}}
//       -> {"result":CallToolResult} or {"threw":{"code":N,"message":S}}
// Each reply may instead be {"fatal":S} for a request the driver could not
// carry out. Stdin's end closes every client and exits.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const agents = new Map();

async function handle(req) {
  switch (req.op) {
    case "start": {
      const client = new Client({ name: req.agent, version: "1" });
      // The server gets this process's environment (the test's), not the
      // SDK's default subset.
      await client.connect(new StdioClientTransport({ command: req.command, args: req.args, env: process.env, stderr: "inherit" }));
      const { tools } = await client.listTools();
      agents.set(req.agent, client);
      return { server: client.getServerVersion(), tools };
    }
    case "call": {
      const client = agents.get(req.agent);
      if (!client) return { fatal: `no agent ${req.agent}` };
      try {
        return { result: await client.callTool({ name: req.tool, arguments: req.arguments ?? {} }) };
      } catch (e) {
        return { threw: { code: e.code ?? null, message: String(e.message ?? e) } };
      }
    }
    default:
      return { fatal: `unknown op ${req.op}` };
  }
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  let reply;
  try {
    reply = await handle(JSON.parse(line));
  } catch (e) {
    reply = { fatal: String(e?.stack ?? e) };
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
}
for (const client of agents.values()) await client.close();
