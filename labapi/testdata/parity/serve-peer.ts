// serve-peer.ts starts content-machine's own Lab server on 127.0.0.1 (a
// free port, printed on stdout) with a fresh store in the system's
// temporary directory, for `cmlab bench api --peer URL`. It is our code; it
// only imports their server from a content-machine checkout at
// 97ddffe3caa9ac28b185bbb589e14c12c8650e2a, as record.ts does.
//
//   CM_DIR=/path/to/content-machine npx tsx serve-peer.ts
//
// It serves until killed.
import { mkdtemp, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const cmDir = process.env.CM_DIR;
if (!cmDir) throw new Error('set CM_DIR to a content-machine checkout');
const base = await mkdtemp(join(tmpdir(), 'cm-lab-peer-'));
process.env.CM_LAB_ROOT = join(base, 'home', 'lab');
process.env.CM_FEEDBACK_STORE_PATH = join(base, 'home', 'feedback', 'feedback.jsonl');
const { startLabServer } = await import(join(cmDir, 'src/lab/server/server.ts'));
const { createLabSession } = await import(join(cmDir, 'src/lab/session/session.ts'));
const { resolveAllowedRoots } = await import(join(cmDir, 'src/lab/security/path.ts'));
await mkdir(join(base, 'allowed'), { recursive: true });
const started = await startLabServer({
  host: '127.0.0.1',
  port: 0,
  session: createLabSession(),
  allowedRoots: await resolveAllowedRoots([join(base, 'allowed')]),
  task: null,
  exitAfterSubmit: 0,
});
console.log(started.url);
