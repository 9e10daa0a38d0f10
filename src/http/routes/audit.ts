import { Readable } from 'node:stream';
import { Router } from '@koa/router';
import type Koa from 'koa';
import type { AuditReader } from '../../core/audit-reader.ts';
import { requestContext, type State } from '../middleware.ts';
import { parseInput } from '../validate.ts';
import { auditQuery, id } from './schemas.ts';

export function auditRoutes(reader: AuditReader, requireSession: Koa.Middleware<State>): Router<State> {
  const router = new Router<State>();
  router.get('/workspaces/:id/audit', requireSession, async function listAudit(ctx) {
    const q = parseInput(auditQuery, ctx.query, 'query');
    const entries = await reader.list(requestContext(ctx), parseInput(id, ctx.params.id, 'workspace id'), q.limit, q.before);
    ctx.body = { entries, nextBefore: entries.length === q.limit ? entries[entries.length - 1]!.seq : null };
  });
  router.get('/workspaces/:id/audit/export', requireSession, async function exportAudit(ctx) {
    const lines = await reader.export(requestContext(ctx), parseInput(id, ctx.params.id, 'workspace id'));
    ctx.type = 'application/x-ndjson';
    ctx.set('Content-Disposition', `attachment; filename="custos-audit-${ctx.params.id}.jsonl"`);
    ctx.body = Readable.from(lines);
  });
  return router;
}
