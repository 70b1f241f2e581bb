// The parser lives in the SDK so the kernel's open validation accepts exactly the cb values delivered here.
export { parseCallbackUrl, type ParsedCallback, type CallbackUrlResult } from '../../../plugin-sdk';
