// Runs content-machine's Lab integration test against cmlab: their server
// module is replaced by server.ts here (see README.md one level up).
import { defineConfig } from 'vitest/config';
import { fileURLToPath } from 'node:url';

export default defineConfig({
  resolve: {
    alias: [{ find: /^.*\/src\/lab\/server\/server$/, replacement: fileURLToPath(new URL('./server.ts', import.meta.url)) }],
  },
  test: { testTimeout: 60_000 },
});
