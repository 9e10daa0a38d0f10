/**
 * Workspace-actor figures, through a real Custos (SQLite) on local-dev and on SoftHSM2 (PKCS#11):
 *  - cold activation latency: forget the actor (DEK zeroed), then ActorSystem.actor(ws) = read the
 *    workspace row + one backend unwrap + actor creation; median and p95 over many rounds;
 *  - steady-state key-backend calls per secret use (must be 0 once the actor is active);
 *  - use throughput through the actor: actor.use (decrypt one field into a Buffer, zero it) and the
 *    full reveal service path (permission check, decrypt, audit write), 1 and 16 concurrent callers.
 *
 * Run: node --import tsx bench/actors.ts   (BENCH_SECONDS=2 for longer runs, BENCH_ROUNDS for activations)
 */
import { randomBytes } from 'node:crypto';
import { workspaceAad } from '../src/actors/workspace-actor.ts';
import { systemContext } from '../src/core/context.ts';
import { Client, startCustos, type TestCustos } from '../test/support/custos.ts';
import { createSoftHsmToken } from '../test/support/softhsm.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 1);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 300);

interface Row {
  backend: string;
  what: string;
  figure: string;
}
const rows: Row[] = [];

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function throughput(op: () => Promise<unknown>, concurrency: number): Promise<number> {
  for (let i = 0; i < 50; i += 1) await op();
  let count = 0;
  const start = performance.now();
  const end = start + SECONDS * 1000;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < end) {
      await op();
      count += 1;
    }
  }));
  return count / ((performance.now() - start) / 1000);
}

async function benchInstance(name: string, inst: TestCustos): Promise<void> {
  const { custos } = inst;
  const p = await Client.signup(inst.url);
  const value = `bench-${randomBytes(16).toString('hex')}`;
  const created = await p.client.post(`/workspaces/${p.workspaceId}/credentials`, {
    name: 'bench', service: 'custom', authScheme: 'bearer', baseUrl: 'https://api.example.com', secret: { value },
  });
  if (created.status !== 201) throw new Error(created.text);
  const id = created.body.credential.id as string;
  const ws = p.workspaceId;

  // Cold activation.
  const lat: number[] = [];
  const unwrapOnly: number[] = [];
  const wrapped = Buffer.from((await custos.store.read.findWorkspace(ws))!.wrapped_dek!, 'base64');
  for (let i = 0; i < ROUNDS; i += 1) {
    await custos.actors.forget(ws);
    const t0 = performance.now();
    await custos.actors.actor(ws);
    lat.push((performance.now() - t0) * 1000);
    const t1 = performance.now();
    (await custos.backend.unwrap(wrapped, workspaceAad(ws))).fill(0);
    unwrapOnly.push((performance.now() - t1) * 1000);
  }
  lat.sort((a, b) => a - b);
  unwrapOnly.sort((a, b) => a - b);
  rows.push({ backend: name, what: 'cold activation (row read + unwrap + actor), median', figure: `${pct(lat, 50).toFixed(0)} µs` });
  rows.push({ backend: name, what: 'cold activation, p95', figure: `${pct(lat, 95).toFixed(0)} µs` });
  rows.push({ backend: name, what: 'of which backend unwrap alone, median', figure: `${pct(unwrapOnly, 50).toFixed(0)} µs` });

  // Steady state: backend calls per use.
  const row = (await custos.store.read.findCredential(id))!;
  const actor = await custos.actors.actor(ws);
  const reload = () => custos.store.read.findCredential(id);
  const use = () => actor.use(row, undefined, async ({ secret }) => secret.value!.length, reload);
  const before = { ...custos.backend.stats };
  let uses = 0;
  for (let i = 0; i < 1000; i += 1) {
    await use();
    uses += 1;
  }
  for (let i = 0; i < 200; i += 1) {
    await custos.services.credentials.reveal(systemContext, id);
    uses += 1;
  }
  const calls = custos.backend.stats.wraps - before.wraps + custos.backend.stats.unwraps - before.unwraps;
  rows.push({ backend: name, what: `steady-state backend calls per secret use (${uses} uses)`, figure: `${calls / uses}` });

  for (const c of [1, 16]) {
    rows.push({ backend: name, what: `actor.use decrypt+zero ×${c}`, figure: `${Math.round(await throughput(use, c)).toLocaleString('en-US')} ops/s` });
  }
  for (const c of [1, 16]) {
    rows.push({ backend: name, what: `reveal service path (incl. audit write) ×${c}`, figure: `${Math.round(await throughput(() => custos.services.credentials.reveal(systemContext, id), c)).toLocaleString('en-US')} ops/s` });
  }
}

const local = await startCustos('sqlite');
try {
  await benchInstance('local-dev', local);
} finally {
  await local.close();
}

const token = await createSoftHsmToken({ label: 'custos-bench-actors' });
const hsm = await startCustos('sqlite', {
  keys: {
    backend: 'pkcs11',
    pkcs11: { module: token.module, tokenLabel: token.label, pin: null, pinFile: token.pinFile, kekLabel: 'bench-kek', mechanism: 'aes-gcm', sessions: 4 },
  },
});
try {
  await benchInstance('softhsm aes-gcm', hsm);
} finally {
  await hsm.close();
  await token.cleanup();
}

const w = [Math.max(...rows.map((r) => r.backend.length)), Math.max(...rows.map((r) => r.what.length)), Math.max(...rows.map((r) => r.figure.length))];
const line = (a: string, b: string, c: string): string => `| ${a.padEnd(w[0]!)} | ${b.padEnd(w[1]!)} | ${c.padStart(w[2]!)} |`;
console.log(line('backend', 'measure', 'figure'));
console.log(`|${'-'.repeat(w[0]! + 2)}|${'-'.repeat(w[1]! + 2)}|${'-'.repeat(w[2]! + 1)}:|`);
for (const r of rows) console.log(line(r.backend, r.what, r.figure));
console.log(`\nNode ${process.version}, ${SECONDS} s per throughput figure, ${ROUNDS} activation rounds; SQLite database; 2 shared cores (figures are indicative).`);
