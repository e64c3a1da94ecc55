/**
 * Validates `check --output json` documents against the documented schema, docs/check-output.schema.json
 * (JSON Schema 2020-12, with ajv: the validator Fastify itself uses).
 */
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';

const schema = JSON.parse(
  readFileSync(new URL('../../docs/check-output.schema.json', import.meta.url), 'utf8'),
) as Record<string, unknown>;
const validate = new Ajv2020({ allErrors: true, strict: true, strictRequired: false }).compile(schema);

/** The schema's errors for `doc` (each `path: message`); empty when it is valid. */
export function checkOutputErrors(doc: unknown): string[] {
  if (validate(doc)) return [];
  return (validate.errors ?? []).map((e) => `${e.instancePath || '/'}: ${e.message ?? ''}`);
}
