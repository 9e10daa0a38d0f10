export { sshKind, UNLOCKED_SEED_TTL_MS, type SshConfig } from './ssh-kind.ts';
export { ed25519KeyBlob, sshFingerprint, KeyParseError, parseOpenSshEd25519 } from './openssh-key.ts';
