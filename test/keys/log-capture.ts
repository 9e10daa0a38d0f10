/** A pino logger whose output is kept in memory so tests can scan it for marker secrets. */
import { createLogger, type Logger } from '../../src/log.ts';

export function captureLogger(): { log: Logger; lines: string[]; text(): string } {
  const lines: string[] = [];
  const log = createLogger({ level: 'debug', destination: { write: (s: string) => void lines.push(s) } });
  return { log, lines, text: () => lines.join('') };
}
