// Compiles a set of output schemas the way the TypeScript MCP SDK does after tools/list, in this
// fresh process (a host compiles them once, cold), and prints what it cost as one JSON line.
//
// Usage: node bench/ajv_compile.mjs SDK_DIR SCHEMAS.json
//   SDK_DIR: node_modules/@modelcontextprotocol/sdk (tests/ts has the pinned one)
//   SCHEMAS.json: {"tool": outputSchema, ...}
// Driven by bench/output_schemas.py; a figure to read, never a test.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [sdkDir, schemasFile] = process.argv.slice(2);
const { AjvJsonSchemaValidator } = await import(
    pathToFileURL(join(sdkDir, 'dist', 'esm', 'validation', 'ajv-provider.js')).href
);
const schemas = Object.values(JSON.parse(readFileSync(schemasFile, 'utf8')));
// The SDK's own default validator (Client's jsonSchemaValidator), one getValidator per tool,
// as Client.cacheToolMetadata does.
const validator = new AjvJsonSchemaValidator();
const cpu = process.cpuUsage();
const started = process.hrtime.bigint();
for (const schema of schemas) {
    validator.getValidator(schema);
}
const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
const used = process.cpuUsage(cpu);
process.stdout.write(JSON.stringify({ schemas: schemas.length, wall_ms: wallMs, cpu_ms: (used.user + used.system) / 1000 }) + '\n');
