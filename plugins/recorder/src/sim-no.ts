/** The SDK's SIM rules under the names the recorder's modules use. */
export { SIM_PATTERN as SIM_NO_PATTERN, normaliseSim as normaliseSimNo } from '../../../plugin-sdk';
