/**
 * HTTP Range for record file downloads (RFC 9110 §14). One byte range is served as 206; a request for
 * several ranges gets the whole file as 200, which the RFC allows (a server may ignore Range) and which
 * spares us multipart/byteranges. A header that does not parse is ignored the same way.
 */

export type RangeDecision =
  /** 200 with the whole file */
  | { status: 200 }
  /** 206 with bytes start..end (inclusive) and `Content-Range: bytes start-end/size` */
  | { status: 206; start: number; end: number; contentRange: string }
  /** 416 with `Content-Range: bytes *\/size` and no body */
  | { status: 416; contentRange: string };

const SPEC = /^\s*(\d*)\s*-\s*(\d*)\s*$/;

export function parseRange(header: string | undefined | null, size: number): RangeDecision {
  if (!Number.isSafeInteger(size) || size < 0) throw new RangeError(`file size ${size} must be a non-negative integer`);
  if (header == null) return { status: 200 };
  const m = /^\s*bytes\s*=(.*)$/i.exec(header);
  if (!m) return { status: 200 }; // another unit: ignore
  const specs = m[1]!.split(',').filter((s) => s.trim() !== '');
  if (specs.length !== 1) return { status: 200 };
  const sm = SPEC.exec(specs[0]!);
  if (!sm) return { status: 200 };
  const [, a, b] = sm as unknown as [string, string, string];
  if (a.length > 15 || b.length > 15) return { status: 200 }; // beyond any file we store: not worth exact arithmetic
  const unsatisfiable: RangeDecision = { status: 416, contentRange: `bytes */${size}` };
  let start: number;
  let end: number;
  if (a === '') {
    if (b === '') return { status: 200 };
    const n = Number(b);
    // A zero-length suffix, or any suffix of an empty file, selects nothing.
    if (n === 0 || size === 0) return unsatisfiable;
    start = Math.max(0, size - n);
    end = size - 1;
  } else {
    start = Number(a);
    if (b !== '' && Number(b) < start) return { status: 200 }; // invalid spec: ignore the header
    if (start >= size) return unsatisfiable;
    end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  }
  return { status: 206, start, end, contentRange: `bytes ${start}-${end}/${size}` };
}
