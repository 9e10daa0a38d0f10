/**
 * `custos run` end to end on the client side: the real entry point spawned as a process, against a
 * local stand-in of POST /api/v1/ci/secrets (contract-server.ts).
 */
import test from 'ava';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { ciToken, cred, marker, startContractServer, type ContractServer } from './contract-server.ts';
import { nodeScript, runCustos, startCustos } from './run-harness.ts';

let server: ContractServer;
let dir: string;
test.before(async () => {
  server = await startContractServer();
  dir = mkdtempSync(join(tmpdir(), 'custos-run-test-'));
});
test.after.always(async () => {
  await server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

/** A token granted `credentials` on the stand-in, and the env that points custos run at it. */
function grantEnv(credentials = [cred('Stripe prod', 'bearer', { value: marker('STRIPE') })]): { token: string; env: Record<string, string> } {
  const token = ciToken();
  server.grant(token, { status: 200, credentials, workspace: { id: 'ws_ci', name: 'ci' } });
  return { token, env: { CUSTOS_CI_TOKEN: token, CUSTOS_URL: server.url } };
}

/** Child script: prints NAME=value and NAME#sha256(value) for each name given. */
const PRINT_ENV = `const {createHash}=require('node:crypto');for(const n of process.argv.slice(1)){const v=process.env[n];console.log(n+'='+v);console.log(n+'#'+(v===undefined?'unset':createHash('sha256').update(v).digest('hex')))}`;

function fullSet() {
  const s = {
    stripe: marker('STRIPE'),
    akid: `AKIA${marker('K').slice(2, 18).toUpperCase()}`,
    aws: marker('AWSSECRET'),
    session: marker('SESSION'),
    dsn: `postgres://app:${marker('PW')}@db.internal:5432/app`,
    clientId: marker('CID'),
    clientSecret: marker('CSECRET'),
    refresh: marker('REFRESH'),
  };
  const credentials = [
    cred('Stripe prod', 'bearer', { value: s.stripe }),
    cred('aws deploy', 'sigv4', { accessKeyId: s.akid, secretAccessKey: s.aws, sessionToken: s.session }, { config: { region: 'eu-west-1', service: 's3' } }),
    cred('main db', 'database', { dsn: s.dsn }),
    cred('google ads', 'oauth2', { clientId: s.clientId, clientSecret: s.clientSecret, refreshToken: s.refresh }),
  ];
  const expected: Record<string, string> = {
    STRIPE_PROD: s.stripe,
    AWS_ACCESS_KEY_ID: s.akid, AWS_SECRET_ACCESS_KEY: s.aws, AWS_SESSION_TOKEN: s.session,
    AWS_DEPLOY_AWS_ACCESS_KEY_ID: s.akid, AWS_DEPLOY_AWS_SECRET_ACCESS_KEY: s.aws, AWS_DEPLOY_AWS_SESSION_TOKEN: s.session,
    MAIN_DB_URL: s.dsn, DATABASE_URL: s.dsn,
    GOOGLE_ADS_CLIENT_ID: s.clientId, GOOGLE_ADS_CLIENT_SECRET: s.clientSecret, GOOGLE_ADS_REFRESH_TOKEN: s.refresh,
  };
  return { secrets: s, credentials, expected };
}

test('secrets are injected under the documented names and masked as *** in the child\'s output by default', async (t) => {
  const { secrets, credentials, expected } = fullSet();
  const { env } = grantEnv(credentials);
  const names = [...Object.keys(expected), 'AWS_REGION', 'AWS_DEFAULT_REGION', 'AWS_DEPLOY_AWS_REGION'];
  const r = await runCustos(['--', ...nodeScript(PRINT_ENV, ...names)], env);
  t.is(r.code, 0, r.stderr);
  for (const [name, value] of Object.entries(expected)) {
    t.true(r.stdout.includes(`${name}=***\n`), `${name} masked`);
    t.true(r.stdout.includes(`${name}#${sha(value)}\n`), `${name} holds the right value`);
  }
  // Non-secret config is not masked.
  t.true(r.stdout.includes('AWS_REGION=eu-west-1\n'));
  t.true(r.stdout.includes('AWS_DEFAULT_REGION=eu-west-1\n'));
  t.true(r.stdout.includes('AWS_DEPLOY_AWS_REGION=eu-west-1\n'));
  for (const v of Object.values(secrets)) {
    t.false(r.stdout.includes(v), 'no secret value in stdout');
    t.false(r.stderr.includes(v), 'no secret value in stderr');
  }
});

test('--no-mask passes the child\'s output through raw', async (t) => {
  const { secrets, credentials } = fullSet();
  const { env } = grantEnv(credentials);
  const r = await runCustos(['--no-mask', '--', ...nodeScript(PRINT_ENV, 'STRIPE_PROD', 'MAIN_DB_URL', 'AWS_SECRET_ACCESS_KEY')], env);
  t.is(r.code, 0, r.stderr);
  t.true(r.stdout.includes(`STRIPE_PROD=${secrets.stripe}\n`));
  t.true(r.stdout.includes(`MAIN_DB_URL=${secrets.dsn}\n`));
  t.true(r.stdout.includes(`AWS_SECRET_ACCESS_KEY=${secrets.aws}\n`));
});

test('stderr is masked separately from stdout', async (t) => {
  const secret = marker('STDERR');
  const { env } = grantEnv([cred('tok', 'bearer', { value: secret })]);
  const r = await runCustos(['--', ...nodeScript('console.error("err:" + process.env.TOK); console.log("out:" + process.env.TOK)')], env);
  t.is(r.code, 0);
  t.is(r.stdout, 'out:***\n');
  t.is(r.stderr, 'err:***\n');
});

test('a secret the child writes one byte at a time across many chunks is still masked', async (t) => {
  const secret = marker('BYTEWISE');
  const { env } = grantEnv([cred('tok', 'bearer', { value: secret })]);
  // One write per byte with a pause between: each byte reaches custos run as its own chunk.
  const script = `const s='['+process.env.TOK+']\\n';let i=0;const step=()=>{if(i<s.length){process.stdout.write(s[i++]);setTimeout(step,2)}};step()`;
  const r = await runCustos(['--', ...nodeScript(script)], env);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, '[***]\n');
});

test('binary output passes through unchanged except for the masked secret', async (t) => {
  const secret = marker('BIN');
  const { env } = grantEnv([cred('tok', 'bearer', { value: secret })]);
  const script = `const b=Buffer.alloc(256*300);for(let i=0;i<b.length;i++)b[i]=(i*7+i>>8)&255;process.stdout.write(b);process.stdout.write(process.env.TOK);process.stdout.write(b)`;
  const r = await runCustos(['--', ...nodeScript(script)], env);
  t.is(r.code, 0);
  const b = Buffer.alloc(256 * 300);
  for (let i = 0; i < b.length; i++) b[i] = (i * 7 + i >> 8) & 255;
  t.true(r.stdoutBytes.equals(Buffer.concat([b, Buffer.from('***'), b])));
});

test('the CI token is not passed to the child; the rest of the environment is', async (t) => {
  const { token, env } = grantEnv();
  const r = await runCustos(['--no-mask', '--', ...nodeScript('console.log(JSON.stringify(process.env))')], { ...env, RUNNER_MARK: 'kept' });
  t.is(r.code, 0, r.stderr);
  const childEnv = JSON.parse(r.stdout) as Record<string, string>;
  t.is(childEnv.CUSTOS_CI_TOKEN, undefined);
  t.false(r.stdout.includes(token));
  t.is(childEnv.RUNNER_MARK, 'kept');
  t.is(childEnv.CUSTOS_URL, server.url);
});

test('the request carries the token as Bearer and --workspace / --only in the body', async (t) => {
  const { token, env } = grantEnv([cred('a', 'bearer', { value: 'value-aaaa' }), cred('b', 'bearer', { value: 'value-bbbb' })]);
  const r = await runCustos(['--workspace', 'ci', '--only', 'b', '--', ...nodeScript(PRINT_ENV, 'A', 'B')], env);
  t.is(r.code, 0, r.stderr);
  t.true(r.stdout.includes('A=undefined\n'));
  t.true(r.stdout.includes(`B#${sha('value-bbbb')}\n`));
  const req = server.requests.find((q) => q.authorization === `Bearer ${token}`);
  t.truthy(req);
  t.is(req!.method, 'POST');
  t.is(req!.path, '/api/v1/ci/secrets');
  t.deepEqual(req!.body, { workspace: 'ci', only: ['b'] });
});

test('stdin is passed through to the child', async (t) => {
  const { env } = grantEnv();
  const r = await runCustos(['--', ...nodeScript('process.stdin.pipe(process.stdout)')], env, 'line one\nline two\n');
  t.is(r.code, 0);
  t.is(r.stdout, 'line one\nline two\n');
});

for (const code of [0, 1, 42]) {
  test(`custos run exits with the child's exit code ${code}`, async (t) => {
    const { env } = grantEnv();
    const r = await runCustos(['--', ...nodeScript(`process.exit(${code})`)], env);
    t.is(r.code, code);
    t.is(r.stderr, '');
  });
}

const TRAPS: Record<string, number> = { SIGTERM: 7, SIGINT: 10, SIGHUP: 11, SIGQUIT: 12 };
for (const [signal, exitCode] of Object.entries(TRAPS)) {
  test(`${signal} sent to custos run is forwarded to the child (child traps it and exits ${exitCode})`, async (t) => {
    const { env } = grantEnv();
    const script = `process.on(${JSON.stringify(signal)},()=>{console.log('got');process.exit(${exitCode})});console.log('ready');setInterval(()=>{},1000)`;
    const run = startCustos(['--', ...nodeScript(script)], env);
    await run.waitForStdout('ready');
    run.child.kill(signal as NodeJS.Signals);
    const r = await run.result;
    t.is(r.code, exitCode, r.stderr);
    t.is(r.signal, null);
    t.is(r.stdout, 'ready\ngot\n');
  });
}

test('a child killed by SIGKILL makes custos run exit 137 (128 + 9)', async (t) => {
  const { env } = grantEnv();
  const r = await runCustos(['--', ...nodeScript(`process.kill(process.pid, 'SIGKILL')`)], env);
  t.is(r.code, 137);
});

test('a child that dies of a forwarded SIGTERM it does not trap gives 143', async (t) => {
  const { env } = grantEnv();
  const run = startCustos(['--', ...nodeScript(`console.log('ready');setInterval(()=>{},1000)`)], env);
  await run.waitForStdout('ready');
  run.child.kill('SIGTERM');
  t.is((await run.result).code, 143);
});

test('a command that does not exist gives 127 and a clear message', async (t) => {
  const { env } = grantEnv();
  const r = await runCustos(['--', 'custos-no-such-command-xyz', '--flag'], env);
  t.is(r.code, 127);
  t.is(r.stderr, 'custos run: command not found: custos-no-such-command-xyz\n');
});

test('a command that is not executable gives 126', async (t) => {
  const { env } = grantEnv();
  const r = await runCustos(['--', dir], env);
  t.is(r.code, 126);
  t.regex(r.stderr, /^custos run: cannot execute /);
});

// --- refusals: nothing runs -------------------------------------------------------------------

/** A command that would leave a marker file if it ran. */
function markerCommand(): { file: string; command: string[] } {
  const file = join(dir, `ran-${marker('F')}`);
  return { file, command: nodeScript(`require('node:fs').writeFileSync(${JSON.stringify(file)}, 'ran')`) };
}

async function refused(t: import('ava').ExecutionContext, args: string[], env: Record<string, string | undefined>, code: number, message: RegExp): Promise<void> {
  const { file, command } = markerCommand();
  const r = await runCustos([...args, '--', ...command], env);
  t.is(r.code, code, r.stderr);
  t.regex(r.stderr, message);
  t.regex(r.stderr, /^custos run: [^\n]+\n$/, 'exactly one line on stderr');
  t.is(r.stdout, '');
  t.false(existsSync(file), 'the command did not run');
  if (env.CUSTOS_CI_TOKEN) t.false(r.stderr.includes(env.CUSTOS_CI_TOKEN), 'the token is not echoed');
}

test('a revoked or expired token (401) is refused before running, exit 3', async (t) => {
  const token = ciToken();
  server.grant(token, { status: 401 });
  await refused(t, [], { CUSTOS_CI_TOKEN: token, CUSTOS_URL: server.url }, 3, /the CI token was refused \(CUSTOS_ERR_TOKEN_INVALID: .*revoked/);
});

test('an unknown token (401) is refused before running, exit 3', async (t) => {
  await refused(t, [], { CUSTOS_CI_TOKEN: ciToken(), CUSTOS_URL: server.url }, 3, /the CI token was refused/);
});

test('a token without reveal (403) is refused before running, exit 3', async (t) => {
  const token = ciToken();
  server.grant(token, { status: 403 });
  await refused(t, [], { CUSTOS_CI_TOKEN: token, CUSTOS_URL: server.url }, 3, /permission denied \(CUSTOS_ERR_FORBIDDEN: .*\)\. CI injection needs the `reveal` permission/);
});

test('an unknown --only credential (404) is refused before running, exit 5', async (t) => {
  const { env } = grantEnv();
  await refused(t, ['--only', 'nope'], env, 5, /not found \(CUSTOS_ERR_NOT_FOUND: Credential "nope" not found\.\)/);
});

test('an unknown --workspace (404) is refused before running, exit 5', async (t) => {
  const { env } = grantEnv();
  await refused(t, ['--workspace', 'other'], env, 5, /not found \(CUSTOS_ERR_NOT_FOUND/);
});

test('an unreachable service is refused before running, exit 4', async (t) => {
  const closed = http.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const { port } = closed.address() as AddressInfo;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  await refused(t, [], { CUSTOS_CI_TOKEN: ciToken(), CUSTOS_URL: `http://127.0.0.1:${port}` }, 4, /cannot reach the Custos service at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
});

test('a service error (500) is refused before running, exit 4', async (t) => {
  const token = ciToken();
  server.grant(token, { status: 500 });
  await refused(t, [], { CUSTOS_CI_TOKEN: token, CUSTOS_URL: server.url }, 4, /answered HTTP 500 \(CUSTOS_ERR_INTERNAL: Internal error\.\)/);
});

test('a malformed token is refused before any request, exit 2', async (t) => {
  const bad = ['ghp_notacustostoken1234567890', `custos_agent_${'a'.repeat(40)}`, 'custos_ci_short'];
  await refused(t, [], { CUSTOS_CI_TOKEN: bad[0], CUSTOS_URL: server.url }, 2, /does not look like a Custos CI token/);
  await refused(t, [], { CUSTOS_CI_TOKEN: bad[1], CUSTOS_URL: server.url }, 2, /holds a custos_agent_… token; custos run needs a CI token/);
  await refused(t, [], { CUSTOS_CI_TOKEN: bad[2], CUSTOS_URL: server.url }, 2, /does not look like a Custos CI token/);
  // Other tests run concurrently against the same server: look for these tokens only.
  t.false(server.requests.some((q) => bad.some((b) => q.authorization?.includes(b))), 'no request was sent');
});

test('a missing token or URL is refused, exit 2', async (t) => {
  await refused(t, [], { CUSTOS_URL: server.url }, 2, /CUSTOS_CI_TOKEN is not set/);
  await refused(t, [], { CUSTOS_CI_TOKEN: ciToken() }, 2, /CUSTOS_URL is not set/);
  await refused(t, [], { CUSTOS_CI_TOKEN: ciToken(), CUSTOS_URL: 'not a url' }, 2, /CUSTOS_URL is not a valid URL/);
});

test('plain http to a non-loopback host is refused (the token would cross the network in clear), exit 2', async (t) => {
  await refused(t, [], { CUSTOS_CI_TOKEN: ciToken(), CUSTOS_URL: 'http://custos.example.com' }, 2, /plain http:\/\/ to a non-loopback host/);
});

test('an environment name collision is refused before running, exit 6, without printing a value', async (t) => {
  const secret = marker('COLLIDE');
  const { env } = grantEnv([cred('stripe-prod', 'bearer', { value: secret }), cred('Stripe prod', 'bearer', { value: 'other-1234' })]);
  await refused(t, [], env, 6, /"stripe-prod" and "Stripe prod" would both set STRIPE_PROD/);
});

test('a credential that would clobber PATH is refused before running, exit 6', async (t) => {
  const { env } = grantEnv([cred('path', 'bearer', { value: '/tmp/evil' })]);
  await refused(t, [], env, 6, /would set PATH, which custos run refuses to override/);
});

test('two SigV4 credentials are refused as ambiguous (exit 6) unless --only picks one', async (t) => {
  const { env } = grantEnv([
    cred('aws prod', 'sigv4', { accessKeyId: 'AKIAPROD1', secretAccessKey: marker() }),
    cred('aws dev', 'sigv4', { accessKeyId: 'AKIADEV12', secretAccessKey: marker() }),
  ]);
  await refused(t, [], env, 6, /2 SigV4 credentials .* --only NAME/);
  const r = await runCustos(['--only', 'aws dev', '--no-mask', '--', ...nodeScript(PRINT_ENV, 'AWS_ACCESS_KEY_ID', 'AWS_PROD_AWS_ACCESS_KEY_ID')], env);
  t.is(r.code, 0, r.stderr);
  t.true(r.stdout.includes('AWS_ACCESS_KEY_ID=AKIADEV12\n'));
  t.true(r.stdout.includes('AWS_PROD_AWS_ACCESS_KEY_ID=undefined\n'));
});

test('usage errors exit 2: no command, no --, unknown option', async (t) => {
  const { env } = grantEnv();
  for (const [args, message] of [
    [[], /no command given/],
    [['--'], /no command given/],
    [['echo', 'hi'], /put the command after --/],
    [['--bogus', '--', 'true'], /unknown option --bogus/],
    [['--only'], /--only needs a value/],
    [['--output', 'x', '--', 'true'], /only apply to export/],
  ] as Array<[string[], RegExp]>) {
    const r = await runCustos(args, env);
    t.is(r.code, 2, args.join(' '));
    t.regex(r.stderr, message);
  }
});

test('--help prints the usage and exits 0 without a token', async (t) => {
  const r = await runCustos(['--help'], {});
  t.is(r.code, 0);
  t.regex(r.stdout, /custos run \[options\] -- <command>/);
});

test('--verbose names the injected variables on stderr, never their values', async (t) => {
  const secret = marker('VERBOSE');
  const { env } = grantEnv([cred('Stripe prod', 'bearer', { value: secret })]);
  const r = await runCustos(['--verbose', '--', 'true'], env);
  t.is(r.code, 0);
  t.is(r.stderr, 'custos run: workspace "ci": 1 credential(s) → STRIPE_PROD\n');
});

test('when custos run\'s own stdout is closed (| head -1), the child\'s writes fail and it stops; custos run does not crash', async (t) => {
  const { env } = grantEnv();
  const run = startCustos(['--', 'yes'], env);
  await run.waitForStdout('y\n');
  run.child.stdout!.destroy();
  const r = await run.result;
  // Node's child pipes are socketpairs: `yes` sees EPIPE/ECONNRESET (exit 1) or SIGPIPE (141).
  t.true(r.code === 1 || r.code === 141, `exit ${r.code}: ${r.stderr}`);
  t.is(r.signal, null);
  t.notRegex(r.stderr, /custos run: internal|\n\s+at |node:internal/, 'no crash of custos run');
});
