/** The initial schema. Written with TypeORM's portable Table API so it runs on SQLite and PostgreSQL. */
import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

type Col = { name: string; type: string; length?: string; isPrimary?: boolean; isNullable?: boolean; isUnique?: boolean };
const id = (name = 'id'): Col => ({ name, type: 'varchar', length: '64', isPrimary: true });
const ref = (name: string, nullable = false): Col => ({ name, type: 'varchar', length: '64', isNullable: nullable });
const str = (name: string, length: number, nullable = false): Col => ({ name, type: 'varchar', length: String(length), isNullable: nullable });
const ts = (name: string, nullable = false): Col => ({ name, type: 'varchar', length: '32', isNullable: nullable });
const text = (name: string, nullable = false): Col => ({ name, type: 'text', isNullable: nullable });
const int = (name: string): Col => ({ name, type: 'integer' });

export class Initial1763780000000 implements MigrationInterface {
  name = 'Initial1763780000000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(new Table({ name: 'accounts', columns: [id(), { ...str('email', 320), isUnique: true }, str('password_hash', 255), ts('created_at')] }));
    await q.createTable(new Table({ name: 'organizations', columns: [id(), str('name', 200), str('plan', 16), ref('owner_id'), ts('created_at')] }));
    await q.createTable(new Table({
      name: 'memberships',
      columns: [{ ...ref('org_id'), isPrimary: true }, { ...ref('account_id'), isPrimary: true }, str('role', 16), ts('created_at')],
    }));
    await q.createTable(new Table({ name: 'sessions', columns: [id(), ref('account_id'), str('csrf_hash', 64), ts('created_at'), ts('expires_at')] }));
    await q.createTable(new Table({ name: 'login_failures', columns: [id(), str('email', 320), str('ip', 64, true), ts('at')] }));
    await q.createIndex('login_failures', new TableIndex({ name: 'idx_login_failures_email_at', columnNames: ['email', 'at'] }));
    await q.createTable(new Table({
      name: 'workspaces',
      columns: [id(), ref('org_id'), str('name', 100), ref('created_by'), text('wrapped_dek', true), str('key_backend_id', 100, true),
        int('dek_version'), ts('created_at'), ts('updated_at')],
    }));
    await q.createIndex('workspaces', new TableIndex({ name: 'idx_workspaces_org_name', columnNames: ['org_id', 'name'], isUnique: true }));
    await q.createTable(new Table({
      name: 'workspace_grants',
      columns: [{ ...ref('workspace_id'), isPrimary: true }, { ...ref('account_id'), isPrimary: true }, str('permissions', 64),
        ref('granted_by'), ts('created_at'), ts('updated_at')],
    }));
    await q.createIndex('workspace_grants', new TableIndex({ name: 'idx_grants_account', columnNames: ['account_id'] }));
    await q.createTable(new Table({
      name: 'credentials',
      columns: [id(), ref('workspace_id'), str('name', 100), str('service', 64), str('auth_scheme', 16), str('base_url', 2048, true),
        text('config'), text('secret', true), int('secret_version'), int('dek_version'), str('status', 16), str('health', 24),
        str('health_reason', 500, true), str('env_name', 100, true), ref('created_by'), ref('updated_by'), ts('created_at'), ts('updated_at')],
    }));
    await q.createIndex('credentials', new TableIndex({ name: 'idx_credentials_ws_name', columnNames: ['workspace_id', 'name'], isUnique: true }));
    await q.createTable(new Table({
      name: 'tokens',
      columns: [id(), str('type', 8), str('name', 100), { ...str('token_hash', 64), isUnique: true }, str('prefix', 32), ref('creator_id'),
        ref('workspace_id', true), text('scopes'), ts('expires_at', true), ts('last_used_at', true), ts('revoked_at', true), ts('created_at')],
    }));
    await q.createIndex('tokens', new TableIndex({ name: 'idx_tokens_creator', columnNames: ['creator_id', 'type'] }));
    await q.createTable(new Table({ name: 'audit_chains', columns: [{ ...str('id', 80), isPrimary: true }, int('last_seq'), str('last_hash', 64)] }));
    await q.createTable(new Table({
      name: 'audit_events',
      columns: [{ ...str('chain_id', 80), isPrimary: true }, { ...int('seq'), isPrimary: true }, str('id', 64), ts('at'), text('actor'),
        str('action', 64), text('target'), str('outcome', 16), text('details'), str('prev_hash', 64), str('hash', 64)],
    }));
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of ['audit_events', 'audit_chains', 'tokens', 'credentials', 'workspace_grants', 'workspaces', 'login_failures',
      'sessions', 'memberships', 'organizations', 'accounts']) {
      await q.dropTable(t, true);
    }
  }
}

export const MIGRATIONS = [Initial1763780000000];
