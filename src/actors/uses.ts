/** The UsePort on the actor system: each use runs as a use message of the workspace's actor. */
import type { Config } from '../config/schema.ts';
import type { CallApiResult, CredentialRow, PreparedCall, SignPort, Store, UsePort } from '../core/ports.ts';
import type { SendOptions } from '../broker/index.ts';
import type { ActorSystem } from './actor-system.ts';
import { dbRefreshPort } from './refresh.ts';
import { callApiInActor } from './operations/call-api.ts';
import { signInActor } from './operations/sign.ts';
import { queryInActor } from './operations/query.ts';
import type { QueryDbInput } from '../kinds/database/index.ts';
import type { MaskedQueryResult } from '../sql/pool.ts';

export class ActorUses implements UsePort, SignPort {
  readonly #send: SendOptions;
  constructor(private readonly actors: ActorSystem, private readonly store: Store, private readonly broker: Config['broker'], private readonly queryDbConfig: Config['queryDb'], send?: Partial<SendOptions>) {
    this.#send = {
      allowPrivate: true, // literal private base URLs only (guard.ts): a host NAME never reaches a private address
      timeoutMs: broker.timeoutMs, connectTimeoutMs: broker.connectTimeoutMs, maxResponseBytes: broker.maxResponseBytes,
      maxRequestBytes: broker.maxRequestBytes, ...send,
    };
  }

  callApi(row: CredentialRow, call: PreparedCall): Promise<CallApiResult> {
    return this.actors.with(row.workspace_id, (actor) => actor.use(
      row,
      row.auth_scheme === 'oauth2' ? dbRefreshPort(actor, this.store, row.id) : undefined,
      (use) => callApiInActor(row, call, use, this.#send, this.broker.agentBodyPreviewBytes),
      () => this.store.read.findCredential(row.id),
    ));
  }

  sign(row: CredentialRow, data: Buffer, flags: number): Promise<Buffer> {
    return this.actors.with(row.workspace_id, (actor) => actor.use(row, undefined, async (use) => signInActor(row, data, flags, use),
      () => this.store.read.findCredential(row.id)));
  }

  queryDb(row: CredentialRow, input: QueryDbInput): Promise<MaskedQueryResult> {
    const q = this.queryDbConfig;
    return this.actors.with(row.workspace_id, (actor) => actor.use(row, undefined,
      (use) => queryInActor(actor, row, input, { maxRows: q.maxRows, maxBytes: q.maxBytes, statementTimeoutMs: q.statementTimeoutMs, connectTimeoutMs: q.connectTimeoutMs, poolSize: q.poolSize }, use),
      () => this.store.read.findCredential(row.id)));
  }
}
