// A stdio MCP server in JavaScript, without any SDK: the gateway must work for a server in
// any language. It speaks the initialize handshake of revision 2025-06-18 (or 2025-11-25
// when offered), one JSON-RPC message a line, and serves one tool, `shout(text)`.
"use strict";
const readline = require("readline");

const REVISIONS = ["2025-11-25", "2025-06-18"];
const TOOL = {
  name: "shout",
  description: "The text in capitals",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
};

function send(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}

function answer(id, result) {
  send({ jsonrpc: "2.0", id, result });
}

function fail(id, code, message) {
  send({ jsonrpc: "2.0", id, error: { code, message } });
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch (e) {
    fail(null, -32700, "Parse error");
    return;
  }
  if (message.id === undefined) return; // a notification: notifications/initialized, cancelled
  const params = message.params || {};
  switch (message.method) {
    case "initialize": {
      const offered = params.protocolVersion;
      answer(message.id, {
        protocolVersion: REVISIONS.includes(offered) ? offered : "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "shouter-js", version: "1.0.0" },
      });
      break;
    }
    case "ping":
      answer(message.id, {});
      break;
    case "tools/list":
      answer(message.id, { tools: [TOOL] });
      break;
    case "tools/call":
      if (params.name !== "shout") {
        fail(message.id, -32602, `Unknown tool: ${params.name}`);
      } else {
        const text = String((params.arguments || {}).text || "");
        answer(message.id, { content: [{ type: "text", text: text.toUpperCase() }] });
      }
      break;
    default:
      fail(message.id, -32601, `Method not found: ${message.method}`);
  }
});
