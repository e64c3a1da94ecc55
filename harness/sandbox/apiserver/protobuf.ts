/**
 * The request bodies kubectl sends as Kubernetes protobuf (`application/vnd.kubernetes.protobuf`) to the
 * endpoints it reaches through a typed clientset: `kubectl create namespace` (a Namespace) and `kubectl auth
 * can-i` (a SelfSubjectAccessReview). kube-apiserver decodes them with its protobuf serializer
 * (apimachinery/pkg/runtime/serializer/protobuf): the 4-byte magic `k8s\0`, then a `runtime.Unknown` whose
 * field 2 (`raw`) holds the object's own message. Only the fields the sandbox reads are decoded, by their
 * field numbers in k8s.io/api's generated.proto; the answers stay JSON (the clients accept it).
 */
import { badRequest } from './status.ts';

/** The media type of a Kubernetes protobuf body. */
export const PROTOBUF_MEDIA_TYPE = 'application/vnd.kubernetes.protobuf';

const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

/** A decoded message: field number → every value it had (bytes for length-delimited fields, else a number). */
type Fields = Map<number, (Buffer | number)[]>;

/** Reads one protobuf message's fields (wire types 0, 1, 2, 5). @throws KubeStatusError 400 when malformed. */
function readFields(buf: Buffer): Fields {
  const fields: Fields = new Map();
  let i = 0;
  const varint = (): number => {
    let result = 0;
    let shift = 0;
    for (;;) {
      if (i >= buf.length) throw badRequest('malformed protobuf body: truncated varint');
      const b = buf[i++] as number;
      result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return result;
      shift += 7;
      if (shift > 63) throw badRequest('malformed protobuf body: varint too long');
    }
  };
  while (i < buf.length) {
    const key = varint();
    const field = Math.floor(key / 8);
    const wire = key % 8;
    let value: Buffer | number;
    if (wire === 0) value = varint();
    else if (wire === 2) {
      const len = varint();
      if (i + len > buf.length) throw badRequest('malformed protobuf body: truncated field');
      value = buf.subarray(i, i + len);
      i += len;
    } else if (wire === 1 || wire === 5) {
      const len = wire === 1 ? 8 : 4;
      value = buf.readUIntLE(i, Math.min(len, 6));
      i += len;
    } else throw badRequest(`malformed protobuf body: wire type ${wire}`);
    const list = fields.get(field) ?? [];
    list.push(value);
    fields.set(field, list);
  }
  return fields;
}

const str = (f: Fields, n: number): string | undefined => {
  const v = f.get(n)?.at(-1);
  return Buffer.isBuffer(v) ? v.toString('utf8') : undefined;
};
const msg = (f: Fields, n: number): Fields | undefined => {
  const v = f.get(n)?.at(-1);
  return Buffer.isBuffer(v) ? readFields(v) : undefined;
};

/** The object message inside the envelope. @throws KubeStatusError 400 without the magic or the raw object. */
function unwrap(body: Buffer): Fields {
  if (body.length < 4 || !body.subarray(0, 4).equals(MAGIC))
    throw badRequest('the body of the request is not Kubernetes protobuf (no k8s\\0 prefix)');
  const raw = msg(readFields(body.subarray(4)), 2);
  if (!raw) throw badRequest('malformed protobuf body: no raw object');
  return raw;
}

/** ObjectMeta (field 1 of every object): name (1), generateName (2), namespace (3), labels (11). */
function objectMeta(f: Fields | undefined): Record<string, unknown> {
  if (!f) return {};
  const labels: Record<string, string> = {};
  for (const entry of f.get(11) ?? []) {
    if (!Buffer.isBuffer(entry)) continue;
    const e = readFields(entry);
    labels[str(e, 1) ?? ''] = str(e, 2) ?? '';
  }
  return {
    ...(str(f, 1) ? { name: str(f, 1) } : {}),
    ...(str(f, 2) ? { generateName: str(f, 2) } : {}),
    ...(str(f, 3) ? { namespace: str(f, 3) } : {}),
    ...(Object.keys(labels).length > 0 ? { labels } : {}),
  };
}

/** A protobuf Namespace as its JSON form (metadata only: the sandbox keeps name and labels). */
export function decodeNamespace(body: Buffer): unknown {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: objectMeta(msg(unwrap(body), 1)) };
}

/**
 * A protobuf SelfSubjectAccessReview as its JSON form: spec (2) → resourceAttributes (1: namespace 1, verb 2,
 * group 3, version 4, resource 5, subresource 6, name 7) or nonResourceAttributes (2: path 1, verb 2).
 */
export function decodeSelfSubjectAccessReview(body: Buffer): unknown {
  const spec = msg(unwrap(body), 2);
  const ra = spec && msg(spec, 1);
  const nra = spec && msg(spec, 2);
  const strings = (f: Fields, names: Record<number, string>) =>
    Object.fromEntries(
      Object.entries(names)
        .map(([n, name]) => [name, str(f, Number(n))] as const)
        .filter(([, v]) => v !== undefined),
    );
  return {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SelfSubjectAccessReview',
    spec: {
      ...(ra
        ? {
            resourceAttributes: strings(ra, {
              1: 'namespace',
              2: 'verb',
              3: 'group',
              4: 'version',
              5: 'resource',
              6: 'subresource',
              7: 'name',
            }),
          }
        : {}),
      ...(nra ? { nonResourceAttributes: strings(nra, { 1: 'path', 2: 'verb' }) } : {}),
    },
  };
}
