/**
 * Validation of rendered Kubernetes objects against the Kubernetes API schemas, without a cluster.
 *
 * Two checks, each from a maintained npm package that ships the API's models:
 * - schema: `kubernetes-models` (JSON schemas generated from the Kubernetes OpenAPI document, compiled
 *   with Ajv): types, required fields, enums, formats such as quantities and int-or-string;
 * - unknown fields: the generated models of `@kubernetes/client-node` (also from the OpenAPI
 *   document) list every field of every type. The JSON schemas allow extra properties, so a typo such
 *   as `readinesProbe` would pass them, while the API server drops or rejects it (strict field
 *   validation); this is the check `kubeconform -strict` makes.
 */
import * as clientNodeModels from '@kubernetes/client-node';

/** A decoded Kubernetes object: only `apiVersion`, `kind` and `metadata.name` are relied on. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [key: string]: unknown };
  [key: string]: unknown;
}

/** Thrown when an object's `apiVersion`/`kind` has no model in either package (a CRD, a typo). */
export class UnknownKindError extends Error {
  override name = 'UnknownKindError';
}

interface AttributeType {
  baseName: string;
  type: string;
}

interface GeneratedModel {
  getAttributeTypeMap(): AttributeType[];
}

interface ValidatingModel {
  validate(): void;
}

type ModelModule = Record<string, (new (data: unknown) => ValidatingModel) | undefined>;

const models = clientNodeModels as unknown as Record<string, GeneratedModel | undefined>;

/** `apps/v1` → `kubernetes-models/apps/v1`; the core group `v1` → `kubernetes-models/v1`. */
async function loadSchemaModel(
  apiVersion: string,
  kind: string,
): Promise<new (data: unknown) => ValidatingModel> {
  let mod: ModelModule;
  try {
    mod = (await import(/* @vite-ignore */ `kubernetes-models/${apiVersion}`)) as ModelModule;
  } catch {
    throw new UnknownKindError(`no schema for apiVersion ${apiVersion}`);
  }
  const model = mod[kind];
  if (model === undefined) throw new UnknownKindError(`no schema for ${apiVersion} ${kind}`);
  return model;
}

/** `apps/v1` + `Deployment` → `V1Deployment`, the client-node model's class name. */
function generatedModelName(apiVersion: string, kind: string): string {
  const version = apiVersion.split('/').pop() ?? apiVersion;
  return `${version.charAt(0).toUpperCase()}${version.slice(1)}${kind}`;
}

/** Pushes `path: unknown field` for every property that `type` does not declare, recursively. */
function collectUnknownFields(value: unknown, type: string, path: string, problems: string[]): void {
  if (value === null || value === undefined) return;
  const array = /^Array<(.+)>$/.exec(type);
  if (array?.[1] !== undefined) {
    if (Array.isArray(value)) {
      value.forEach((item, i) => {
        collectUnknownFields(item, array[1] as string, `${path}[${i}]`, problems);
      });
    }
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map?.[1] !== undefined) {
    if (typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        collectUnknownFields(item, map[1], `${path}.${key}`, problems);
      }
    }
    return;
  }
  const model = models[type];
  // Primitives, `any`, `IntOrString` and `Date` have no model: the schema check covers their types.
  if (model === undefined || typeof model.getAttributeTypeMap !== 'function' || typeof value !== 'object')
    return;
  const fields = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  for (const [key, item] of Object.entries(value)) {
    const fieldType = fields.get(key);
    if (fieldType === undefined) problems.push(`${path}.${key}: unknown field`);
    else collectUnknownFields(item, fieldType, `${path}.${key}`, problems);
  }
}

/**
 * Validates one object against the Kubernetes API schemas.
 *
 * @returns the problems found, one line each (`Deployment/x: data/spec/replicas must be integer`,
 *   `Deployment/x: .spec.template.spec.containers[0].readinesProbe: unknown field`); empty when valid.
 * @throws {UnknownKindError} when the object's apiVersion/kind is not a built-in Kubernetes type.
 */
export async function validateKubeObject(object: KubeObject): Promise<string[]> {
  const label = `${object.kind}/${object.metadata?.name ?? '?'}`;
  const SchemaModel = await loadSchemaModel(object.apiVersion, object.kind);
  const modelName = generatedModelName(object.apiVersion, object.kind);
  if (models[modelName] === undefined)
    throw new UnknownKindError(`no model ${modelName} in @kubernetes/client-node`);

  const problems: string[] = [];
  try {
    new SchemaModel(object).validate();
  } catch (err) {
    problems.push(`${label}: ${(err as Error).message}`);
  }
  const unknown: string[] = [];
  collectUnknownFields(object, modelName, '', unknown);
  problems.push(...unknown.map((p) => `${label}: ${p}`));
  return problems;
}
