// The payload shape already lives in the SDK (core builds notices, this plugin only ships them): one definition,
// re-exported so the plugin's modules have a local name to import.
export type { NoticePayload } from '../../../plugin-sdk';
