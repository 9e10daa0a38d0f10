import test from 'ava';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { auditCommand } from '../../src/cli/audit.ts';
import { verifyJsonLines } from '../../src/audit/chain.ts';
import { Client, DB_KINDS, startCustos, type TestCustos, perDatabase, captureStdout } from '../support/custos.ts';

const env = perDatabase(test);

const tmp = mkdtempSync(path.join(tmpdir(), 'custos-audit-'));

async function workspaceWithHistory(i: TestCustos) {
  const owner = await Client.signup(i.url);
  const mate = await Client.signup(i.url);
  const ws = owner.workspaceId;
  await owner.client.patch(`/workspaces/${ws}`, { name: 'renamed-1' });
  await owner.client.put(`/workspaces/${ws}/grants/${mate.accountId}`, { permissions: ['read'] });
  await mate.client.patch(`/workspaces/${ws}`, { name: 'denied' });
  await owner.client.patch(`/workspaces/${ws}`, { name: 'renamed-2' });
  return { owner, mate, ws };
}

for (const db of DB_KINDS) {
  const inst = (): TestCustos => env.get(db);

  test(`[${db}] the audit API lists a workspace's chain to manage holders; export verifies`, async (t) => {
    const { owner, ws } = await workspaceWithHistory(inst());
    const list = await owner.client.get(`/workspaces/${ws}/audit?limit=100`);
    t.is(list.status, 200);
    const actions = list.body.entries.map((e: { action: string; outcome: string }) => `${e.action}:${e.outcome}`);
    t.deepEqual(actions.slice(0, 4), ['workspace.rename:success', 'workspace.rename:denied', 'grant.create:success', 'workspace.rename:success']);
    t.is(list.body.entries.at(-1).action, 'workspace.create');
    const exp = await owner.client.get(`/workspaces/${ws}/audit/export`);
    t.is(exp.status, 200);
    t.regex(exp.headers.get('content-type')!, /ndjson/);
    const result = verifyJsonLines(exp.text);
    t.true(result.ok);
    t.is(result.entries, list.body.entries.length);
  });

  test(`[${db}] reading the audit log needs manage or reveal`, async (t) => {
    const { owner, mate, ws } = await workspaceWithHistory(inst());
    const denied = await mate.client.get(`/workspaces/${ws}/audit`);
    t.is(denied.status, 403);
    await owner.client.put(`/workspaces/${ws}/grants/${mate.accountId}`, { permissions: ['read', 'reveal'] });
    t.is((await mate.client.get(`/workspaces/${ws}/audit`)).status, 200);
  });

  test(`[${db}] custos audit export + verify: a clean export passes; edited, deleted, reordered and truncated ones name the first broken entry`, async (t) => {
    const { ws } = await workspaceWithHistory(inst());
    const env = { CUSTOS_DATA_DIR: inst().dataDir, ...(inst().pgUrl ? { CUSTOS_DATABASE_URL: inst().pgUrl! } : {}) };
    const file = path.join(tmp, `${db}-export.jsonl`);
    t.is((await captureStdout(() => auditCommand(['export', '--workspace', ws, '--output', file], env))).code, 0);
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    t.true(lines.length >= 6);
    const ok = await captureStdout(() => auditCommand(['verify', file], {}));
    t.is(ok.code, 0);
    t.regex(ok.out, /^OK: \d+ entries in 1 chain/);

    const variant = (name: string, mutate: (ls: string[]) => string[]) => {
      const f = path.join(tmp, `${db}-${name}.jsonl`);
      writeFileSync(f, `${mutate([...lines]).join('\n')}\n`);
      return f;
    };
    const edited = variant('edited', (ls) => {
      const e = JSON.parse(ls[2]!);
      e.details = { ...e.details, from: 'forged' };
      ls[2] = JSON.stringify(e);
      return ls;
    });
    const deleted = variant('deleted', (ls) => ls.filter((_, i) => i !== 2));
    const reordered = variant('reordered', (ls) => {
      [ls[2], ls[3]] = [ls[3]!, ls[2]!];
      return ls;
    });
    const truncated = variant('truncated', (ls) => [...ls.slice(0, -2), ls.at(-1)!]);
    const expectBreak = async (f: string, re: RegExp) => {
      const r = await captureStdout(() => auditCommand(['verify', f], {}));
      t.is(r.code, 1);
      t.regex(r.out, re);
    };
    await expectBreak(edited, /BROKEN at line 3 .*seq 3\): edited/);
    await expectBreak(deleted, /BROKEN at line 3 .*seq 4\): deleted/);
    await expectBreak(reordered, /BROKEN at line 3 .*seq 4\): reordered/);
    await expectBreak(truncated, /head-mismatch/);
    t.is(verifyJsonLines(readFileSync(reordered, 'utf8')).firstBreak!.line, 3);
  });

  test(`[${db}] concurrent appends to one chain produce one unbroken chain`, async (t) => {
    const { custos } = inst();
    const chain = `ws:concurrency-${db}`;
    await Promise.all(Array.from({ length: 300 }, (_, n) => custos.auditLog.append({
      chain, actor: { type: 'system', id: null }, action: 'test.append', target: { type: 'test' }, outcome: 'success', details: { n },
    })));
    let text = '';
    for await (const line of custos.auditLog.exportJsonLines([chain])) text += line;
    const result = verifyJsonLines(text);
    t.true(result.ok);
    t.is(result.entries, 300);
  });
}
