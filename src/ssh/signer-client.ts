/** What the local SSH agent needs from whoever holds the keys (the Custos service, over HTTP). */

export interface Identity {
  /** The SSH wire public key blob (`string "ssh-ed25519" ‖ string pub`). */
  keyBlob: Buffer;
  /** The comment `ssh-add -l` shows: the label naming the stored key. */
  comment: string;
}

export interface SignerClient {
  listIdentities(): Promise<Identity[]>;
  /** Returns the SSH signature blob (`string algorithm ‖ string signature`). */
  sign(keyBlob: Buffer, data: Buffer, flags: number): Promise<Buffer>;
}
