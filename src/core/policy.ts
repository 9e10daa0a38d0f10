/**
 * Pure allow/deny decisions (DESIGN.md §1.5, §7). No I/O: callers pass in what they loaded.
 * Deny by default; a token's rights are its own scopes ∩ its grants ∩ its creator's current grant.
 */
export const PERMISSIONS = ['read', 'write', 'use', 'reveal', 'manage'] as const;
export type Permission = (typeof PERMISSIONS)[number];

export const TOOLS = ['list_services', 'create_service', 'call_api', 'query_db'] as const;
export type Tool = (typeof TOOLS)[number];

export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

export function parsePermissions(csv: string): Permission[] {
  return csv.split(',').filter((p): p is Permission => (PERMISSIONS as readonly string[]).includes(p));
}

export function formatPermissions(perms: Iterable<Permission>): string {
  const set = new Set(perms);
  return PERMISSIONS.filter((p) => set.has(p)).join(',');
}

/** The effective permissions of a token on a workspace. */
export function intersect(...sets: ReadonlyArray<readonly Permission[]>): Permission[] {
  return PERMISSIONS.filter((p) => sets.every((s) => s.includes(p)));
}

/** `read` lets one see non-secret config; `use` implies seeing what one may use (DESIGN.md §7). */
export function canSeeConfig(perms: readonly Permission[]): boolean {
  return perms.includes('read') || perms.includes('use');
}

export function has(perms: readonly Permission[], needed: Permission): boolean {
  return perms.includes(needed);
}
