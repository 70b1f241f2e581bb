/**
 * H.265 publisher messages as bus units: the FLV muxer's Enhanced RTMP `hvc1` tags read back by FlvUnits give the
 * same Annex-B frames, tracks and times. Full tier: the clip is libx265's (see rtsp-out's h265Clip).
 */
import { h265Clip } from '../../rtsp-out/test/helpers';
import { assertSameAfterRoundTrip } from './round-trip';

describe('rtmp: publisher messages to bus units, H.265', () => {
  it('H.265 (Enhanced RTMP hvc1): the same frames, key frames and times come back', function () {
    this.timeout(60_000);
    assertSameAfterRoundTrip(h265Clip(), 320);
  });
});
