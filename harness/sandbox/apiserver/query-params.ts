/**
 * Query parameters decoded as kube-apiserver decodes them, and the same answers for malformed ones.
 *
 * kube-apiserver turns the query into `ListOptions` / `DeleteOptions` with apimachinery's parameter codec
 * (staging/src/k8s.io/apimachinery/pkg/runtime/codec.go `parameterCodec.DecodeParameters`, through the
 * generated `autoConvert_url_Values_To_v1_ListOptions` / `…_DeleteOptions` of pkg/apis/meta/v1/
 * zz_generated.conversion.go), whose per-type helpers are pkg/runtime/conversion.go:
 * - only the parameters of the options type are read, the first value of each; unknown ones are ignored on
 *   every verb (a body's `fieldValidation` concerns body fields, never the query);
 * - booleans (`Convert_Slice_string_To_bool`, `…_Pointer_bool`): `0` and any case of `false` are false,
 *   anything else — `1`, `t`, `True`, `yes`, the empty string — is true; never an error;
 * - integers (`string_to_int64` = Go's `strconv.ParseInt(s, 10, 64)`): optional sign, decimal digits
 *   (leading zeros allowed), no spaces, no `_`, no `0x`, no exponent, within int64; otherwise the error text
 *   `strconv.ParseInt: parsing "<value>": invalid syntax` / `value out of range` becomes a 400 BadRequest
 *   (apiserver pkg/endpoints/handlers/get.go `listOpts`, delete.go: `errors.NewBadRequest(err.Error())`);
 * - then `SetListOptionsDefaults` (pkg/apis/meta/internalversion/defaults.go) and `ValidateListOptions`
 *   (pkg/apis/meta/internalversion/validation/validation.go), whose field errors are a 422 Invalid
 *   `ListOptions.meta.k8s.io "" is invalid: …` (errors.NewInvalid). The WatchList feature gate is taken as
 *   enabled (its default from Kubernetes 1.34).
 * `pretty` is read apart, by the response negotiation (handlers/negotiation/negotiate.go `isPrettyPrint`):
 * Go's `strconv.ParseBool`, an unparsable value meaning false.
 */
import { badRequest, type FieldError, invalidOptions } from './status.ts';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** Go's `%q` of a string, as strconv.Quote writes it for the values a query can carry. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0) as number;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

/**
 * Go's `strconv.ParseInt(s, 10, 64)`.
 * @returns the value (a JS number: exact up to 2^53, which every timeout, limit and grace period is).
 * @throws KubeStatusError 400 BadRequest with Go's error text.
 */
export function parseGoInt64(s: string): number {
  if (!/^[+-]?[0-9]+$/.test(s)) throw badRequest(`strconv.ParseInt: parsing ${goQuote(s)}: invalid syntax`);
  const n = BigInt(s);
  if (n < INT64_MIN || n > INT64_MAX)
    throw badRequest(`strconv.ParseInt: parsing ${goQuote(s)}: value out of range`);
  return Number(n);
}

/** apimachinery's query boolean: undefined when absent; false for `0` and any case of `false`; else true. */
export function queryBool(query: URLSearchParams, name: string): boolean | undefined {
  const v = query.get(name);
  if (v === null) return undefined;
  return !(v === '0' || v.toLowerCase() === 'false');
}

/** A query integer (int64): undefined when absent. @throws KubeStatusError 400 when malformed. */
export function queryInt(query: URLSearchParams, name: string): number | undefined {
  const v = query.get(name);
  return v === null ? undefined : parseGoInt64(v);
}

/** Go's `strconv.ParseBool`, as `pretty` is read (an error counts as false). */
export function wantsPretty(query: URLSearchParams): boolean {
  const v = query.get('pretty');
  return v !== null && ['1', 't', 'T', 'TRUE', 'true', 'True'].includes(v);
}

/** The ListOptions of a list or watch, decoded, defaulted and validated. */
export interface ListOptions {
  watch: boolean;
  allowWatchBookmarks: boolean;
  /** As sent ('' when absent). */
  resourceVersion: string;
  /** '' when absent; otherwise 'Exact' or 'NotOlderThan' (validated). */
  resourceVersionMatch: string;
  timeoutSeconds: number | undefined;
  /** ≤ 0: no limit. */
  limit: number;
  continue: string;
  labelSelector: string;
  fieldSelector: string;
  /** undefined when absent (and not defaulted). */
  sendInitialEvents: boolean | undefined;
}

/**
 * Decodes, defaults and validates the ListOptions of a GET on a collection. `checkSelectors` runs where kube
 * parses the selectors (the conversion to the internal ListOptions): after the integers, before validation.
 * @throws KubeStatusError 400 for a malformed integer (or what `checkSelectors` throws), 422 Invalid
 *   ListOptions for a forbidden combination.
 */
export function parseListOptions(
  query: URLSearchParams,
  checkSelectors: (opts: ListOptions) => void = () => {},
): ListOptions {
  // Field order of ListOptions: the first malformed integer is the one reported.
  const opts: ListOptions = {
    labelSelector: query.get('labelSelector') ?? '',
    fieldSelector: query.get('fieldSelector') ?? '',
    watch: queryBool(query, 'watch') ?? false,
    allowWatchBookmarks: queryBool(query, 'allowWatchBookmarks') ?? false,
    resourceVersion: query.get('resourceVersion') ?? '',
    resourceVersionMatch: query.get('resourceVersionMatch') ?? '',
    timeoutSeconds: queryInt(query, 'timeoutSeconds'),
    limit: queryInt(query, 'limit') ?? 0,
    continue: query.get('continue') ?? '',
    sendInitialEvents: queryBool(query, 'sendInitialEvents'),
  };
  checkSelectors(opts);
  // SetListOptionsDefaults with WatchList enabled: a watch from "" or "0" is a watch-list.
  if (
    opts.watch &&
    opts.sendInitialEvents === undefined &&
    opts.resourceVersionMatch === '' &&
    (opts.resourceVersion === '' || opts.resourceVersion === '0')
  ) {
    opts.sendInitialEvents = true;
    opts.resourceVersionMatch = 'NotOlderThan';
  }
  const errs = opts.watch ? watchOptionErrors(opts) : listOptionErrors(opts);
  if (errs.length > 0) throw invalidOptions('ListOptions', errs);
  return opts;
}

function forbidden(field: string, detail: string): FieldError {
  return { type: 'FieldValueForbidden', field, body: `Forbidden: ${detail}` };
}

function notSupported(field: string, value: string, supported: string[]): FieldError {
  return {
    type: 'FieldValueNotSupported',
    field,
    body: `Unsupported value: ${JSON.stringify(value)}: supported values: ${supported.map((s) => goQuote(s)).join(', ')}`,
  };
}

/** ValidateListOptions for a list. */
function listOptionErrors(o: ListOptions): FieldError[] {
  const errs: FieldError[] = [];
  const match = o.resourceVersionMatch;
  if (match !== '') {
    if (o.resourceVersion === '')
      errs.push(
        forbidden(
          'resourceVersionMatch',
          'resourceVersionMatch is forbidden unless resourceVersion is provided',
        ),
      );
    if (o.continue !== '')
      errs.push(
        forbidden('resourceVersionMatch', 'resourceVersionMatch is forbidden when continue is provided'),
      );
    if (match !== 'Exact' && match !== 'NotOlderThan')
      errs.push(notSupported('resourceVersionMatch', match, ['Exact', 'NotOlderThan', '']));
    if (match === 'Exact' && o.resourceVersion === '0')
      errs.push(
        forbidden(
          'resourceVersionMatch',
          'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
        ),
      );
  }
  if (o.sendInitialEvents !== undefined)
    errs.push(forbidden('sendInitialEvents', 'sendInitialEvents is forbidden for list'));
  return errs;
}

/** validateWatchOptions (WatchList enabled). */
function watchOptionErrors(o: ListOptions): FieldError[] {
  const errs: FieldError[] = [];
  const match = o.resourceVersionMatch;
  if (o.sendInitialEvents !== undefined && match !== 'NotOlderThan')
    errs.push(
      forbidden(
        'resourceVersionMatch',
        'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan',
      ),
    );
  if (match !== '') {
    if (o.sendInitialEvents === undefined)
      errs.push(
        forbidden(
          'resourceVersionMatch',
          'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided',
        ),
      );
    if (match !== 'NotOlderThan') errs.push(notSupported('resourceVersionMatch', match, ['NotOlderThan']));
    if (o.continue !== '')
      errs.push(
        forbidden('resourceVersionMatch', 'resourceVersionMatch is forbidden when continue is provided'),
      );
  }
  return errs;
}

/** The DeleteOptions a DELETE carries in its query. */
export interface DeleteQueryOptions {
  gracePeriodSeconds?: number;
  orphanDependents?: boolean;
  propagationPolicy?: string;
  dryRun?: string[];
}

/**
 * Decodes the query of a DELETE without a body (with a body, kube-apiserver reads the body alone:
 * handlers/delete.go decodes the query only when the body is empty).
 * @throws KubeStatusError 400 for a malformed gracePeriodSeconds.
 */
export function parseDeleteQuery(query: URLSearchParams): DeleteQueryOptions {
  const out: DeleteQueryOptions = {};
  const grace = queryInt(query, 'gracePeriodSeconds');
  if (grace !== undefined) out.gracePeriodSeconds = grace;
  const orphan = queryBool(query, 'orphanDependents');
  if (orphan !== undefined) out.orphanDependents = orphan;
  const policy = query.get('propagationPolicy');
  if (policy !== null) out.propagationPolicy = policy;
  if (query.has('dryRun')) out.dryRun = query.getAll('dryRun');
  return out;
}

/**
 * ValidateDeleteOptions (pkg/apis/meta/v1/validation/validation.go), for the body's and the query's options.
 * @throws KubeStatusError 422 Invalid DeleteOptions.
 */
export function validateDeleteOptions(o: {
  orphanDependents?: boolean | null;
  propagationPolicy?: string | null;
  dryRun?: string[] | null;
}): void {
  const errs: FieldError[] = [];
  const policy = o.propagationPolicy ?? undefined;
  if (o.orphanDependents != null && policy !== undefined)
    errs.push({
      type: 'FieldValueInvalid',
      field: 'propagationPolicy',
      body: `Invalid value: ${JSON.stringify(policy)}: orphanDependents and deletionPropagation cannot be both set`,
    });
  if (policy !== undefined && !['Foreground', 'Background', 'Orphan'].includes(policy))
    errs.push(notSupported('propagationPolicy', policy, ['Foreground', 'Background', 'Orphan', 'nil']));
  const dryRun = o.dryRun ?? [];
  if (!dryRun.every((d) => d === 'All'))
    errs.push({
      type: 'FieldValueNotSupported',
      field: 'dryRun',
      body: `Unsupported value: ${JSON.stringify(dryRun)}: supported values: "All"`,
    });
  if (errs.length > 0) throw invalidOptions('DeleteOptions', errs);
}

/**
 * The query options of a create, update or patch (CreateOptions, UpdateOptions, PatchOptions), validated as
 * handlers/create.go, update.go and patch.go do before decoding the body: `dryRun` only `All`, `fieldValidation`
 * one of "", Ignore, Strict, Warn (it governs unknown fields of the body, never unknown query parameters).
 * @throws KubeStatusError 422 Invalid `<kind>.meta.k8s.io ""`; 400 for a valid `dryRun=All`, which the sandbox
 *   does not carry out.
 */
export function validateWriteOptions(
  kind: 'CreateOptions' | 'UpdateOptions' | 'PatchOptions',
  query: URLSearchParams,
): void {
  const errs: FieldError[] = [];
  const dryRun = query.getAll('dryRun');
  if (!dryRun.every((d) => d === 'All'))
    errs.push({
      type: 'FieldValueNotSupported',
      field: 'dryRun',
      body: `Unsupported value: ${JSON.stringify(dryRun)}: supported values: "All"`,
    });
  const fieldValidation = query.get('fieldValidation') ?? '';
  if (!['', 'Ignore', 'Strict', 'Warn'].includes(fieldValidation))
    errs.push(notSupported('fieldValidation', fieldValidation, ['', 'Ignore', 'Strict', 'Warn']));
  if (errs.length > 0) throw invalidOptions(kind, errs);
  if (dryRun.length > 0) throw badRequest('dryRun is not supported by the sandbox API server');
}
