// Drives a bundle-mcp server with the real TypeScript MCP SDK client (tests/test_ts_client.py).
//
// Usage: node mcp_client.mjs PLAN.json  — prints one JSON report on stdout.
//
// PLAN = {
//   "transport": {"kind": "stdio", "command": "...", "args": [...]}
//              | {"kind": "http", "url": "http://127.0.0.1:PORT/mcp", "token": "..." | null},
//   "timeout_ms": 20000,
//   "calls": [{"id": "...", "tool": "...", "arguments": {...}}],
//   "control": {"id": "...", "tool": "...", "arguments": {...}, "output_schema": {...}} | null,
//   "block_after_list_ms": 0
// }
//
// listTools() makes the SDK compile every advertised outputSchema (Ajv); callTool() then checks
// each structuredContent against it, error results included, and throws McpError -32602 when it
// does not match. The report records what the client saw, and never decides pass or fail.
// The optional control call re-runs one failing call with `output_schema` installed as that
// tool's outputSchema, to show what this SDK does with an envelope the schema does not accept.
// block_after_list_ms holds the event loop that long after listTools(), as a slow compile of
// the output schemas does on a busy machine, before the first call (issue 25).

import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const plan = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const sdkVersion = JSON.parse(
    readFileSync(new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url), 'utf8')
).version;
const options = { timeout: plan.timeout_ms ?? 20000 };

function makeTransport(spec) {
    if (spec.kind === 'stdio') {
        // The whole environment: the server must see the test run's cache folders.
        return new StdioClientTransport({ command: spec.command, args: spec.args, env: { ...process.env }, stderr: 'inherit' });
    }
    const headers = spec.token ? { Authorization: `Bearer ${spec.token}` } : {};
    return new StreamableHTTPClientTransport(new URL(spec.url), { requestInit: { headers } });
}

async function call(client, entry) {
    try {
        const result = await client.callTool({ name: entry.tool, arguments: entry.arguments }, undefined, options);
        return {
            id: entry.id,
            tool: entry.tool,
            isError: result.isError === true,
            structuredContent: result.structuredContent ?? null,
            content: result.content ?? [],
            protocol_error: null
        };
    } catch (error) {
        return {
            id: entry.id,
            tool: entry.tool,
            protocol_error: { code: error?.code ?? null, message: String(error?.message ?? error) }
        };
    }
}

async function main() {
    const report = { sdk_version: sdkVersion, server: null, tools: [], calls: [], control: null, fatal: null };
    const client = new Client({ name: 'bundle-mcp-ts-test', version: '1.0.0' });
    try {
        await client.connect(makeTransport(plan.transport), options);
        report.server = client.getServerVersion() ?? null;
        const listed = await client.listTools(undefined, options);
        report.tools = listed.tools.map(tool => ({ name: tool.name, outputSchema: tool.outputSchema ?? null }));
        const blockedUntil = Date.now() + (plan.block_after_list_ms ?? 0);
        while (Date.now() < blockedUntil) {
            // busy: no timer, no socket event runs meanwhile, exactly as during Ajv's compile
        }
        for (const entry of plan.calls) {
            report.calls.push(await call(client, entry));
        }
        if (plan.control) {
            const tools = listed.tools.map(tool =>
                tool.name === plan.control.tool ? { ...tool, outputSchema: plan.control.output_schema } : tool
            );
            // A private method in the typings, public at run time: the same path listTools() takes.
            client.cacheToolMetadata(tools);
            report.control = await call(client, plan.control);
        }
    } catch (error) {
        report.fatal = String(error?.stack ?? error);
    } finally {
        await client.close().catch(() => {});
    }
    process.stdout.write(JSON.stringify(report) + '\n');
}

await main();
