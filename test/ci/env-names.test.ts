import test from 'ava';
import { buildCiEnv, deriveEnvName, isReservedEnvName, RESERVED_ENV_NAMES, type EnvEntry } from '../../src/ci/env-names.ts';
import { CustosError } from '../../src/errors.ts';
import { cred, marker } from './contract-server.ts';

const asMap = (entries: EnvEntry[]): Record<string, string> => Object.fromEntries(entries.map((e) => [e.name, e.value]));

test('deriveEnvName upper-cases, collapses non-alphanumerics to one _, trims _, and prefixes a leading digit', (t) => {
  t.is(deriveEnvName('Stripe prod'), 'STRIPE_PROD');
  t.is(deriveEnvName('  stripe--prod!! key '), 'STRIPE_PROD_KEY');
  t.is(deriveEnvName('__github.token__'), 'GITHUB_TOKEN');
  t.is(deriveEnvName('2fa seed'), '_2FA_SEED');
  t.is(deriveEnvName('Clé API'), 'CL_API');
  t.is(deriveEnvName('!!!'), '');
});

test('bearer and header credentials become <NAME>; envName overrides the name verbatim', (t) => {
  const v1 = marker();
  const v2 = marker();
  const env = asMap(buildCiEnv([
    cred('Stripe prod', 'bearer', { value: v1 }),
    cred('sendgrid', 'header', { value: v2 }, { envName: 'SG_KEY', config: { headerName: 'x-api-key' } }),
  ]));
  t.deepEqual(env, { STRIPE_PROD: v1, SG_KEY: v2 });
});

test('one SigV4 credential gets prefixed and unprefixed AWS_* names, region from config (not secret)', (t) => {
  const entries = buildCiEnv([cred('aws deploy', 'sigv4', { accessKeyId: 'AKIAEXAMPLE1', secretAccessKey: marker(), sessionToken: marker() }, { config: { region: 'eu-west-1', service: 's3' } })]);
  const env = asMap(entries);
  t.deepEqual(Object.keys(env).sort(), [
    'AWS_ACCESS_KEY_ID', 'AWS_DEFAULT_REGION', 'AWS_DEPLOY_AWS_ACCESS_KEY_ID', 'AWS_DEPLOY_AWS_REGION',
    'AWS_DEPLOY_AWS_SECRET_ACCESS_KEY', 'AWS_DEPLOY_AWS_SESSION_TOKEN', 'AWS_REGION', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN',
  ]);
  t.is(env.AWS_ACCESS_KEY_ID, 'AKIAEXAMPLE1');
  t.is(env.AWS_REGION, 'eu-west-1');
  t.is(env.AWS_DEFAULT_REGION, 'eu-west-1');
  t.false(entries.find((e) => e.name === 'AWS_REGION')!.secret);
  t.true(entries.find((e) => e.name === 'AWS_SECRET_ACCESS_KEY')!.secret);
});

test('SigV4 without session token or region sets neither', (t) => {
  const env = asMap(buildCiEnv([cred('aws', 'sigv4', { accessKeyId: 'AKIA1234', secretAccessKey: 'secret123' })]));
  t.deepEqual(Object.keys(env).sort(), ['AWS_ACCESS_KEY_ID', 'AWS_AWS_ACCESS_KEY_ID', 'AWS_AWS_SECRET_ACCESS_KEY', 'AWS_SECRET_ACCESS_KEY']);
});

test('two SigV4 credentials are refused as ambiguous unless --aws-default picks the one for AWS_*', (t) => {
  const a = cred('aws prod', 'sigv4', { accessKeyId: 'AKIAPROD', secretAccessKey: 'prodsecret' });
  const b = cred('aws staging', 'sigv4', { accessKeyId: 'AKIASTAGE', secretAccessKey: 'stagesecret' });
  const err = t.throws(() => buildCiEnv([a, b]), { instanceOf: CustosError });
  t.is(err.code, 'CUSTOS_ERR_CONFLICT');
  t.regex(err.message, /"aws prod", "aws staging".*--only.*--aws-default/s);
  t.false(err.message.includes('prodsecret'));
  const env = asMap(buildCiEnv([a, b], { awsDefault: 'aws staging' }));
  t.is(env.AWS_ACCESS_KEY_ID, 'AKIASTAGE');
  t.is(env.AWS_PROD_AWS_ACCESS_KEY_ID, 'AKIAPROD');
  t.is(env.AWS_STAGING_AWS_SECRET_ACCESS_KEY, 'stagesecret');
  t.throws(() => buildCiEnv([a, b], { awsDefault: 'nope' }), { message: /--aws-default "nope" is not one of/ });
});

test('database is <NAME>_URL plus DATABASE_URL when exactly one database credential is injected', (t) => {
  const dsn = `postgres://app:${marker()}@db/app`;
  t.deepEqual(asMap(buildCiEnv([cred('main db', 'database', { dsn })])), { MAIN_DB_URL: dsn, DATABASE_URL: dsn });
  t.deepEqual(asMap(buildCiEnv([cred('reports url', 'database', { dsn })])), { REPORTS_URL: dsn, DATABASE_URL: dsn });
  t.deepEqual(asMap(buildCiEnv([cred('database url', 'database', { dsn })])), { DATABASE_URL: dsn });
  t.deepEqual(asMap(buildCiEnv([cred('x', 'database', { dsn }, { envName: 'PGURI' })])), { PGURI: dsn, DATABASE_URL: dsn });
  const two = asMap(buildCiEnv([cred('main db', 'database', { dsn }), cred('replica', 'database', { dsn: 'postgres://r' })]));
  t.deepEqual(Object.keys(two).sort(), ['MAIN_DB_URL', 'REPLICA_URL']);
});

test('oauth2 and ssh credentials become prefixed variable groups; optional fields only when present', (t) => {
  const env = asMap(buildCiEnv([
    cred('google ads', 'oauth2', { clientId: 'cid-1234', clientSecret: marker(), refreshToken: marker() }),
    cred('deploy key', 'ssh', { privateKey: '-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n' }),
  ]));
  t.deepEqual(Object.keys(env).sort(), ['DEPLOY_KEY_PRIVATE_KEY', 'GOOGLE_ADS_CLIENT_ID', 'GOOGLE_ADS_CLIENT_SECRET', 'GOOGLE_ADS_REFRESH_TOKEN']);
  const withPass = asMap(buildCiEnv([cred('k', 'ssh', { privateKey: 'pk-data', passphrase: 'pp-data' })]));
  t.deepEqual(withPass, { K_PRIVATE_KEY: 'pk-data', K_PASSPHRASE: 'pp-data' });
});

test('two credentials mapping to the same variable are refused, naming both and no value', (t) => {
  const secret = marker();
  const err = t.throws(() => buildCiEnv([cred('stripe-prod', 'bearer', { value: secret }), cred('Stripe prod', 'bearer', { value: 'other-value' })]), { instanceOf: CustosError });
  t.is(err.code, 'CUSTOS_ERR_CONFLICT');
  t.regex(err.message, /"stripe-prod" and "Stripe prod" would both set STRIPE_PROD/);
  t.false(err.message.includes(secret));
  // A derived alias colliding with an explicit name is refused too (not silently overwritten).
  t.throws(() => buildCiEnv([cred('main db', 'database', { dsn: 'postgres://a' }), cred('x', 'bearer', { value: 'vvvv' }, { envName: 'DATABASE_URL' })]), { message: /would both set DATABASE_URL/ });
  // Case-insensitive: Windows runners would merge them.
  t.throws(() => buildCiEnv([cred('a', 'bearer', { value: 'vvvv' }, { envName: 'Token' }), cred('b', 'bearer', { value: 'wwww' }, { envName: 'TOKEN' })]), { message: /would both set TOKEN/ });
});

test('names that would clobber the runtime are refused (PATH, LD_PRELOAD, NODE_OPTIONS, CUSTOS_CI_TOKEN…)', (t) => {
  for (const name of ['path', 'Home', 'LD_PRELOAD', 'ld library path', 'NODE_OPTIONS', 'custos ci token', 'custos url', 'BASH_ENV', 'dyld insert libraries', 'GIT_SSH_COMMAND', 'https_proxy']) {
    const err = t.throws(() => buildCiEnv([cred(name, 'bearer', { value: 'value-1234' })]), { instanceOf: CustosError }, name);
    t.is(err.code, 'CUSTOS_ERR_VALIDATION');
    t.regex(err.message, /refuses to override/);
  }
  t.throws(() => buildCiEnv([cred('ok', 'bearer', { value: 'value-1234' }, { envName: 'PATH' })]), { message: /would set PATH/ });
  // Ordinary names that merely look like system ones are allowed.
  t.notThrows(() => buildCiEnv([cred('github token', 'bearer', { value: 'ghp_1234' }), cred('npm token', 'bearer', { value: 'npm_1234' })]));
  t.true(RESERVED_ENV_NAMES.includes('PATH'));
  t.true(isReservedEnvName('LD_AUDIT'));
  t.false(isReservedEnvName('STRIPE_PROD'));
});

test('bad names, missing secret fields and unknown schemes are refused with a clear message', (t) => {
  t.throws(() => buildCiEnv([cred('!!!', 'bearer', { value: 'value-1234' })]), { message: /Cannot derive an environment variable name from credential "!!!"/ });
  t.throws(() => buildCiEnv([cred('a', 'bearer', { value: 'value-1234' }, { envName: 'A-B' })]), { message: /not a valid environment variable name/ });
  t.throws(() => buildCiEnv([cred('a', 'bearer', { value: 'value-1234' }, { envName: '1ABC' })]), { message: /not a valid environment variable name/ });
  t.throws(() => buildCiEnv([cred('a', 'sigv4', { accessKeyId: 'AKIA' })]), { message: /"a" \(sigv4\) has no "secretAccessKey"/ });
  t.throws(() => buildCiEnv([cred('a', 'kerberos', { value: 'v' })]), { message: /auth scheme "kerberos", which this version of custos cannot inject/ });
});

test('an empty credential list is an empty environment', (t) => {
  t.deepEqual(buildCiEnv([]), []);
});
