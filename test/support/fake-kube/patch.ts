// Patch bodies as the API server applies them: JSON merge patch (RFC 7386), JSON patch (RFC 6902),
// and strategic merge patch reduced to what our object shapes need (lists merged by their merge key).

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

export class PatchError extends Error {}

const isObject = (v: unknown): v is JsonObject => v !== null && typeof v === 'object' && !Array.isArray(v);
const clone = <T>(v: T): T => structuredClone(v);

export function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return clone(patch);
  const result: JsonObject = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete result[k];
    else result[k] = mergePatch(result[k] ?? null, v);
  }
  return result;
}

// Merge keys of the list fields in pod templates and statuses (from the Kubernetes API types' patchMergeKey).
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  volumes: 'name',
  env: 'name',
  imagePullSecrets: 'name',
  ports: 'containerPort',
  volumeMounts: 'mountPath',
  volumeDevices: 'devicePath',
  conditions: 'type',
  hostAliases: 'ip',
  topologySpreadConstraints: 'topologyKey',
};

/** Strategic merge patch for our shapes: maps merge like a merge patch, keyed lists merge by key, `$patch`/`$setElementOrder` honoured. */
export function strategicMergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return clone(patch);
  if (patch.$patch === 'replace') {
    const { $patch: _ignored, ...rest } = patch;
    return stripDirectives(rest);
  }
  if (patch.$patch === 'delete') return null;
  const result: JsonObject = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith('$')) continue;
    if (v === null) {
      delete result[k];
      continue;
    }
    const mergeKey = MERGE_KEYS[k];
    const current = result[k];
    if (Array.isArray(v) && mergeKey !== undefined && Array.isArray(current)) {
      const order = patch[`$setElementOrder/${k}`];
      result[k] = mergeKeyedList(current, v, mergeKey, Array.isArray(order) ? order : undefined);
    } else if (Array.isArray(v)) {
      result[k] = stripDirectives(v);
    } else {
      result[k] = strategicMergePatch(current ?? null, v);
    }
  }
  for (const [k, v] of Object.entries(patch)) {
    const field = k.startsWith('$deleteFromPrimitiveList/') ? k.slice('$deleteFromPrimitiveList/'.length) : undefined;
    const list = field === undefined ? undefined : result[field];
    if (field !== undefined && Array.isArray(list) && Array.isArray(v)) result[field] = list.filter((x) => !v.includes(x));
  }
  return result;
}

function mergeKeyedList(current: Json[], patch: Json[], key: string, order: Json[] | undefined): Json[] {
  const out = current.map((x) => clone(x));
  for (const item of patch) {
    if (!isObject(item) || item[key] === undefined) return patch.map(stripDirectives);
    const at = out.findIndex((x) => isObject(x) && x[key] === item[key]);
    if (item.$patch === 'delete') {
      if (at >= 0) out.splice(at, 1);
    } else if (at >= 0) {
      out[at] = strategicMergePatch(out[at]!, item);
    } else {
      out.push(stripDirectives(item));
    }
  }
  if (order === undefined) return out;
  const rank = (x: Json): number => {
    const i = order.findIndex((o) => isObject(o) && isObject(x) && o[key] === x[key]);
    return i < 0 ? order.length : i;
  };
  return out
    .map((x, i) => ({ x, i }))
    .sort((a, b) => rank(a.x) - rank(b.x) || a.i - b.i)
    .map(({ x }) => x);
}

function stripDirectives(v: Json): Json {
  if (Array.isArray(v)) return v.map(stripDirectives);
  if (!isObject(v)) return v;
  const out: JsonObject = {};
  for (const [k, x] of Object.entries(v)) if (!k.startsWith('$')) out[k] = stripDirectives(x);
  return out;
}

interface JsonPatchOp {
  op: string;
  path: string;
  value?: Json;
  from?: string;
}

function pointer(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw new PatchError(`invalid JSON pointer "${path}"`);
  return path
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function locate(doc: Json, tokens: string[], path: string): { parent: JsonObject | Json[]; last: string } {
  let node: Json = doc;
  for (const t of tokens.slice(0, -1)) {
    const next: Json | undefined = Array.isArray(node) ? node[Number(t)] : isObject(node) ? node[t] : undefined;
    if (next === undefined) throw new PatchError(`doc is missing path: "${path}"`);
    node = next;
  }
  if (!Array.isArray(node) && !isObject(node)) throw new PatchError(`doc is missing path: "${path}"`);
  return { parent: node, last: tokens[tokens.length - 1]! };
}

function read(doc: Json, path: string): Json {
  const tokens = pointer(path);
  if (tokens.length === 0) return doc;
  const { parent, last } = locate(doc, tokens, path);
  const v = Array.isArray(parent) ? parent[Number(last)] : parent[last];
  if (v === undefined) throw new PatchError(`doc is missing path: "${path}"`);
  return v;
}

function remove(doc: Json, path: string): Json {
  const { parent, last } = locate(doc, pointer(path), path);
  if (Array.isArray(parent)) {
    const i = Number(last);
    if (!(i >= 0 && i < parent.length)) throw new PatchError(`doc is missing path: "${path}"`);
    return parent.splice(i, 1)[0]!;
  }
  if (!(last in parent)) throw new PatchError(`doc is missing path: "${path}"`);
  const v = parent[last]!;
  delete parent[last];
  return v;
}

function add(doc: Json, path: string, value: Json, replace: boolean): Json {
  const tokens = pointer(path);
  if (tokens.length === 0) return clone(value);
  const { parent, last } = locate(doc, tokens, path);
  if (Array.isArray(parent)) {
    const i = last === '-' ? parent.length : Number(last);
    if (!(i >= 0 && i <= parent.length)) throw new PatchError(`invalid array index in "${path}"`);
    if (replace) parent[i] = clone(value);
    else parent.splice(i, 0, clone(value));
  } else {
    if (replace && !(last in parent)) throw new PatchError(`doc is missing path: "${path}"`);
    parent[last] = clone(value);
  }
  return doc;
}

export function jsonPatch(target: Json, ops: unknown): Json {
  if (!Array.isArray(ops)) throw new PatchError('a JSON patch must be an array of operations');
  let doc = clone(target);
  for (const op of ops as JsonPatchOp[]) {
    switch (op.op) {
      case 'add':
        doc = add(doc, op.path, op.value ?? null, false);
        break;
      case 'replace':
        doc = add(doc, op.path, op.value ?? null, true);
        break;
      case 'remove':
        remove(doc, op.path);
        break;
      case 'move': {
        const v = remove(doc, op.from ?? '');
        doc = add(doc, op.path, v, false);
        break;
      }
      case 'copy':
        doc = add(doc, op.path, read(doc, op.from ?? ''), false);
        break;
      case 'test':
        if (JSON.stringify(read(doc, op.path)) !== JSON.stringify(op.value)) throw new PatchError(`testing value ${op.path} failed`);
        break;
      default:
        throw new PatchError(`unexpected kind: ${String(op.op)}`);
    }
  }
  return doc;
}

export type { Json, JsonObject };
