export { createAwsKmsBackend, AwsKmsKeyBackend } from './aws-kms-backend.ts';
export type { AwsKmsBackendConfig, AwsKmsBackendOptions, AwsCredentials } from './aws-kms-backend.ts';
