export { createPkcs11Backend, Pkcs11KeyBackend, kekTemplate } from './pkcs11-backend.ts';
export type { Pkcs11BackendConfig, Pkcs11BackendOptions, Pkcs11Mechanism } from './pkcs11-backend.ts';
export { cryptokiFor, ckrName, pkcs11js, CryptokiModule } from './cryptoki.ts';
export type { Pkcs11Lib } from './cryptoki.ts';
