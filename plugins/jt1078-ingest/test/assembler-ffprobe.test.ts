/**
 * The stream assembler's access units read by an independent decoder, ffprobe (full tier): every capture's frames,
 * and those it put parameter sets in front of. assembler.test.ts checks their structure without ffmpeg.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { scratchDir } from '../../../test/support/paths';
import type { AccessUnit } from '../../../plugin-sdk';
import { CAPTURES, assemble, capturePackets, ffprobeRaw, parsePackets, sparseParameterSets } from './helpers';

describe('jt1078 stream assembler, read by ffprobe', function () {
  this.timeout(60000);
  let dir: string;
  before(() => {
    dir = scratchDir('jt1078-assembler');
  });
  after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const probe = (name: string, video: AccessUnit[]) => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, Buffer.concat(video.map((u) => u.payload)));
    return ffprobeRaw(file, 'h264');
  };

  for (const c of CAPTURES) {
    it(`turns ${c.file} into access units an independent decoder reads (${c.width}x${c.height})`, () => {
      const probed = probe(path.basename(c.file) + '.h264', assemble(capturePackets(c.file)).out.video());
      assert.equal(probed.frames, c.videoFrames);
      assert.equal(probed.width, c.width);
      assert.equal(probed.height, c.height);
      assert.equal(probed.profile, c.profile);
    });
  }

  it('keyframes as sent (the sets in the first only) and 3-byte start codes normalised, decode', () => {
    const video = assemble(parsePackets(sparseParameterSets().wire)).out.video();
    assert.equal(probe('prepended.h264', video).frames, 931);
  });
});
