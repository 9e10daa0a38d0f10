import test from 'ava';
import { isBlockedAddress, isLoopbackAddress, privateDestinationAllowed } from '../../src/broker/guard.ts';

const BLOCKED = [
  '127.0.0.1', '127.255.255.254', '0.0.0.0', '0.1.2.3', '10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.255',
  '192.168.1.1', '100.64.0.1', '100.100.100.200', '169.254.169.254', '169.254.0.1', '192.0.0.192', '192.0.2.5',
  '198.18.0.1', '198.51.100.7', '203.0.113.9', '224.0.0.1', '239.255.255.250', '240.0.0.1', '255.255.255.255',
  '::', '::1', '0:0:0:0:0:0:0:1', 'fd00::1', 'fd00:ec2::254', 'fc00::1', 'fe80::1', 'fe80::1%eth0', 'febf::1', 'fec0::1', 'ff02::1',
  '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:169.254.169.254', '::ffff:a9fe:a9fe', '::ffff:10.1.2.3', '::ffff:192.168.0.1',
  '::127.0.0.1', '64:ff9b::127.0.0.1', '64:ff9b::a9fe:a9fe', '64:ff9b:1::1', '2002:7f00:1::', '2002:a9fe:a9fe::1', '2002:c0a8:0101::',
  '2001:db8::1', '2001::1', '100::1',
];
const PUBLIC = ['8.8.8.8', '1.1.1.1', '93.184.216.34', '172.32.0.1', '172.15.255.255', '100.128.0.1', '192.169.0.1', '11.0.0.1',
  '2606:4700:4700::1111', '2a00:1450:4001::200e', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::'];

for (const ip of BLOCKED) {
  test(`refuses internal address ${ip}`, (t) => {
    t.true(isBlockedAddress(ip));
  });
}

test('allows public addresses, including public IPv4 in mapped/NAT64/6to4 form', (t) => {
  for (const ip of PUBLIC) t.false(isBlockedAddress(ip), ip);
});

test('anything that is not an IP literal counts as blocked (no guessing)', (t) => {
  for (const s of ['localhost', 'example.com', '', '127.1', '0x7f000001', '::ffff:999.1.1.1']) t.true(isBlockedAddress(s), s);
});

test('loopback detection covers 127/8 and ::1 only', (t) => {
  t.true(isLoopbackAddress('127.0.0.1'));
  t.true(isLoopbackAddress('127.9.9.9'));
  t.true(isLoopbackAddress('::1'));
  t.true(isLoopbackAddress('::ffff:127.0.0.1'));
  t.false(isLoopbackAddress('169.254.169.254'));
  t.false(isLoopbackAddress('10.0.0.1'));
});

test('a base URL may reach a private address only if it names one literally or is localhost', (t) => {
  t.true(privateDestinationAllowed(new URL('http://127.0.0.1:8080/')));
  t.true(privateDestinationAllowed(new URL('http://[::1]:8080/')));
  t.true(privateDestinationAllowed(new URL('http://10.0.0.5/')));
  t.true(privateDestinationAllowed(new URL('http://169.254.169.254/')));
  t.true(privateDestinationAllowed(new URL('http://0x7f.1/'))); // the URL parser canonicalises to 127.0.0.1
  t.true(privateDestinationAllowed(new URL('http://localhost:3000/')));
  t.false(privateDestinationAllowed(new URL('https://api.example.com/')));
  t.false(privateDestinationAllowed(new URL('https://localhost.evil.example/')));
  t.false(privateDestinationAllowed(new URL('https://127.0.0.1.nip.io/')));
  t.false(privateDestinationAllowed(new URL('https://8.8.8.8/')));
});
