import test from 'ava';
import { CATALOG, findCatalogEntry } from '../../src/kinds/catalog.ts';
import { bearerKind } from '../../src/kinds/bearer/index.ts';
import { headerKind } from '../../src/kinds/header/index.ts';
import { sigv4Kind } from '../../src/kinds/sigv4/index.ts';
import { oauth2Kind } from '../../src/kinds/oauth2/index.ts';
import { AUTH_SCHEMES } from '../../src/kinds/credential-kind.ts';

const HTTP_KINDS = { bearer: bearerKind, header: headerKind, sigv4: sigv4Kind, oauth2: oauth2Kind } as const;

test('the catalog lists at least 15 known services plus custom', (t) => {
  const known = CATALOG.filter((e) => e.id !== 'custom');
  t.true(known.length >= 15);
  t.truthy(findCatalogEntry('custom'));
  t.is(findCatalogEntry('custom')?.authScheme, null);
});

test('the catalog covers the services the issue names', (t) => {
  for (const id of ['openai', 'anthropic', 'github', 'gitlab', 'stripe', 'slack', 'twilio', 'sendgrid', 'linear', 'notion', 'datadog', 'aws-s3', 'aws-sts', 'google-apis', 'postgresql']) {
    t.truthy(findCatalogEntry(id), id);
  }
});

test('catalog entries pre-fill what the issue expects', (t) => {
  t.like(findCatalogEntry('openai'), { authScheme: 'bearer', baseUrl: 'https://api.openai.com/v1' });
  t.like(findCatalogEntry('anthropic'), { authScheme: 'header', headerName: 'x-api-key', baseUrl: 'https://api.anthropic.com' });
  t.like(findCatalogEntry('gitlab'), { authScheme: 'header', headerName: 'private-token', baseUrl: 'https://gitlab.com/api/v4' });
  t.like(findCatalogEntry('datadog'), { authScheme: 'header', headerName: 'dd-api-key' });
  t.like(findCatalogEntry('aws-s3'), { authScheme: 'sigv4', config: { service: 's3' } });
  t.like(findCatalogEntry('aws-sts'), { authScheme: 'sigv4', baseUrl: 'https://sts.amazonaws.com', config: { service: 'sts' } });
  t.like(findCatalogEntry('google-apis'), { authScheme: 'oauth2', config: { tokenUrl: 'https://oauth2.googleapis.com/token' } });
  t.like(findCatalogEntry('postgresql'), { authScheme: 'database' });
  t.is(findCatalogEntry('nope'), undefined);
});

test('catalog ids are unique slugs and schemes are known', (t) => {
  const ids = CATALOG.map((e) => e.id);
  t.is(new Set(ids).size, ids.length);
  for (const e of CATALOG) {
    t.regex(e.id, /^[a-z0-9-]+$/);
    if (e.authScheme !== null) t.true((AUTH_SCHEMES as readonly string[]).includes(e.authScheme), e.id);
  }
});

test('every HTTP catalog entry has an https base URL and a config its kind accepts', (t) => {
  for (const e of CATALOG) {
    if (!e.authScheme || !(e.authScheme in HTTP_KINDS)) continue;
    const url = new URL(e.baseUrl!);
    t.is(url.protocol, 'https:', e.id);
    t.is(url.username + url.password + url.search + url.hash, '', e.id);
    const kind = HTTP_KINDS[e.authScheme as keyof typeof HTTP_KINDS];
    const parsed = kind.configSchema.safeParse(e.config);
    t.true(parsed.success, `${e.id}: ${parsed.success ? '' : parsed.error.message}`);
    if (e.authScheme === 'header') t.is((parsed.data as { headerName: string }).headerName, e.headerName ?? '', e.id);
    if (e.docsUrl) t.is(new URL(e.docsUrl).protocol, 'https:');
  }
});

test('the catalog is frozen (a caller cannot change defaults for everyone)', (t) => {
  const entry = findCatalogEntry('aws-s3')!;
  t.throws(() => {
    (entry.config as Record<string, unknown>).service = 'evil';
  });
  t.throws(() => {
    (CATALOG as unknown as unknown[]).push({});
  });
});
