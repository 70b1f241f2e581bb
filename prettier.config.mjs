// Prettier for the code: TypeScript, the console's JavaScript, JSON. The settings are the hand style the code was
// written in (single quotes, semicolons, two spaces, trailing commas where a list breaks), with lines up to 160
// columns, which much of the code already uses; a narrower width re-wraps many more lines (see issue 45).
/** @type {import('prettier').Config} */
export default {
  singleQuote: true,
  semi: true,
  tabWidth: 2,
  trailingComma: 'all',
  printWidth: 160,
};
