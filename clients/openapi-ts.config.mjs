// @hey-api/openapi-ts (pinned in package.json): the hub's OpenAPI document
// to TypeScript in typescript/src: its types, one typed function per
// operation (sdk.gen.ts) and the bundled fetch client (`client`, also
// exported from the index). clients/generate.sh sets HUB_OPENAPI to the
// document and compiles the result with tsc --strict.
import { defineConfig } from '@hey-api/openapi-ts';

if (!process.env.HUB_OPENAPI) {
  throw new Error('HUB_OPENAPI must name the OpenAPI document (clients/generate.sh sets it)');
}

export default defineConfig({
  input: process.env.HUB_OPENAPI,
  output: { path: 'typescript/src', importFileExtension: '.js', clean: true },
  logs: { file: false, level: 'warn' },
  plugins: [{ name: '@hey-api/client-fetch', exportFromIndex: true }, '@hey-api/typescript', '@hey-api/sdk'],
});
