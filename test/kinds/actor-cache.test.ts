import test from 'ava';
import { ActorCache } from '../../src/actors/actor-cache.ts';

const isZero = (b: Buffer) => b.every((byte) => byte === 0);
const secretish = () => Buffer.from('DERIVED-KEY-MATERIAL');

function clock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}

test('get returns a live entry and nothing for an unknown key', (t) => {
  const c = clock();
  const cache = new ActorCache({ now: c.now });
  const v = secretish();
  cache.set('k', v, c.now() + 1000);
  t.is(cache.get('k'), v);
  t.is(cache.get('other'), undefined);
  t.is(cache.size, 1);
});

test('overwriting an entry zeroes the old Buffer', (t) => {
  const c = clock();
  const cache = new ActorCache({ now: c.now });
  const old = secretish();
  const next = Buffer.from('NEW');
  cache.set('k', old, c.now() + 1000);
  cache.set('k', next, c.now() + 1000);
  t.true(isZero(old));
  t.is(cache.get('k')?.toString(), 'NEW');
});

test('re-setting the same Buffer does not zero it', (t) => {
  const c = clock();
  const cache = new ActorCache({ now: c.now });
  const v = secretish();
  cache.set('k', v, c.now() + 1000);
  cache.set('k', v, c.now() + 2000);
  t.is(cache.get('k')?.toString(), 'DERIVED-KEY-MATERIAL');
});

test('an expired entry is zeroed and dropped when read', (t) => {
  const c = clock();
  const cache = new ActorCache({ now: c.now });
  const v = secretish();
  cache.set('k', v, c.now() + 1000);
  c.advance(1000);
  t.is(cache.get('k'), undefined);
  t.true(isZero(v));
  t.is(cache.size, 0);
});

test('sweep zeroes expired entries nobody reads and keeps live ones', (t) => {
  const c = clock();
  const cache = new ActorCache({ now: c.now });
  const old = secretish();
  const live = secretish();
  cache.set('old', old, c.now() + 10);
  cache.set('live', live, c.now() + 10_000);
  c.advance(11);
  t.is(cache.sweep(), 1);
  t.true(isZero(old));
  t.false(isZero(live));
});

test('the sweep timer zeroes expired entries without any read', async (t) => {
  const cache = new ActorCache({ sweepIntervalMs: 10 });
  const v = secretish();
  cache.set('k', v, Date.now() + 5);
  await new Promise((r) => setTimeout(r, 60));
  t.true(isZero(v));
  cache.close();
});

test('setting an already-expired entry zeroes the Buffer and stores nothing', (t) => {
  const c = clock();
  const cache = new ActorCache({ now: c.now });
  const v = secretish();
  cache.set('k', v, c.now());
  t.true(isZero(v));
  t.is(cache.get('k'), undefined);
});

test('delete zeroes the Buffer', (t) => {
  const c = clock();
  const cache = new ActorCache({ now: c.now });
  const v = secretish();
  cache.set('k', v, c.now() + 1000);
  cache.delete('k');
  t.true(isZero(v));
  t.is(cache.get('k'), undefined);
});

test('clear zeroes every Buffer (passivation, shutdown)', (t) => {
  const c = clock();
  const cache = new ActorCache({ now: c.now });
  const values = [secretish(), secretish(), secretish()];
  values.forEach((v, i) => cache.set(`k${i}`, v, c.now() + 1000));
  cache.scope('cred-a').set('x', values[0]!, c.now() + 1000);
  cache.clear();
  t.true(values.every(isZero));
  t.is(cache.size, 0);
});

test('close stops the timer and zeroes everything', (t) => {
  const cache = new ActorCache({ sweepIntervalMs: 1000 });
  const v = secretish();
  cache.set('k', v, Date.now() + 60_000);
  cache.close();
  t.true(isZero(v));
});

test('refuses non-Buffer values and infinite expiry', (t) => {
  const cache = new ActorCache();
  t.throws(() => cache.set('k', 'string' as unknown as Buffer, Date.now() + 1000), { instanceOf: TypeError });
  t.throws(() => cache.set('k', secretish(), Number.POSITIVE_INFINITY), { instanceOf: TypeError });
});

test('scoped views namespace keys per credential', (t) => {
  const c = clock();
  const cache = new ActorCache({ now: c.now });
  const a = cache.scope('cred-a');
  const b = cache.scope('cred-b');
  a.set('token', Buffer.from('A'), c.now() + 1000);
  b.set('token', Buffer.from('B'), c.now() + 1000);
  t.is(a.get('token')?.toString(), 'A');
  t.is(b.get('token')?.toString(), 'B');
  t.is(cache.get('token'), undefined, 'the root does not see scoped keys unprefixed');
  t.is(a.size, 1);
  t.is(cache.size, 2);
  t.is(cache.scope('cred-a'), a, 'views are memoised');
});

test('a scoped delete cannot evict another credential', (t) => {
  const c = clock();
  const cache = new ActorCache({ now: c.now });
  const bValue = Buffer.from('B');
  cache.scope('cred-b').set('token', bValue, c.now() + 1000);
  cache.scope('cred-a').delete('token');
  t.is(cache.scope('cred-b').get('token'), bValue);
  t.false(isZero(bValue));
});

test('scope(id).clear zeroes that credential only (secret replaced)', (t) => {
  const c = clock();
  const cache = new ActorCache({ now: c.now });
  const a1 = secretish();
  const a2 = secretish();
  const b1 = secretish();
  cache.scope('cred-a').set('k1', a1, c.now() + 1000);
  cache.scope('cred-a').set('k2', a2, c.now() + 1000);
  cache.scope('cred-b').set('k1', b1, c.now() + 1000);
  cache.scope('cred-a').clear();
  t.true(isZero(a1) && isZero(a2));
  t.false(isZero(b1));
  t.is(cache.scope('cred-a').size, 0);
  t.is(cache.scope('cred-b').size, 1);
});

test('scope refuses empty ids and ids containing NUL (no prefix collisions)', (t) => {
  const cache = new ActorCache();
  t.throws(() => cache.scope(''), { instanceOf: TypeError });
  t.throws(() => cache.scope('a\u0000b'), { instanceOf: TypeError });
});

test('set zeroes other expired entries (a key nobody reads again is not left behind)', (t) => {
  const c = clock();
  const cache = new ActorCache({ now: c.now });
  const yesterday = secretish();
  cache.set('day1', yesterday, c.now() + 10);
  c.advance(20);
  cache.set('day2', secretish(), c.now() + 10);
  t.true(isZero(yesterday));
});
