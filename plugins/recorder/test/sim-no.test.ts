import assert from 'node:assert/strict';
import { normaliseSimNo } from '../src/sim-no';

describe('SIM number normalisation', () => {
  it('strips leading zeros from all-digit SIMs only, keeping one digit', () => {
    assert.equal(normaliseSimNo('013800001111'), '13800001111');
    assert.equal(normaliseSimNo('00000000013800001111'), '13800001111');
    assert.equal(normaliseSimNo('13800001111'), '13800001111');
    assert.equal(normaliseSimNo('000'), '0');
    assert.equal(normaliseSimNo('00ab'), '00ab');
  });
});
