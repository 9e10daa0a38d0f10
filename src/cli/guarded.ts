/**
 * The CLI's error contract, shared by the dispatcher (main.ts) and the `custos run` bundle
 * (run-entry.ts): a CUSTOS_ERR_* error the user may see becomes one `custos <command>: CODE: message`
 * line on stderr, anything else `internal error`; both exit 1. Kept free of imports so that the run
 * bundle stays node:-builtins only.
 */
export async function runGuarded(name: string, command: () => Promise<number>, env: NodeJS.ProcessEnv): Promise<number> {
  try {
    return await command();
  } catch (err) {
    const e = err as { code?: string; message?: string; expose?: boolean };
    const message = e.code?.startsWith('CUSTOS_ERR_') && e.expose !== false ? `${e.code}: ${e.message}` : 'internal error';
    process.stderr.write(`custos ${name}: ${message}\n`);
    // Operators debugging start-up may ask for the cause; it may quote config, so never by default.
    if (env.CUSTOS_DEBUG === '1') process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`);
    return 1;
  }
}
