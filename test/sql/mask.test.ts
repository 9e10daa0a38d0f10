/** PII masking in isolation: each detector, shapes kept, checksums required, names, rules, JSON. */
import test from 'ava';
import { isSensitiveName, maskRows, maskText } from '../../src/sql/mask.ts';

const masks: [string, string, string][] = [
  ['email', 'jane.doe@example.com', 'j***@example.com'],
  ['email inside text', 'write to a.b+tag@mail.example.org today', 'write to a***@mail.example.org today'],
  ['emails in a comma-separated aggregate', 'a@x.io,bob@y.dev', 'a***@x.io,b***@y.dev'],
  ['E.164 phone', '+14155550123', '+*********23'],
  ['international phone with spaces', '+44 20 7946 0958', '+** ** **** **58'],
  ['North American phone', '(415) 555-0123', '(***) ***-**23'],
  ['North American phone with dashes', '415-555-0123', '***-***-**23'],
  ['national trunk-0 phone', '020 7946 0958', '*** **** **58'],
  ['French mobile', '06 12 34 56 78', '** ** ** ** 78'],
  ['Luhn-valid card with spaces', '4242 4242 4242 4242', '**** **** **** 4242'],
  ['Luhn-valid card with dashes', '5555-5555-5555-4444', '**** **** **** 4444'],
  ['Luhn-valid card, no separators', '4111111111111111', '**** **** **** 1111'],
  ['Discover card', '6011000990139424', '**** **** **** 9424'],
  ['15-digit Amex', '3782 822463 10005', '**** **** **** 0005'],
  ['13-digit Visa', '4222222222222', '**** **** **** 2222'],
  ['19-digit card', '6759649826438453128', '**** **** **** 3128'],
  ['card inside text', 'paid with 4242-4242-4242-4242 yesterday', 'paid with **** **** **** 4242 yesterday'],
  ['US SSN', '123-45-6789', '***-**-6789'],
  ['IBAN with spaces', 'DE89 3704 0044 0532 0130 00', 'DE** **** **** 3000'],
  ['IBAN compact', 'GB82WEST12345698765432', 'GB** **** **** 5432'],
  ['IPv4', '192.168.10.20', '192.168.*.*'],
  ['IPv4 in text', 'login from 10.0.0.7 failed', 'login from 10.0.*.* failed'],
  ['IPv6', '2001:db8:85a3::8a2e:370:7334', '2001:db8::*'],
  ['IPv6 full', '2001:0db8:0000:0000:0000:ff00:0042:8329', '2001:0db8::*'],
  ['JWT', 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U', '[secret]'],
  ['PEM private key', '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----', '[secret]'],
  ['OpenSSH private key in text', 'key: -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY----- end', 'key: [secret] end'],
  ['OpenAI-style key', 'sk-proj-abcdefghijklmnopqrstuvwx1234', '[secret]'],
  ['Stripe live key', 'sk_live_51HxYzAbCdEfGhIjKlMn', '[secret]'],
  ['GitHub token', 'token ghp_abcdefghijklmnopqrstuvwxyz0123456789 here', 'token [secret] here'],
  ['GitHub oauth token', 'gho_abcdefghijklmnopqrstuvwxyz0123456789', '[secret]'],
  ['Slack bot token', 'xoxb-1234567890-abcdefghij', '[secret]'],
  ['AWS access key id', 'AKIAIOSFODNN7EXAMPLE', '[secret]'],
  ['custos token', 'custos_agent_7fK2mQ9xLp3vR8sT1wY6zA4bC0dE5gH', '[secret]'],
  ['long high-entropy token', 'aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5', '[secret]'],
  ['password in a URL', 'postgres://app:hunter2@db.internal:5432/prod', 'postgres://app:[secret]@db.internal:5432/prod'],
];

for (const [what, input, expected] of masks) {
  test(`masks ${what}`, (t) => {
    const r = maskText(input);
    t.is(r.text, expected);
    t.true(r.masked >= 1);
  });
}

const kept: [string, string][] = [
  ['Luhn-invalid 16-digit number', '4242 4242 4242 4241'],
  ['Luhn-invalid compact number', '1234567890123456'],
  ['Luhn-invalid 19-digit number', '6759649826438453127'],
  ['IBAN with a bad checksum', 'GB82WEST12345698765433'],
  ['invalid SSN area 9xx', '912-45-6789'],
  ['date', '2024-01-15'],
  ['timestamp with offset', '2024-01-15 10:30:00+00'],
  ['time', '10:30:00'],
  ['small integers', '12345'],
  ['compact date', '20240115'],
  ['decimal', '1234.56'],
  ['plain 10-digit number (no phone formatting)', '4155550123'],
  ['version string', 'version 1.2.3'],
  ['UUID', '550e8400-e29b-41d4-a716-446655440000'],
  ['SHA-256 hex', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'],
  ['snake_case identifier', 'the_quick_brown_fox_jumps_over_the_lazy_dog_2024'],
  ['ordinary sentence', 'Order #1234567 shipped on 2024-01-15 for 99.95 EUR'],
  ['an @ that is not an email', '@channel see you at 5'],
  ['JWT-like text whose header has no alg', 'eyJmb28iOiJiYXIifQ.eyJzdWIiOiIxIn0.abc'],
];

for (const [what, input] of kept) {
  test(`keeps ${what}`, (t) => {
    t.deepEqual(maskText(input), { text: input, masked: 0 });
  });
}

test('sensitive column names: snake, camel, kebab, plurals and compounds', (t) => {
  for (const n of ['email', 'EMAIL', 'e_mail', 'e-mail', 'eMail', 'userEmail', 'email_address', 'emails', 'phone', 'phone_number',
    'mobile', 'ssn', 'social_security_number', 'password', 'passwd', 'pwd', 'password_hash', 'token', 'accessToken', 'secret',
    'client_secret', 'api_key', 'apiKey', 'APIKey', 'apikey', 'card_number', 'cc_number', 'creditCard', 'iban', 'ip', 'ip_address',
    'IPAddress', 'last_login_ip', 'dob', 'date_of_birth', 'birthDate', 'birthday', 'private_key']) {
    t.true(isSensitiveName(n), n);
  }
  for (const n of ['id', 'name', 'zip', 'description', 'hotel', 'created_at', 'shipping_address', 'amount', 'tip', 'skip', 'status']) {
    t.false(isSensitiveName(n), n);
  }
});

test('maskRows: name-based whole-column masking keeps nulls and reports columns and counts', (t) => {
  const r = maskRows(['id', 'Email', 'password', 'note'], [
    [1, 'a@b.co', 'hunter2', 'mail c@d.io'],
    [2, null, null, 'nothing here'],
  ]);
  t.deepEqual(r.rows, [
    [1, '[masked]', '[masked]', 'mail c***@d.io'],
    [2, null, null, 'nothing here'],
  ]);
  t.deepEqual(r.maskedColumns, ['Email', 'password']);
  t.is(r.maskedValues, 3);
});

test('maskRows: numbers and booleans in a sensitive column are masked too; elsewhere they are left alone', (t) => {
  const r = maskRows([{ name: 'pin' }, { name: 'count' }], [[1234, 4155550123], [true, 1]]);
  t.deepEqual(r.rows, [['[masked]', 4155550123], ['[masked]', 1]]);
});

test('maskRows: JSON values are walked, keys masked by name, strings by value, shape kept', (t) => {
  const input = [[{ user: { email: 'x@y.com', tags: ['ok', 'call +14155550123'], meta: { apiKey: 'abc', n: 3 } }, list: [{ ssn: '123-45-6789' }] }]];
  const r = maskRows(['doc'], input);
  t.deepEqual(r.rows[0]![0], {
    user: { email: '[masked]', tags: ['ok', 'call +*********23'], meta: { apiKey: '[masked]', n: 3 } },
    list: [{ ssn: '[masked]' }],
  });
  t.is(r.maskedValues, 4);
  // the input is not modified
  t.is((input[0]![0] as any).user.email, 'x@y.com');
});

test('maskRows: JSON carried as text is parsed, masked by key name, re-serialised only when changed', (t) => {
  const r = maskRows(['j', 'k', 'arr'], [['{"password": "hunter2", "ok": 1}', '{"ok": 1}', '{a,b}']]);
  t.deepEqual(JSON.parse(r.rows[0]![0] as string), { password: '[masked]', ok: 1 });
  t.is(r.rows[0]![1], '{"ok": 1}');
  t.is(r.rows[0]![2], '{a,b}');
});

test('rules: maskColumns adds names; allowColumns exempts names and PII values but never secrets or cards', (t) => {
  const r = maskRows(['nickname', 'email', 'notes', 'origin'], [
    ['Jay', 'j@example.com', 'j@example.com sk_live_51HxYzAbCdEfGhIjKlMn 4242 4242 4242 4242', '10.1.2.3'],
  ], { maskColumns: ['NickName'], allowColumns: ['email', 'notes'] });
  t.deepEqual(r.rows[0], ['[masked]', 'j@example.com', 'j@example.com [secret] **** **** **** 4242', '10.1.*.*']);
  t.deepEqual(r.maskedColumns, ['nickname']);
});

test('rules: allowColumns also applies to JSON keys', (t) => {
  const r = maskRows(['doc'], [[{ email: 'a@b.co', phone: '+14155550123' }]], { allowColumns: ['email'] });
  t.deepEqual(r.rows[0]![0], { email: 'a@b.co', phone: '[masked]' });
});
