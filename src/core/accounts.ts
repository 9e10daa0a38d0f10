/**
 * Accounts, sign-up, login and sessions. Sign-up creates the account, a personal organization on the
 * Free plan and a default workspace, in one transaction. Sessions are random 256-bit tokens held
 * only by the browser (the database keeps their SHA-256); each carries a CSRF token the same way.
 * Login failures are throttled per email (stored, so every node sees them) and audited.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { CustosError } from '../errors.ts';
import { orgChain } from '../audit/audit-log.ts';
import type { Config } from '../config/schema.ts';
import { actorOf, type Principal, type RequestContext } from './context.ts';
import { dummyHash, hashPassword, verifyPassword } from './passwords.ts';
import { PERMISSIONS } from './policy.ts';
import type { OrganizationRow, Store } from './ports.ts';
import { workspaceView, type WorkspaceService, type WorkspaceView } from './workspaces.ts';

export const AUTH_CHAIN = 'auth';

export interface AccountView { id: string; email: string; createdAt: string }
export interface OrganizationView { id: string; name: string; plan: string }
export interface SessionGrant { sessionToken: string; csrfToken: string; expiresAt: string }

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

export class AccountService {
  constructor(
    private readonly store: Store,
    private readonly workspaces: WorkspaceService,
    private readonly auth: Config['auth'],
  ) {}

  async signup(ctx: RequestContext, email: string, password: string): Promise<{ account: AccountView; organization: OrganizationView; workspace: WorkspaceView; session: SessionGrant }> {
    email = email.toLowerCase();
    if (await this.store.read.findAccountByEmail(email)) {
      throw new CustosError('CUSTOS_ERR_CONFLICT', 'An account with that email already exists.');
    }
    const passwordHash = await hashPassword(password, this.auth.scryptCost);
    const provisioned = await this.workspaces.provision();
    const now = new Date().toISOString();
    const accountId = randomUUID();
    const org: OrganizationRow = { id: randomUUID(), name: `${email}'s organization`, plan: 'free', owner_id: accountId, created_at: now };
    const { workspace } = await this.store.tx(async (tx) => {
      if (await tx.findAccountByEmail(email)) throw new CustosError('CUSTOS_ERR_CONFLICT', 'An account with that email already exists.');
      await tx.insertAccount({ id: accountId, email, password_hash: passwordHash, created_at: now });
      await tx.insertOrganization(org);
      await tx.insertMembership(org.id, accountId, 'owner', now);
      const asNew: RequestContext = { ...ctx, principal: { type: 'account', accountId, email } };
      await tx.audit({ chain: orgChain(org.id), actor: actorOf(asNew), action: 'account.signup', target: { type: 'account', id: accountId, name: email }, outcome: 'success',
        details: { organization: org.id, plan: 'free' } });
      const workspace = await this.workspaces.createInTx(tx, asNew, org, accountId, 'Default', provisioned);
      return { workspace };
    });
    const session = await this.#createSession(accountId);
    return {
      account: { id: accountId, email, createdAt: now },
      organization: { id: org.id, name: org.name, plan: org.plan },
      workspace: workspaceView(workspace, [...PERMISSIONS]),
      session,
    };
  }

  async login(ctx: RequestContext, email: string, password: string): Promise<{ account: AccountView; session: SessionGrant }> {
    email = email.toLowerCase();
    const { max, windowSeconds } = this.auth.loginAttempts;
    const since = new Date(Date.now() - windowSeconds * 1000).toISOString();
    const account = await this.store.read.findAccountByEmail(email);
    const org = account ? await this.store.read.findPersonalOrganization(account.id) : null;
    const chain = org ? orgChain(org.id) : AUTH_CHAIN;
    const target = { type: 'account', ...(account ? { id: account.id } : {}), name: email };
    const anon: RequestContext = { ...ctx, principal: account ? { type: 'account', accountId: account.id, email } : ctx.principal };
    const actor = account ? actorOf(anon) : { ...actorOf(ctx), type: 'anonymous' as const, id: null };

    if ((await this.store.read.countLoginFailures(email, since)) >= max) {
      await this.store.audit({ chain, actor, action: 'auth.login', target, outcome: 'denied', details: { reason: 'rate limited' } });
      throw new CustosError('CUSTOS_ERR_RATE_LIMITED', `Too many failed logins for this account; try again in ${Math.ceil(windowSeconds / 60)} minutes.`);
    }
    // Verify against a dummy hash when the account is unknown, so timing does not reveal accounts.
    const ok = await verifyPassword(password, account?.password_hash ?? (await dummyHash(this.auth.scryptCost)));
    if (!account || !ok) {
      await this.store.tx(async (tx) => {
        await tx.insertLoginFailure(email, ctx.ip ?? null, new Date().toISOString());
        await tx.audit({ chain, actor, action: 'auth.login', target, outcome: 'denied', details: { reason: 'bad credentials' } });
      });
      throw new CustosError('CUSTOS_ERR_UNAUTHENTICATED', 'Email or password is incorrect.');
    }
    const session = await this.#createSession(account.id);
    await this.store.tx(async (tx) => {
      await tx.clearLoginFailures(email);
      await tx.audit({ chain, actor, action: 'auth.login', target, outcome: 'success' });
    });
    return { account: { id: account.id, email, createdAt: account.created_at }, session };
  }

  async logout(ctx: RequestContext, sessionToken: string): Promise<void> {
    await this.store.tx(async (tx) => {
      await tx.deleteSession(sha256(sessionToken));
      if (ctx.principal.type === 'account') {
        const org = await tx.findPersonalOrganization(ctx.principal.accountId);
        if (org) await tx.audit({ chain: orgChain(org.id), actor: actorOf(ctx), action: 'auth.logout', target: { type: 'account', id: ctx.principal.accountId }, outcome: 'success' });
      }
    });
  }

  /** Resolves a session cookie to its account and the session's CSRF hash; null when invalid/expired. */
  async resolveSession(sessionToken: string): Promise<{ principal: Principal; csrfHash: string } | null> {
    if (!/^[A-Za-z0-9_-]{43}$/.test(sessionToken)) return null;
    const session = await this.store.read.findSession(sha256(sessionToken));
    if (!session || session.expires_at <= new Date().toISOString()) return null;
    const account = await this.store.read.findAccountById(session.account_id);
    if (!account) return null;
    return { principal: { type: 'account', accountId: account.id, email: account.email }, csrfHash: session.csrf_hash };
  }

  async me(ctx: RequestContext): Promise<{ account: AccountView; organization: OrganizationView | null }> {
    if (ctx.principal.type !== 'account') throw new CustosError('CUSTOS_ERR_UNAUTHENTICATED', 'Sign in first.');
    const account = await this.store.read.findAccountById(ctx.principal.accountId);
    if (!account) throw new CustosError('CUSTOS_ERR_UNAUTHENTICATED', 'Sign in first.');
    const org = await this.store.read.findPersonalOrganization(account.id);
    return {
      account: { id: account.id, email: account.email, createdAt: account.created_at },
      organization: org ? { id: org.id, name: org.name, plan: org.plan } : null,
    };
  }

  async #createSession(accountId: string): Promise<SessionGrant> {
    const sessionToken = randomBytes(32).toString('base64url');
    const csrfToken = randomBytes(32).toString('base64url');
    const now = new Date();
    const expiresAt = new Date(now.getTime() + this.auth.sessionTtlSeconds * 1000).toISOString();
    await this.store.tx((tx) => tx.insertSession({ id: sha256(sessionToken), account_id: accountId, csrf_hash: sha256(csrfToken), created_at: now.toISOString(), expires_at: expiresAt }));
    return { sessionToken, csrfToken, expiresAt };
  }
}

export function csrfMatches(csrfToken: string, csrfHash: string): boolean {
  // Comparing hashes of fixed length; the hash of a guess reveals nothing useful about the token.
  return sha256(csrfToken) === csrfHash;
}
