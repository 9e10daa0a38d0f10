import test from 'ava';
import { ActorCache } from '../../src/actors/actor-cache.ts';
import { CustosError } from '../../src/errors.ts';
import { silentLogger } from '../../src/log.ts';
import type { KindContext, OutboundRequest } from '../../src/kinds/credential-kind.ts';
import { injectorConformance } from '../../src/kinds/conformance.ts';
import { bearerKind } from '../../src/kinds/bearer/index.ts';

test(injectorConformance, {
  kind: bearerKind,
  secret: (marker) => ({ value: `${marker}-bearer` }),
  badConfigs: [{ headerName: 'x-api-key' }, null, 'bearer'],
  arrange: async (marker) => ({ config: {}, onWire: `${marker}-bearer` }),
});

const ctx = (): KindContext => ({ workspaceId: 'ws', credentialId: 'c', cache: new ActorCache().scope('c'), log: silentLogger(), now: Date.now });
const req = (): OutboundRequest => ({ method: 'GET', url: new URL('https://api.example.test/v1/x'), headers: { authorization: 'Bearer agent-supplied' }, body: undefined });

test('bearer sets exactly "Authorization: Bearer <value>", replacing any earlier value', async (t) => {
  const r = req();
  const out = await bearerKind.inject(r, { value: Buffer.from('sk-test-123') }, {}, ctx());
  t.is(r.headers.authorization, 'Bearer sk-test-123');
  t.deepEqual(out.map((b) => b.toString()), ['sk-test-123']);
});

test('bearer refuses a stored value that would break the header (CR/LF, spaces) without echoing it', async (t) => {
  for (const bad of ['MARKER-x\r\nx-evil: 1', 'MARKER x', 'MARKER\u0000']) {
    const r = req();
    const err = await t.throwsAsync(bearerKind.inject(r, { value: Buffer.from(bad, 'latin1') }, {}, ctx()), { instanceOf: CustosError });
    t.is(err?.code, 'CUSTOS_ERR_VALIDATION');
    t.false(err?.message.includes('MARKER'));
    t.is(r.headers.authorization, 'Bearer agent-supplied', 'the request is unchanged');
  }
});

test('bearer describe shows the header and format only', (t) => {
  t.deepEqual(bearerKind.describe({}), { authScheme: 'bearer', headerName: 'authorization', format: 'Bearer <secret>' });
});
