/**
 * The TypeORM data source: better-sqlite3 (embedded default, a file in the data dir) or postgres
 * (when database.url is set). Migrations run explicitly (`custos migrate`, and at `serve` start-up);
 * `synchronize` is never used.
 *
 * SQLite has one connection: two TypeORM transactions on it would interleave, so on SQLite every
 * transaction is serialised through an in-process mutex (writes are short; WAL keeps readers going).
 */
import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { DataSource, type EntityManager } from 'typeorm';
import { CustosError } from '../errors.ts';
import { ENTITIES } from './entities.ts';
import { MIGRATIONS } from './migrations/0001-initial.ts';

export type Dialect = 'sqlite' | 'postgres';

/** The part of better-sqlite3's Database used on hot paths. */
export interface SqliteHandle {
  prepare(sql: string): { run(...params: unknown[]): unknown; get(...params: unknown[]): unknown; all(...params: unknown[]): unknown[] };
  transaction<F extends (...args: never[]) => unknown>(fn: F): F;
}

export interface Database {
  readonly dialect: Dialect;
  readonly dataSource: DataSource;
  /** Runs fn in one transaction (serialised on SQLite). */
  tx<T>(fn: (em: EntityManager) => Promise<T>): Promise<T>;
  /**
   * SQLite only: the raw better-sqlite3 handle, for synchronous prepared-statement transactions on
   * hot paths. Use it only inside `serialize`, so it never interleaves with a TypeORM transaction.
   */
  readonly sqlite: SqliteHandle | null;
  /** Runs fn under the SQLite transaction mutex (on PostgreSQL, simply runs it). */
  serialize<T>(fn: () => T | Promise<T>): Promise<T>;
  /** Positional placeholder for raw SQL: $n on PostgreSQL, ? on SQLite. */
  p(n: number): string;
  migrate(): Promise<string[]>;
  /** See Store.purgeDeleted. */
  purgeDeleted(): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  url: string | null;
  dataDir: string;
  /** Pool size for PostgreSQL. */
  poolSize?: number;
}

class Mutex {
  #tail: Promise<void> = Promise.resolve();
  run<T>(fn: () => T | Promise<T>): Promise<T> {
    const result = this.#tail.then(fn);
    this.#tail = result.then(() => undefined, () => undefined);
    return result;
  }
}

export async function openDatabase(opts: DatabaseOptions): Promise<Database> {
  let dialect: Dialect;
  let dataSource: DataSource;
  if (opts.url) {
    if (!/^postgres(ql)?:\/\//.test(opts.url)) {
      throw new CustosError('CUSTOS_ERR_CONFIG', 'database.url must be a postgres:// or postgresql:// URL.');
    }
    dialect = 'postgres';
    dataSource = new DataSource({
      type: 'postgres', url: opts.url, entities: ENTITIES, migrations: MIGRATIONS, synchronize: false,
      migrationsTableName: 'custos_migrations', poolSize: opts.poolSize ?? 10, logging: false,
    });
  } else {
    dialect = 'sqlite';
    mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
    // Owner-only: created (or tightened) to 0600 before SQLite opens it; SQLite gives the -wal and
    // -shm files the database file's mode.
    const file = path.join(opts.dataDir, 'custos.sqlite');
    closeSync(openSync(file, 'a', 0o600));
    chmodSync(file, 0o600);
    dataSource = new DataSource({
      type: 'better-sqlite3', database: file, entities: ENTITIES, migrations: MIGRATIONS,
      synchronize: false, migrationsTableName: 'custos_migrations', logging: false,
      prepareDatabase: (db: { pragma(s: string): unknown }) => {
        db.pragma('journal_mode = WAL');
        db.pragma('synchronous = NORMAL');
        db.pragma('foreign_keys = ON');
        db.pragma('busy_timeout = 5000');
        // Deleted content is overwritten with zeros, so a shredded wrapped DEK or a replaced
        // ciphertext does not linger in free pages of the database file.
        db.pragma('secure_delete = ON');
      },
    });
  }
  try {
    await dataSource.initialize();
  } catch (err) {
    // The driver's message may contain the URL (with a password): do not echo it.
    throw new CustosError('CUSTOS_ERR_UNAVAILABLE', `Cannot open the ${dialect} database.`, { cause: err });
  }
  const mutex = new Mutex();
  const sqlite = dialect === 'sqlite' ? ((dataSource.driver as unknown as { databaseConnection: SqliteHandle }).databaseConnection ?? null) : null;
  const db: Database = {
    dialect,
    dataSource,
    sqlite,
    serialize: (fn) => (dialect === 'sqlite' ? mutex.run(fn) : Promise.resolve().then(fn)),
    tx: (fn) => (dialect === 'sqlite' ? mutex.run(() => dataSource.transaction(fn)) : dataSource.transaction(fn)),
    p: (n) => (dialect === 'postgres' ? `$${n}` : '?'),
    async migrate() {
      const ran = await dataSource.runMigrations({ transaction: 'each' });
      return ran.map((m) => m.name);
    },
    async purgeDeleted() {
      // Old page images (holding what was just deleted) live in the WAL until a checkpoint; copy
      // them back (now zeroed by secure_delete) and truncate the WAL. Serialised with transactions.
      if (dialect === 'sqlite') await mutex.run(() => dataSource.query('PRAGMA wal_checkpoint(TRUNCATE)'));
    },
    async ping() {
      await dataSource.query('SELECT 1');
    },
    async close() {
      if (dataSource.isInitialized) await dataSource.destroy();
    },
  };
  return db;
}
