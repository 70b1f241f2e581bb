/** Error codes of decisions.md: existing enterprise clients branch on these values. */
export const ErrCode = {
  OK: 0,
  INTERNAL_ERROR: -2,
  EXECUTION_ERROR: -3,
  TIMEOUT: -5,
  INVALID_PARAM: -7,
  RECORD_NOT_FOUND: -8,
  AUTHENTICATION_FAILED: -9,
  INVALID_TOKEN: -10,
  ACCESS_DENIED: -11,
  BAD_REQUEST: -13,
  NO_CTRL: -25,
  NO_CONNECTION_AVAILABLE: -27,
  RETRY: -207,
} as const;
export type ErrCodeValue = (typeof ErrCode)[keyof typeof ErrCode];

/** HTTP status for each code; business errors stay 200 so clients that only read errCode keep working. */
const HTTP_STATUS: Partial<Record<ErrCodeValue, number>> = {
  [ErrCode.INTERNAL_ERROR]: 500,
  [ErrCode.RECORD_NOT_FOUND]: 404,
  [ErrCode.AUTHENTICATION_FAILED]: 401,
  [ErrCode.ACCESS_DENIED]: 403,
  [ErrCode.BAD_REQUEST]: 400,
};

/** An error a route handler throws to answer with a given errCode; the message is shown to the caller. */
export class GatewayError extends Error {
  readonly errCode: ErrCodeValue;
  readonly httpStatus: number;
  constructor(errCode: ErrCodeValue, message: string, httpStatus?: number) {
    super(message);
    this.name = 'GatewayError';
    this.errCode = errCode;
    this.httpStatus = httpStatus ?? HTTP_STATUS[errCode] ?? 200;
  }
}

/** The -7 reply naming the first bad field, worded as existing clients expect. */
export function invalidParam(field: string, detail?: string): GatewayError {
  return new GatewayError(ErrCode.INVALID_PARAM, `Invalid parameter \`${field}\`.` + (detail ? ` ${detail}` : ''));
}
