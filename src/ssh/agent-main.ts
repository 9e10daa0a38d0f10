/**
 * Standalone entry for `custos ssh-agent` (tests and bench spawn it with `node --import tsx`);
 * the `custos` CLI dispatcher calls the same sshAgentCommand.
 */
import { sshAgentCommand } from '../cli/ssh-agent.ts';

const code = await sshAgentCommand(process.argv.slice(2), process.env);
process.exit(code);
