// The fast path of `custos run` (bin/custos.mjs). `custos run` sits in front of every CI command,
// and loading tsx costs more than the command itself, so it runs from an esbuild bundle of
// src/cli/run-entry.ts (node: builtins only), built on first use and rebuilt whenever a file it was
// built from changes. Nothing here may make `custos run` fail: any problem (no esbuild, a
// read-only cache, a damaged bundle) returns undefined and the caller runs the sources through tsx.
//
// Cache: $CUSTOS_CLI_CACHE_DIR, default node_modules/.cache/custos. manifest.json names the bundle
// (content-addressed, so a reader never sees a half-written one) and the modification time of
// every source file it was built from; both are written to a temporary name and renamed.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const ENTRY = 'src/cli/run-entry.ts';

function cacheDir(env) {
  return env.CUSTOS_CLI_CACHE_DIR || path.join(ROOT, 'node_modules', '.cache', 'custos');
}

/** The bundle's path if the manifest is there and no source it lists has changed since. */
function freshBundle(dir) {
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
  } catch {
    return undefined;
  }
  if (typeof manifest?.bundle !== 'string' || !/^run-[0-9a-f]{16}\.mjs$/.test(manifest.bundle)) return undefined;
  const inputs = Object.entries(manifest.inputs ?? {});
  if (inputs.length === 0) return undefined;
  for (const [file, mtimeMs] of inputs) {
    try {
      if (statSync(path.join(ROOT, file)).mtimeMs !== mtimeMs) return undefined;
    } catch {
      return undefined; // a source was removed or renamed
    }
  }
  return path.join(dir, manifest.bundle);
}

/**
 * mkdir -p, bounded: Node 20's mkdirSync(…, { recursive: true }) loops forever on some special file
 * systems (e.g. a path under /proc), and this code must never hang a CI job.
 */
function ensureDir(dir, depth = 0) {
  try {
    mkdirSync(dir);
  } catch (err) {
    if (err?.code === 'EEXIST') return;
    if (err?.code !== 'ENOENT' || depth >= 4) throw err;
    ensureDir(path.dirname(dir), depth + 1);
    mkdirSync(dir);
  }
}

function writeAtomically(file, data) {
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  writeFileSync(tmp, data, { mode: 0o644 });
  renameSync(tmp, file);
}

async function build(dir) {
  const started = Date.now();
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    entryPoints: [path.join(ROOT, ENTRY)], absWorkingDir: ROOT, bundle: true, platform: 'node', format: 'esm',
    target: 'node20', write: false, metafile: true, logLevel: 'silent', outfile: path.join(dir, 'run.mjs'),
  });
  const code = result.outputFiles[0].contents;
  const inputs = {};
  for (const file of Object.keys(result.metafile.inputs)) {
    const mtimeMs = statSync(path.join(ROOT, file)).mtimeMs;
    // A file edited while we were building: the bundle may hold the old text. Use it this once
    // (it is what was on disk when the command started) but do not cache it.
    if (mtimeMs > started) return { code, cached: false };
    inputs[file] = mtimeMs;
  }
  const name = `run-${createHash('sha256').update(code).digest('hex').slice(0, 16)}.mjs`;
  try {
    ensureDir(dir);
    writeAtomically(path.join(dir, name), code);
    writeAtomically(path.join(dir, 'manifest.json'), JSON.stringify({ bundle: name, builtAt: new Date().toISOString(), inputs }, null, 1));
  } catch {
    return { code, cached: false }; // a read-only install: still faster than tsx
  }
  // Bundles of older sources: best effort (a process still importing one has it open already).
  for (const f of readdirSync(dir)) {
    if (/^run-[0-9a-f]{16}\.mjs$/.test(f) && f !== name) {
      try {
        unlinkSync(path.join(dir, f));
      } catch {
        /* already gone */
      }
    }
  }
  return { file: path.join(dir, name), cached: true };
}

/** `main(argv, env)` of the run command from the bundle, or undefined to use the sources. */
export async function loadRunBundle(env) {
  if (env.CUSTOS_CLI_NO_BUNDLE === '1') return undefined;
  try {
    const dir = cacheDir(env);
    let file = freshBundle(dir);
    if (!file) {
      const built = await build(dir);
      if (!built.cached) return (await import(`data:text/javascript;base64,${Buffer.from(built.code).toString('base64')}`)).main;
      file = built.file;
    }
    const mod = await import(pathToFileURL(file).href);
    return typeof mod.main === 'function' ? mod.main : undefined;
  } catch {
    return undefined;
  }
}
