/** A URL as it may be logged: its password replaced, so a Redis or callback URL with credentials never reaches a log. */
export function redactUrlPassword(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}
