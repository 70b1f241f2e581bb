/**
 * The JSON Schema of the open body, generated from the field tables the validator reads (open-fields.ts), rules
 * between fields included, so a change of a rule changes the document (Sessions.openRequestSchema).
 */
import { objectSchema, type JsonSchema } from '../../plugin-sdk/api-docs';
import { DATA_TYP_BY_TYP, OPEN_CROSS_RULES, OPEN_FIELDS, SCHEMES_BY_FMT } from './open-fields';

/** JSON Schema of the open body: the fields, then the rules between them as if/then. */
export function openRequestSchema(): JsonSchema {
  const conditions: JsonSchema[] = [];
  for (const [typ, rule] of Object.entries(DATA_TYP_BY_TYP)) {
    conditions.push({
      if: { properties: { typ: { const: typ } }, required: ['typ'] },
      then: { properties: { dataTyp: { enum: [...rule.values, null] } } },
    });
  }
  conditions.push({
    // subFmt (not null) only with fmt 1
    if: { properties: { subFmt: { type: 'string' } }, required: ['subFmt'] },
    then: { properties: { fmt: { const: OPEN_CROSS_RULES.subFmtFmt } }, required: ['fmt'] },
  });
  conditions.push({
    if: { properties: { record: { const: true } }, required: ['record'] },
    // an absent or null fmt is the default 0
    then: { properties: { fmt: { enum: [OPEN_CROSS_RULES.recordFmt, null] } } },
  });
  for (const [fmt, schemes] of Object.entries(SCHEMES_BY_FMT)) {
    const f = Number(fmt);
    const fmtIs = f === OPEN_FIELDS.fmt.default ? { enum: [f, null] } : { const: f };
    conditions.push({
      if: { properties: { fmt: fmtIs }, ...(f === OPEN_FIELDS.fmt.default ? {} : { required: ['fmt'] }) },
      then: { properties: { scheme: { enum: [...schemes, null] } } },
    });
  }
  // chanId or its alias channelId
  conditions.push({ anyOf: [{ required: ['chanId'] }, { required: ['channelId'] }] });
  return {
    type: 'object',
    description: 'Open a channel (strm-api 3.4.4). Fields are checked in this order; the first bad one answers -7 naming it. `null` counts as absent.',
    ...objectSchema(OPEN_FIELDS),
    allOf: conditions,
  };
}
