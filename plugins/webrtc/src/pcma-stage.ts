/**
 * The stream's audio as G.711 A-law at 8 kHz for browsers, when the terminal sends another codec (G.726, IMA ADPCM,
 * G.711 at another rate): decoded, resampled to 8 kHz and encoded to PCMA, which every WebRTC browser decodes.
 * PCMA rather than Opus by measurement: encoding a second of 8 kHz audio takes 0.02 to 0.05 ms of CPU to A-law
 * against 5.4 ms to Opus at 8 kHz and 7.3 ms at 48 kHz (libopus as WASM, opusscript 0.1.1; README). Decoding the
 * terminal's codec costs the same either way. G.711 A-law at 8 kHz passes by reference; a codec this gateway cannot
 * decode (AAC here) leaves audio out.
 */
import { audioStage, withPayload, type AccessUnit, type AudioTrackInfo, type StageDefinition } from '../../../plugin-sdk';
import { createDecoder, createEncoder, Resampler, type AudioDecoder, type AudioEncoder } from '../../../plugin-sdk/codecs';

export const PCMA_STAGE = 'webrtc-pcma';

const OUT: AudioTrackInfo = { kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 };

export function pcmaStage(): StageDefinition {
  return audioStage({
    name: PCMA_STAGE,
    create() {
      let pass = false;
      let dec: AudioDecoder | undefined;
      let enc: AudioEncoder | undefined;
      let rs: Resampler | undefined;
      let channels = 1;
      return {
        track(input) {
          pass = input.codec === 'g711a' && input.sampleRate === 8000 && input.channels === 1;
          if (pass) return input;
          dec = createDecoder(input);
          if (!dec) return undefined;
          enc = createEncoder({ codec: 'g711a', sampleRate: 8000 });
          rs = dec.sampleRate === 8000 ? undefined : new Resampler({ inputRate: dec.sampleRate, outputRate: 8000, channels: 1 });
          channels = Math.max(1, input.channels);
          return OUT;
        },
        unit(u: AccessUnit): readonly AccessUnit[] {
          if (pass) return [u];
          if (!dec || !enc) return [];
          let pcm = dec.decode(u.payload);
          if (channels > 1) pcm = firstChannel(pcm, channels);
          if (rs) pcm = toInt16(rs.process(pcm));
          if (pcm.length === 0) return [];
          return [withPayload(u, enc.encode(pcm), { codec: 'g711a' })];
        },
        // each frame is decoded before unit() returns: nothing of the input is kept
        holdsPayloads: () => false,
      };
    },
  });
}

function firstChannel(pcm: Int16Array, channels: number): Int16Array {
  const out = new Int16Array(Math.floor(pcm.length / channels));
  for (let i = 0; i < out.length; i++) out[i] = pcm[i * channels];
  return out;
}

function toInt16(f: Float32Array): Int16Array {
  const out = new Int16Array(f.length);
  for (let i = 0; i < f.length; i++) out[i] = Math.max(-32768, Math.min(32767, Math.round(f[i] * 32768)));
  return out;
}
