/** Characters the open call accepts in a simNo (decisions.md, open request validation rule 4). */
export const SIM_NO_PATTERN = /^[0-9A-Za-z._~-]{1,20}$/;

/**
 * A terminal's SIM as the gateway keys it: all-digit values lose their leading zeros, so the 2013 layout's
 * `013800001111` and the 2019 layout's `00000000013800001111` name the same terminal. At least one digit stays.
 */
export function normaliseSimNo(simNo: string): string {
  if (/^[0-9]+$/.test(simNo)) {
    const stripped = simNo.replace(/^0+/, '');
    return stripped === '' ? '0' : stripped;
  }
  return simNo;
}
