/**
 * The conformance macro must be able to fail: each deliberately broken kind below violates one
 * rule, and `test.failing` passes only if the macro catches it.
 */
import test from 'ava';
import { z } from 'zod';
import type { CredentialKind, Injector } from '../../src/kinds/credential-kind.ts';
import { injectorConformance, type InjectorCase } from '../../src/kinds/conformance.ts';
import { bearerKind } from '../../src/kinds/bearer/index.ts';

type Kind = CredentialKind<any> & Injector<any>;

const base = (kind: Kind): InjectorCase => ({
  kind,
  secret: (marker) => ({ value: `${marker}-bearer` }),
  badConfigs: [{ extra: 1 }],
  arrange: async (marker) => ({ config: {}, onWire: `${marker}-bearer` }),
});

test('an honest bearer kind passes (control)', injectorConformance, base(bearerKind));

test.failing('a kind that returns the actor\'s input Buffer instead of a copy is caught', injectorConformance, base({
  ...bearerKind,
  inject: async (req, secret) => {
    req.headers.authorization = `Bearer ${secret.value!.toString('latin1')}`;
    return [secret.value!];
  },
}));

test.failing('a kind that caches the secret plaintext is caught', injectorConformance, base({
  ...bearerKind,
  inject: async (req, secret, config, ctx) => {
    ctx.cache.set('lazy', Buffer.from(secret.value!), ctx.now() + 60_000);
    return bearerKind.inject(req, secret, config, ctx);
  },
}));

test.failing('a kind that logs the secret is caught', injectorConformance, base({
  ...bearerKind,
  inject: async (req, secret, config, ctx) => {
    ctx.log.info(`injecting ${secret.value!.toString()}`);
    return bearerKind.inject(req, secret, config, ctx);
  },
}));

test.failing('a kind that keeps the first Buffers it saw is caught when they are zeroed', injectorConformance, (() => {
  let kept: Buffer | undefined;
  return base({
    ...bearerKind,
    inject: async (req, secret) => {
      kept ??= secret.value!;
      req.headers.authorization = `Bearer ${kept.toString('latin1')}`;
      return [Buffer.from(kept)];
    },
  });
})());

test.failing('a kind whose secretSchema accepts extra fields is caught', injectorConformance, base({
  ...bearerKind,
  secretSchema: z.object({ value: z.string().min(1).regex(/^[\x21-\x7e]+$/) }),
}));

test.failing('a kind that puts nothing on the wire is caught', injectorConformance, base({
  ...bearerKind,
  inject: async (_req, secret) => [Buffer.from(secret.value!)],
}));

test.failing('a kind whose describe() shows config that carries a secret is caught', injectorConformance, {
  ...base({ ...bearerKind, configSchema: z.object({ note: z.string() }), describe: (config: { note: string }) => ({ authScheme: 'bearer', note: config.note }) }),
  arrange: async (marker) => ({ config: { note: marker }, onWire: `${marker}-bearer` }),
});
