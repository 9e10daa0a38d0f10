/**
 * SSRF guard for the broker's outbound connections (DESIGN.md §9).
 *
 * The check happens AT CONNECT TIME on the address the socket is really opened to: the DNS answer
 * is filtered inside the socket's own `lookup`, and the connected socket's `remoteAddress` is checked
 * again. A check made earlier (when the URL is built) would be defeated by DNS rebinding: a name that
 * answers a public address to the check and 169.254.169.254 to the connect.
 *
 * Private destinations (loopback, RFC 1918, CGNAT, link-local/metadata, ULA, multicast…) are refused
 * unless the credential's base URL itself names one: its hostname is an IP literal in those ranges,
 * or it is exactly `localhost` (then only loopback addresses are accepted). An operator who stores a
 * credential for http://10.0.0.5 has chosen that address; an agent cannot reach it through a public
 * hostname, because the origin is pinned to the base URL's origin (url.ts).
 */
import { BlockList, isIP, type LookupFunction, type Socket } from 'node:net';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { buildConnector } from 'undici';
import { CustosError } from '../errors.ts';

/** IPv4 ranges a broker call may not reach unless the base URL names them literally. */
const BLOCKED_V4: ReadonlyArray<readonly [string, number]> = [
  ['0.0.0.0', 8], // "this network"; 0.0.0.0 connects to the local host on Linux
  ['10.0.0.0', 8], // RFC 1918
  ['100.64.0.0', 10], // CGNAT (also Alibaba metadata 100.100.100.200)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local: AWS/GCP/Azure metadata 169.254.169.254
  ['172.16.0.0', 12], // RFC 1918
  ['192.0.0.0', 24], // IETF protocol assignments (Oracle metadata 192.0.0.192)
  ['192.0.2.0', 24], // TEST-NET-1
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // RFC 1918
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // TEST-NET-2
  ['203.0.113.0', 24], // TEST-NET-3
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, incl. 255.255.255.255 broadcast
];

const BLOCKED_V6: ReadonlyArray<readonly [string, number]> = [
  ['::', 96], // unspecified ::, loopback ::1, deprecated IPv4-compatible ::a.b.c.d
  ['64:ff9b:1::', 48], // local-use NAT64
  ['100::', 64], // discard-only
  ['2001::', 23], // IETF protocol assignments (Teredo, ORCHID, …)
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation (RFC 9637)
  ['fc00::', 7], // unique local (fd00::/8, incl. AWS fd00:ec2::254 metadata)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // deprecated site-local
  ['ff00::', 8], // multicast
];

/** "10.0.0.0" → "0a00:0000": the two IPv6 groups that embed an IPv4 address in 6to4 (2002::/16). */
function v4AsHexGroups(v4: string): string {
  const hex = v4.split('.').map((octet) => Number(octet).toString(16).padStart(2, '0'));
  return `${hex[0]}${hex[1]}:${hex[2]}${hex[3]}`;
}

function buildBlockList(): BlockList {
  const list = new BlockList();
  for (const [net, prefix] of BLOCKED_V4) {
    list.addSubnet(net, prefix, 'ipv4');
    // The same ranges reached through IPv6 forms that carry an IPv4 address: IPv4-mapped
    // (::ffff:a.b.c.d; BlockList also matches these by itself, kept explicit on purpose), NAT64
    // (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::).
    list.addSubnet(`::ffff:${net}`, 96 + prefix, 'ipv6');
    list.addSubnet(`64:ff9b::${net}`, 96 + prefix, 'ipv6');
    list.addSubnet(`2002:${v4AsHexGroups(net)}::`, 16 + prefix, 'ipv6');
  }
  for (const [net, prefix] of BLOCKED_V6) list.addSubnet(net, prefix, 'ipv6');
  return list;
}

const BLOCKED = buildBlockList();
const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** Strips `[...]` around an IPv6 URL hostname and a `%zone` suffix. */
function bareAddress(host: string): string {
  let h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const zone = h.indexOf('%');
  if (zone >= 0) h = h.slice(0, zone);
  return h;
}

/**
 * True when `address` (an IP literal) is in a range the broker refuses by default. Anything that is
 * not an IP literal is treated as blocked: the guard never guesses.
 */
export function isBlockedAddress(address: string): boolean {
  let blocked = blockedMemo.get(address);
  if (blocked === undefined) {
    const ip = bareAddress(address);
    const family = isIP(ip);
    blocked = family === 4 ? BLOCKED.check(ip, 'ipv4') : family === 6 ? BLOCKED.check(ip, 'ipv6') : true;
    // BlockList.check builds a SocketAddress per call; the answer depends on the text alone.
    if (blockedMemo.size >= 4096) blockedMemo.clear();
    blockedMemo.set(address, blocked);
  }
  return blocked;
}

const blockedMemo = new Map<string, boolean>();

export function isLoopbackAddress(address: string): boolean {
  const ip = bareAddress(address);
  const family = isIP(ip);
  if (family === 4) return LOOPBACK.check(ip, 'ipv4');
  if (family === 6) return LOOPBACK.check(ip, 'ipv6');
  return false;
}

/**
 * Whether a private destination is acceptable for this base URL: its hostname is an IP literal in a
 * blocked range, or it is exactly `localhost`. (URL hostnames are canonical: `0x7f.1` and
 * `2130706433` are already `127.0.0.1` here.) A public hostname never qualifies, whatever it
 * resolves to: that is the DNS-rebinding / internal-name case the guard exists for.
 */
export function privateDestinationAllowed(url: URL): boolean {
  const host = url.hostname;
  if (host === 'localhost') return true;
  const ip = bareAddress(host);
  return isIP(ip) !== 0 && isBlockedAddress(ip);
}

export function destinationRefused(): CustosError {
  return new CustosError(
    'CUSTOS_ERR_DESTINATION_REFUSED',
    'The upstream address is loopback, private, link-local or otherwise internal, and the ' +
      "credential's base URL does not name such an address. The broker refuses to connect.",
  );
}

type Blocked = (address: string) => boolean;
type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * Wraps a DNS lookup so that only acceptable addresses reach the socket. Net calls it per connection
 * attempt (Node 20's autoSelectFamily asks for `all: true`); we always ask the resolver for every
 * address, drop the blocked ones, and refuse when none is left. Filtering (instead of refusing on any
 * blocked answer) still never connects to a blocked address.
 */
function filteringLookup(base: LookupFunction, blocked: Blocked): LookupFunction {
  return ((hostname: string, options: { all?: boolean; family?: number }, callback: LookupCallback) => {
    base(hostname, { ...options, all: true }, ((err: NodeJS.ErrnoException | null, addresses: string | LookupAddress[], family?: number) => {
      if (err) {
        callback(err, options.all ? [] : '', 0);
        return;
      }
      const list: LookupAddress[] = Array.isArray(addresses) ? addresses : [{ address: addresses, family: family ?? isIP(addresses) }];
      const allowed = list.filter((a) => !blocked(a.address));
      const first = allowed[0];
      if (first === undefined) {
        callback(destinationRefused() as unknown as NodeJS.ErrnoException, options.all ? [] : '', 0);
        return;
      }
      if (options.all) callback(null, allowed);
      else callback(null, first.address, first.family);
    }) as never);
  }) as unknown as LookupFunction;
}

export interface GuardOptions {
  /**
   * Operator switch: may a base URL that literally names a private address (or `localhost`) be
   * reached at all? Even when true, a public hostname can never reach a private address.
   */
  allowPrivate: boolean;
  connectTimeoutMs: number;
  /** Resolver override (tests map names to 127.0.0.1 or 169.254.169.254); defaults to dns.lookup. */
  lookup?: LookupFunction;
  /** Address policy override, for tests only; defaults to isBlockedAddress. */
  isBlocked?: Blocked;
  /** Extra trusted CA certificates (PEM) for TLS upstreams; default: Node's trust store. */
  ca?: string | Buffer | Array<string | Buffer>;
}

/**
 * An undici connector that enforces the address policy on every new connection. The hostname it
 * receives is the request URL's hostname, which url.ts pinned to the base URL's; so "the base URL
 * names a private address" is decided here from the hostname itself, per connection.
 */
export function createGuardedConnector(options: GuardOptions): buildConnector.connector {
  const blocked = options.isBlocked ?? isBlockedAddress;
  const baseLookup = options.lookup ?? (dnsLookup as unknown as LookupFunction);
  // TLS verification (hostname, chain) stays undici's/Node's: the connectors only add `lookup`, so
  // SNI and the certificate check still use the URL's host name, not the resolved address.
  const common = { timeout: options.connectTimeoutMs, ...(options.ca !== undefined ? { ca: options.ca } : {}) };
  const strict = buildConnector({ ...common, lookup: filteringLookup(baseLookup, blocked) });
  const loopbackOnly = options.allowPrivate
    ? buildConnector({ ...common, lookup: filteringLookup(baseLookup, (a) => !isLoopbackAddress(a)) })
    : strict;
  // An IP literal never goes through lookup (net connects to it directly), so it is checked here.
  const literal = buildConnector(common);

  return (connectOptions, callback) => {
    const host = bareAddress(connectOptions.hostname);
    let connect: buildConnector.connector;
    let check: Blocked;
    if (isIP(host) !== 0) {
      const mayBePrivate = options.allowPrivate && isBlockedAddress(host);
      if (!mayBePrivate && blocked(host)) {
        callback(destinationRefused(), null);
        return;
      }
      connect = literal;
      check = mayBePrivate ? () => false : blocked;
    } else if (options.allowPrivate && host === 'localhost') {
      connect = loopbackOnly;
      check = (a) => !isLoopbackAddress(a);
    } else {
      connect = strict;
      check = blocked;
    }
    connect(connectOptions, (err, socket) => {
      if (err || !socket) {
        callback(err ?? new Error('connect failed'), null);
        return;
      }
      // Belt and braces: the peer we actually reached must pass the same policy.
      const remote = (socket as Socket).remoteAddress;
      if (remote === undefined || check(remote)) {
        socket.destroy();
        callback(destinationRefused(), null);
        return;
      }
      callback(null, socket);
    });
  };
}
