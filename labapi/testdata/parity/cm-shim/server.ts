// A stand-in for content-machine's src/lab/server/server.ts that starts
// `cmlab serve` instead, so their Lab integration test
// (tests/integration/lab/server.test.ts) runs unchanged against cmlab.
// Our code; vitest.config.ts aliases their server module to this file.
//
// startLabServer takes their options and starts `$CMLAB_BIN serve` on a
// free port with the same allowed roots, task and exitAfterSubmit, its
// home chosen so that its feedback store is $CM_FEEDBACK_STORE_PATH (the
// file their test reads back with their own schema). cmlab makes its own
// session id and token; they are written into the session object the test
// holds, as their server would have used that object's.
import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { dirname, resolve } from 'node:path';

export async function startLabServer(options: any) {
  const bin = process.env.CMLAB_BIN;
  if (!bin) throw new Error('set CMLAB_BIN to a cmlab binary');
  const store = process.env.CM_FEEDBACK_STORE_PATH;
  if (!store) throw new Error('CM_FEEDBACK_STORE_PATH is not set');
  const home = resolve(dirname(dirname(store)));
  const args = ['--home', home, '--json', 'serve', '--listen', `${options.host}:${options.port}`, '--quiet'];
  for (const r of options.allowedRoots ?? []) args.push('--allow-root', r.path);
  if (options.task?.type === 'compare') args.push('--task-compare', options.task.experimentId);
  if (options.task?.type === 'review') args.push('--task-review', options.task.runId);
  if (options.exitAfterSubmit) args.push('--exit-after-submit', String(options.exitAfterSubmit));
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const server = new EventEmitter();
  const waitForClose = new Promise<void>((res) =>
    child.on('exit', () => {
      server.emit('close');
      res();
    })
  );
  let out = '';
  const info: any = await new Promise((res, rej) => {
    child.stdout.on('data', (b) => {
      out += String(b);
      try {
        res(JSON.parse(out));
      } catch {
        // not the whole value yet
      }
    });
    child.on('exit', (code) => rej(new Error(`cmlab serve exited (${code}) before listening`)));
  });
  const url = `http://${info.listen}/`;
  const config = await (await fetch(new URL('/api/config', url))).json();
  options.session.sessionId = config.sessionId;
  options.session.token = config.token;
  return {
    url,
    server,
    waitForClose,
    close: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await waitForClose;
    },
  };
}
