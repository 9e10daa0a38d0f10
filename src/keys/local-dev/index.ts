export { createLocalDevBackend, LocalDevKeyBackend, LOCAL_DEV_DEFAULT_KEY_FILE } from './local-dev-backend.ts';
export type { LocalDevBackendOptions } from './local-dev-backend.ts';
export { versionFilePath as localDevKeyFileForVersion } from './keyring-files.ts';
