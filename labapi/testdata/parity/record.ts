// record.ts replays cases.json against content-machine's own Lab server and
// writes its normalized answers to golden.json, which parity_test.go holds
// cmlab to. It is our code; it only imports their server from a
// content-machine checkout (the commit before their Lab moved to archive/,
// 97ddffe3caa9ac28b185bbb589e14c12c8650e2a) and starts it as their
// integration test (tests/integration/lab/server.test.ts) does.
//
//   CM_DIR=/path/to/content-machine npx tsx record.ts
//
// CM_DIR needs zod (and tsx to run this); nothing else of their
// dependencies is loaded by the Lab server.
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const cmDir = process.env.CM_DIR;
if (!cmDir) throw new Error('set CM_DIR to a content-machine checkout');

type Step = any;
const HEADERS = ['content-type', 'content-range', 'accept-ranges', 'cache-control', 'content-length'];
const NOT_NORMALIZED = new Set(['EXPORT', 'CURSOR']);

function normString(s: string, base: string, caps: Record<string, string>): string {
  const names = Object.keys(caps)
    .filter((n) => !NOT_NORMALIZED.has(n) && caps[n])
    .sort((a, b) => caps[b].length - caps[a].length);
  for (const n of names) s = s.split(caps[n]).join(`{${n}}`);
  s = s.split(base).join('{BASE}');
  s = s.replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/g, '{TS}');
  s = s.replace(/(?:[a-z]+_)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '{ID}');
  s = s.replace(/(export-\{SESSION\}-)\d+(\.json)/g, '$1{MS}$2');
  return s;
}

function norm(v: any, key: string, base: string, caps: Record<string, string>): any {
  if (key === 'mtimeMs' && typeof v === 'number') return '{MTIME}';
  if (key === 'version' && typeof v === 'string') return '{VERSION}';
  if (key === 'nextCursor' && typeof v === 'string' && /^\d+$/.test(v)) return '{CURSOR}';
  if (typeof v === 'string') return normString(v, base, caps);
  if (Array.isArray(v)) return v.map((x) => norm(x, '', base, caps));
  if (v && typeof v === 'object') {
    const out: any = {};
    for (const k of Object.keys(v)) out[k] = norm(v[k], k, base, caps);
    return out;
  }
  return v;
}

function subst(s: string, base: string, caps: Record<string, string>): string {
  return s.replace(/\{([A-Z_0-9]+)\}/g, (m, n) => (n === 'BASE' ? base : (caps[n] ?? m)));
}

function substDeep(v: any, base: string, caps: Record<string, string>): any {
  if (typeof v === 'string') return subst(v, base, caps);
  if (Array.isArray(v)) return v.map((x) => substDeep(x, base, caps));
  if (v && typeof v === 'object') {
    const out: any = {};
    for (const k of Object.keys(v)) out[k] = substDeep(v[k], base, caps);
    return out;
  }
  return v;
}

function pick(v: any, path: string): any {
  for (const p of path.split('.')) v = v?.[p];
  return v;
}

async function main() {
  const cases = JSON.parse(await readFile(join(here, 'cases.json'), 'utf-8'));
  const base = await mkdtemp(join(tmpdir(), 'cm-lab-parity-'));
  process.env.CM_LAB_ROOT = join(base, 'home', 'lab');
  process.env.CM_FEEDBACK_STORE_PATH = join(base, 'home', 'feedback', 'feedback.jsonl');
  const { startLabServer } = await import(join(cmDir!, 'src/lab/server/server.ts'));
  const { createLabSession } = await import(join(cmDir!, 'src/lab/session/session.ts'));
  const { resolveAllowedRoots } = await import(join(cmDir!, 'src/lab/security/path.ts'));
  await mkdir(join(base, 'allowed'), { recursive: true });
  const session = createLabSession();
  const started = await startLabServer({
    host: '127.0.0.1',
    port: 0,
    session,
    allowedRoots: await resolveAllowedRoots([join(base, 'allowed')]),
    task: null,
    exitAfterSubmit: 0,
  });
  const caps: Record<string, string> = {};
  const out: any[] = [];
  try {
    for (const st of cases.steps as Step[]) {
      if (st.write) {
        const p = join(base, st.write);
        await mkdir(dirname(p), { recursive: true });
        await writeFile(p, st.json !== undefined ? JSON.stringify(st.json) : st.text);
        continue;
      }
      if (st.sleepMs) {
        await new Promise((r) => setTimeout(r, st.sleepMs));
        continue;
      }
      if (st.file) {
        const text = await readFile(subst(st.file, base, caps), 'utf-8');
        const value = st.jsonl
          ? text.split('\n').filter((l: string) => l.trim()).map((l: string) => JSON.parse(l))
          : JSON.parse(text);
        out.push({ name: st.name, file: norm(value, '', base, caps), endsWithNewline: text.endsWith('\n') });
        continue;
      }
      const headers: Record<string, string> = {};
      if (st.method === 'POST') {
        headers['Content-Type'] = 'application/json';
        if (!st.noToken) headers['X-CM-LAB-TOKEN'] = session.token;
      }
      for (const [k, v] of Object.entries(st.headers ?? {})) headers[k] = subst(String(v), base, caps);
      const res = await fetch(new URL(subst(st.path, base, caps), started.url), {
        method: st.method,
        headers,
        body: st.body !== undefined ? JSON.stringify(substDeep(st.body, base, caps)) : undefined,
      });
      const text = await res.text();
      const rec: any = { name: st.name, status: res.status, headers: {} };
      let data: any = undefined;
      const ct = res.headers.get('content-type') ?? '';
      if (ct.includes('application/json')) data = JSON.parse(text);
      for (const h of HEADERS) {
        const v = res.headers.get(h);
        if (v === null) continue;
        if (h === 'content-length' && (data !== undefined || st.ignoreBody)) continue;
        rec.headers[h] = v;
      }
      for (const [name, path] of Object.entries(st.capture ?? {})) {
        const v = pick(data, String(path));
        if (typeof v === 'string') caps[name] = v;
      }
      if (!st.ignoreBody) {
        if (data !== undefined) rec.json = norm(data, '', base, caps);
        else rec.text = normString(text, base, caps);
      }
      out.push(rec);
    }
  } finally {
    await started.close();
    await rm(base, { recursive: true, force: true });
  }
  await writeFile(join(here, 'golden.json'), JSON.stringify(out, null, 1) + '\n');
  console.log(`recorded ${out.length} answers`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
